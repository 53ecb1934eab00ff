"""One optimizer step of any workload: its phases, each over all micro-batches, then that phase's optimizer.

nanoGPT's shape: autocast and GradScaler built once per phase (the scaler enabled only for fp16), so the step has
no precision branches; each micro-batch loss is divided by the number of micro-batches, so the accumulated
gradient equals that of one batch `accumulation_steps` times larger (BatchNorm statistics aside). Under DDP a
phase's models skip the gradient all-reduce on all but the last micro-batch (no_sync); models a phase does not
update are handed to its loss unwrapped, and `backward(inputs=...)` computes only the updated models' gradients.
No `.item()` here: the running loss stays on the device and is read at window ends only.

Each part of a step (data, forward, backward, optimizer) runs inside `self.mark(part)`: one shared, empty context
in a trial (no branch, no cost worth measuring); `tuner profile` sets a PhaseClock there for the steps it records.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from tuner.config import Params
from tuner.device import Device, is_oom
from tuner.data import batch_len, to_channels_last, to_device
from tuner.train.distributed import unwrap, without_ddp
from tuner.workload import OptimizerFactory, Phase, Shared, Workload

PhaseRange = Callable[[str], contextlib.AbstractContextManager[Any]]
"""Called with "data", "forward", "backward" or "optimizer"; the context wraps that part of the step."""

_UNMARKED = contextlib.nullcontext()  # reentrant and reusable: one object serves every part of every step


def _same(batch: Any) -> Any:
    return batch


def unmarked(part: str) -> contextlib.AbstractContextManager[Any]:
    return _UNMARKED


DEFAULT_HYPERPARAMETERS: dict[str, Any] = {"lr": 1e-3, "betas": (0.9, 0.999)}  # torch.optim.Adam's own


def default_optimizer(device: Device) -> OptimizerFactory:
    """Adam; fused on CUDA, where GradScaler then unscales inside the kernel instead of reading `found_inf` back
    to the host every step (a sync that would rank fp16 down for the harness's sake). An explicit `foreach=` or
    `fused=` (the optimizer_impl knob) replaces that choice."""

    def make(params: Any, foreach: bool | None = None, fused: bool | None = None,
             **hyperparameters: Any) -> torch.optim.Optimizer:
        if foreach is None and fused is None:
            fused = True if device.is_cuda else None
        return torch.optim.Adam(params, foreach=foreach, fused=fused, **hyperparameters)

    return make


def implementation(factory: Any, impl: str) -> tuple[dict[str, Any], str | None]:
    """The keyword argument the optimizer_impl knob passes to `factory` (`{"fused": True}`), and, when the factory's
    signature takes no such argument (neither by name nor **kwargs), none and the sentence saying so."""
    if impl == "default":
        return {}, None
    try:
        taken = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        taken = {}
    if impl in taken or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in taken.values()):
        return {impl: True}, None
    name = getattr(factory, "__qualname__", None) or type(factory).__name__
    return {}, f"{impl} not passed: the optimizer factory {name} takes no {impl}= argument"


def set_memory_format(models: dict[str, nn.Module], channels_last: bool) -> None:
    """The models' 4-D weights in channels_last (or back in the default format), as `model.to(memory_format=...)`
    does (nothing else changes); models already in that format are left alone. Called by
    tuner.train.trial.build_models, before a DDP wrap."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    for model in models.values():
        plain = unwrap(model)
        if any(t.dim() == 4 and not t.is_contiguous(memory_format=fmt)
               for t in (*plain.parameters(), *plain.buffers())):
            plain.to(memory_format=fmt)


def phase_hyperparameters(workload: Workload, phase: Phase, params: Params) -> dict[str, Any]:
    """The optimizer keyword arguments a phase trains with: the workload's own (the phase's merged over them;
    torch Adam's defaults when it declares none), then the trial's params.lr / lr_scale / beta1 / beta2.
    A param the workload's optimizer does not take (betas for SGD) is a ConfigError naming it."""
    from tuner.errors import ConfigError

    hp = {**(workload.hyperparameters or DEFAULT_HYPERPARAMETERS), **(phase.hyperparameters or {})}
    if params.lr is not None:
        hp["lr"] = params.lr
    if params.lr_scale is not None:
        if "lr" not in hp:
            raise ConfigError("params.lr_scale: the workload declares no lr in its hyperparameters to scale; "
                              "drop lr_scale or declare Workload(hyperparameters={'lr': ...})")
        hp["lr"] = hp["lr"] * params.lr_scale
    if params.beta1 is not None or params.beta2 is not None:
        if "betas" not in hp:
            raise ConfigError("params.beta1/beta2: the workload's optimizer takes no betas (its hyperparameters: "
                              f"{', '.join(hp) or 'none'}); drop them from the config or the space")
        own = hp["betas"]
        hp["betas"] = (params.beta1 if params.beta1 is not None else own[0],
                       params.beta2 if params.beta2 is not None else own[1])
    return hp


def own_params(workload: Workload) -> dict[str, float]:
    """The Params values that stand for the workload's own optimizer settings (its first phase's): what a
    study's baseline trains with where the space searches lr, lr_scale or the betas."""
    hp = phase_hyperparameters(workload, workload.training_phases()[0], Params())
    own: dict[str, float] = {}
    if isinstance(hp.get("lr"), (int, float)):
        own["lr"], own["lr_scale"] = float(hp["lr"]), 1.0
    betas = hp.get("betas")
    if isinstance(betas, (tuple, list)) and len(betas) == 2:
        own["beta1"], own["beta2"] = float(betas[0]), float(betas[1])
    return own


def takes_models(factory: Any) -> bool:
    """Whether an optimizer factory's first parameter is named `models` (it builds its own parameter groups)."""
    try:
        first = next(iter(inspect.signature(factory).parameters.values()), None)
    except (TypeError, ValueError):
        return False
    return first is not None and first.name == "models"


def json_value(value: Any) -> Any:
    """A hyperparameter as the record shows it: numbers, text and pairs as they are, anything else as text."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return str(value)


def _where(fn: Any) -> str:
    """`file.py:LINE` where a user's function is defined, or its name."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else getattr(fn, "__name__", repr(fn))


class PhaseStep:
    """Callable: consume `accumulation_steps` micro-batches from an iterator, return samples consumed."""

    def __init__(self, workload: Workload, models: dict[str, nn.Module], params: Params, device: Device) -> None:
        self.params, self.device = params, device
        self.mark: PhaseRange = unmarked  # what wraps each part of a step: tuner profile sets it for what it records
        self.acc = params.accumulation_steps
        self.phases: tuple[Phase, ...] = workload.training_phases()
        self.models = models  # in the memory format params ask for: tuner.train.trial.build_models put them there
        self.prepare: Callable[[Any], Any] = to_channels_last if params.channels_last else _same
        plain = {k: unwrap(m) for k, m in models.items()}
        bare = {k: without_ddp(m) for k, m in models.items()}  # compiled, where compiled, but without DDP
        self.views, self.optimizers, self.scalers, self.inputs, self.owned = [], [], [], [], []
        self.schedulers: list[Any] = []
        self.settings: dict[str, dict[str, Any]] = {}  # per phase: the optimizer and what it was built with
        self.grad_clip = workload.grad_clip
        self.sample_size = workload.sample_size
        self.units = 0  # the workload's sample_unit consumed (sample_size of each batch), warm-up included
        self.samples = 0
        self.losses = [workload.loss if workload.loss is not None else ph.loss for ph in self.phases]
        for phase in self.phases:
            mine = set(phase.models)
            self.views.append({k: (models[k] if k in mine else bare[k]) for k in models})
            owned = [p for k in phase.models for p in plain[k].parameters() if p.requires_grad]
            factory = phase.optimizer or workload.optimizer or default_optimizer(device)
            hp = phase_hyperparameters(workload, phase, params)
            first = {k: plain[k] for k in phase.models} if takes_models(factory) else owned
            impl, not_passed = implementation(factory, params.optimizer_impl)
            opt = factory(first, **{**hp, **impl})
            self.optimizers.append(opt)
            self.owned.append(owned)
            self.schedulers.append(torch.optim.lr_scheduler.LambdaLR(opt, workload.lr_schedule)
                                   if workload.lr_schedule is not None else None)
            # One scaler per optimizer: one phase's overflow must not change another's scale.
            self.scalers.append(device.grad_scaler(params.precision))
            self.inputs.append(None if mine == set(models) else owned)
            shown = {"optimizer": type(opt).__name__, **{k: json_value(v) for k, v in hp.items()}}
            shown.update({k: v for k, v in impl.items()})
            if not_passed is not None:
                shown["optimizer_impl"] = not_passed
            if self.grad_clip is not None:
                shown["grad_clip"] = self.grad_clip
            if workload.lr_schedule is not None:
                shown["lr_schedule"] = getattr(workload.lr_schedule, "__name__", "yes")
            self.settings[phase.name] = shown
        self._loss_sum = torch.zeros((), device=device.torch_device)
        self._loss_n = 0

    @property
    def scaler(self) -> torch.amp.GradScaler:
        return self.scalers[0]

    def _no_sync(self, phase: Phase, last: bool) -> contextlib.AbstractContextManager[Any]:
        if last:
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        for name in phase.models:
            model = self.models[name]
            if hasattr(model, "no_sync"):
                stack.enter_context(model.no_sync())
        return stack

    def __call__(self, batches: Iterator[Any]) -> int:
        shared = [Shared(i, self.acc) for i in range(self.acc)]
        kept: list[Any] = []  # the micro-batches, for phases after the first
        samples = 0
        dev, pinned, mark = self.device.torch_device, self.params.pin_memory, self.mark
        for p, phase in enumerate(self.phases):
            opt, scaler, view, inputs = self.optimizers[p], self.scalers[p], self.views[p], self.inputs[p]
            with mark("optimizer"):
                opt.zero_grad(set_to_none=True)
            for i in range(self.acc):
                if p == 0:
                    with mark("data"):
                        batch = self.prepare(to_device(next(batches), dev, pinned))
                    samples += batch_len(batch, self.params.batch_size)
                    if self.sample_size is not None:
                        self.units += int(self.sample_size(batch))
                    if len(self.phases) > 1:
                        kept.append(batch)
                else:
                    batch = kept[i]
                with self._no_sync(phase, i == self.acc - 1):
                    with mark("forward"), self.device.autocast(self.params.precision):
                        loss = phase.loss(view, batch, shared[i])
                    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
                        raise TypeError(f"the loss of phase {phase.name!r} must be a scalar tensor, got "
                                        f"{type(loss).__name__}{'' if not isinstance(loss, torch.Tensor) else tuple(loss.shape)}")
                    with mark("backward"):
                        try:
                            scaler.scale(loss / self.acc).backward(inputs=inputs)
                        except RuntimeError as err:
                            if is_oom(err):
                                raise
                            raise self._backward_error(p, err) from err
                self._loss_sum += loss.detach().float()
                self._loss_n += int(p == 0)  # the curve shows the sum of the phases' losses per micro-batch
            with mark("optimizer"):
                if self.grad_clip is not None:
                    scaler.unscale_(opt)
                    torch.nn.utils.clip_grad_norm_(self.owned[p], self.grad_clip)
                scaler.step(opt)
                scaler.update()
                if self.schedulers[p] is not None:
                    self.schedulers[p].step()
        self.samples += samples
        return samples

    def _backward_error(self, p: int, err: RuntimeError) -> RuntimeError:
        """Autograd's own message names no file: say which phase's backward failed and where its loss is
        defined, with the usual cause of a version error (a tensor changed in place after a phase used it)."""
        phase = self.phases[p]
        hint = ""
        if "modified by an inplace operation" in str(err):
            hint = (" (a tensor this loss used was changed in place afterwards, e.g. label.fill_ in a later phase "
                    "or micro-batch: build a new tensor instead)")
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return RuntimeError(f"phase {phase.name!r}: backward of the loss at {_where(self.losses[p])} failed: "
                            f"{first}{hint}")

    def units_per_sample(self) -> float | None:
        """The workload's sample_unit per training sample, over every batch so far (None: none declared)."""
        if self.sample_size is None or self.samples <= 0:
            return None
        return self.units / self.samples

    def pop_mean_loss(self) -> float:
        """Mean loss since the last call. Reads a device value: call it only at window ends (a sync point)."""
        if self._loss_n == 0:
            return float("nan")
        value = (self._loss_sum / self._loss_n).item()
        self._loss_sum.zero_()
        self._loss_n = 0
        return value
