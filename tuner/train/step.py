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
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from tuner.config import Params
from tuner.device import Device
from tuner.train.batch import batch_len, to_device
from tuner.train.distributed import unwrap
from tuner.workload.api import OptimizerFactory, Phase, Shared, Workload

PhaseRange = Callable[[str], contextlib.AbstractContextManager[Any]]
"""Called with "data", "forward", "backward" or "optimizer"; the context wraps that part of the step."""

_UNMARKED = contextlib.nullcontext()  # reentrant and reusable: one object serves every part of every step


def unmarked(part: str) -> contextlib.AbstractContextManager[Any]:
    return _UNMARKED


def default_optimizer(device: Device) -> OptimizerFactory:
    """Adam; fused on CUDA, where GradScaler then unscales inside the kernel instead of reading `found_inf` back
    to the host every step (a sync that would rank fp16 down for the harness's sake)."""

    def make(params: Any, *, lr: float, betas: tuple[float, float]) -> torch.optim.Optimizer:
        return torch.optim.Adam(params, lr=lr, betas=betas, fused=True if device.is_cuda else None)

    return make


class PhaseStep:
    """Callable: consume `accumulation_steps` micro-batches from an iterator, return samples consumed."""

    def __init__(self, workload: Workload, models: dict[str, nn.Module], params: Params, device: Device) -> None:
        self.params, self.device = params, device
        self.mark: PhaseRange = unmarked  # what wraps each part of a step: tuner profile sets it for what it records
        self.acc = params.accumulation_steps
        self.phases: tuple[Phase, ...] = workload.training_phases()
        self.models = models
        plain = {k: unwrap(m) for k, m in models.items()}
        betas = (params.beta1, params.beta2)
        self.views, self.optimizers, self.scalers, self.inputs = [], [], [], []
        for phase in self.phases:
            mine = set(phase.models)
            self.views.append({k: (models[k] if k in mine else plain[k]) for k in models})
            owned = [p for k in phase.models for p in plain[k].parameters() if p.requires_grad]
            factory = phase.optimizer or workload.optimizer or default_optimizer(device)
            self.optimizers.append(factory(owned, lr=params.lr, betas=betas))
            # One scaler per optimizer: one phase's overflow must not change another's scale.
            self.scalers.append(device.grad_scaler(params.precision))
            self.inputs.append(None if mine == set(models) else owned)
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
                        batch = to_device(next(batches), dev, pinned)
                    samples += batch_len(batch, self.params.batch_size)
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
                        scaler.scale(loss / self.acc).backward(inputs=inputs)
                self._loss_sum += loss.detach().float()
                self._loss_n += int(p == 0)  # the curve shows the sum of the phases' losses per micro-batch
            with mark("optimizer"):
                scaler.step(opt)
                scaler.update()
        return samples

    def pop_mean_loss(self) -> float:
        """Mean loss since the last call. Reads a device value: call it only at window ends (a sync point)."""
        if self._loss_n == 0:
            return float("nan")
        value = (self._loss_sum / self._loss_n).item()
        self._loss_sum.zero_()
        self._loss_n = 0
        return value
