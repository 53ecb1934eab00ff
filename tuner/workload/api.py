"""The public contract between a user's model and tuner: `tuner.Workload` and, for several optimizers, `tuner.Phase`.

A workload says *what* to train (models, data, loss, how to score it); tuner owns *how* (the DataLoader built from
the searched knobs, device placement, autocast and GradScaler, accumulation, the optimizer, timing, DDP, failure
states), exactly as for its built-in GAN and CNN, which are written against this same API (tuner/builtin/).

Nothing here imports torch at module level: `import tuner` stays cheap for the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch import nn
    from torch.utils.data import Dataset

Models = Mapping[str, "nn.Module"]
LossFn = Callable[[Models, Any], "torch.Tensor"]
PhaseLossFn = Callable[[Models, Any, "Shared"], "torch.Tensor"]
OptimizerFactory = Callable[..., "torch.optim.Optimizer"]  # (params or models, **hyperparameters) -> Optimizer
SampleSize = Callable[[Any], int]  # batch -> how many units (tokens, pixels) it holds
Evaluate = Callable[[Models, Iterable[Any]], Mapping[str, Any]]

_DIRECTIONS = {"min": "minimize", "max": "maximize", "minimize": "minimize", "maximize": "maximize"}


class Shared(dict):  # type: ignore[type-arg]
    """Values one micro-batch shares across the phases of an optimizer step (a GAN's latents, say).

    A plain dict, created empty for every micro-batch, plus where the micro-batch sits: `index` (0-based) and
    `count` (micro-batches per optimizer step, i.e. accumulation_steps). What a phase stores here lives until the
    optimizer step ends: with accumulation, every micro-batch's entries are alive at once, so keep autograd graphs
    out of it unless `count == 1` (recompute instead; see tuner/builtin/gan.py).
    """

    def __init__(self, index: int = 0, count: int = 1) -> None:
        super().__init__()
        self.index = index
        self.count = count


@dataclass(frozen=True)
class Phase:
    """One optimizer of a multi-optimizer step (a GAN's D step, then its G step).

    Phases run in order; each runs over all micro-batches of the step, then steps its own optimizer, so a later
    phase sees the models a former one just updated.

    Attributes:
        name: the phase's name, shown in reports (`"D"`, `"G"`).
        loss: `loss(models, batch, shared) -> tensor`, that micro-batch's loss; `shared` is a `tuner.Shared`.
        models: the names of the models this phase updates: they get its optimizer (and GradScaler), and only their
            gradients are computed and, under DDP, synchronized; the other models are handed to `loss` as plain
            modules.
        optimizer: overrides the workload's optimizer factory for this phase.
        hyperparameters: merged over the workload's for this phase.
    """

    name: str
    loss: PhaseLossFn
    models: Sequence[str]
    optimizer: OptimizerFactory | None = None
    hyperparameters: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError("Phase.name must be a non-empty string")
        if not callable(self.loss):
            raise TypeError(f"Phase {self.name!r}: loss must be callable (models, batch, shared) -> loss tensor")
        if isinstance(self.models, str) or not self.models:
            raise TypeError(f"Phase {self.name!r}: models must be a non-empty list of model names")
        object.__setattr__(self, "models", tuple(self.models))
        if self.hyperparameters is not None:
            object.__setattr__(self, "hyperparameters", _check_hyperparameters(self.hyperparameters,
                                                                               f"Phase {self.name!r}"))


def _check_hyperparameters(hp: Any, where: str) -> dict[str, Any]:
    """A plain dict of keyword arguments for the optimizer factory; lr a positive number, betas a pair."""
    if not isinstance(hp, Mapping) or not all(isinstance(k, str) for k in hp):
        raise TypeError(f"{where}: hyperparameters must be a mapping of the optimizer's keyword arguments, e.g. "
                        f'{{"lr": 1e-3, "betas": (0.9, 0.999), "weight_decay": 0.1}}')
    out = dict(hp)
    if "lr" in out and (isinstance(out["lr"], bool) or not isinstance(out["lr"], (int, float)) or out["lr"] <= 0):
        raise TypeError(f"{where}: hyperparameters lr must be a positive number (got {out['lr']!r})")
    if "betas" in out:
        betas = out["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"{where}: hyperparameters betas must be a pair (beta1, beta2) (got {betas!r})")
        out["betas"] = (float(betas[0]), float(betas[1]))
    return out


def _is_module(obj: Any) -> bool:
    """An nn.Module instance (not its class, which is a factory), without importing torch."""
    return not isinstance(obj, type) and hasattr(obj, "parameters") and hasattr(obj, "forward")


@dataclass(frozen=True)
class Workload:
    """What to train and how to score it: the one thing you write to tune your own model.

    A module-level factory returning one (`path/to/file.py:make`) is what `tuner search --workload` and a config's
    `workload:` name. A wrong field is a TypeError naming it, raised when the Workload is built.

    Attributes:
        models: name -> zero-argument factory of a fresh nn.Module (called once per trial, seeded).
        datasets: zero-argument callable returning (train, validation) map-style datasets.
        loss: `loss(models, batch) -> tensor` for one micro-batch: the single-optimizer form. Give exactly one of
            `loss` and `phases`.
        phases: a list of `tuner.Phase` for several optimizers (a GAN's D and G steps).
        evaluate: optional `evaluate(models, val_batches) -> {name: value}`, called after training in eval mode
            under no_grad; `val_batches` yields the validation split's batches already on the trial's device.
            Numbers are metrics; strings are kept as information (a `sample_grid` string is a path to an image of
            samples).
        quality: `(metric, "min" | "max")`: the evaluate() metric that is the study's quality objective.
        optimizer: optional factory of the optimizer the workload trains with, called with the `hyperparameters`
            as keyword arguments: `optimizer(params, **hyperparameters)`, or, when its first parameter is named
            `models`, `optimizer(models, **hyperparameters)` with the models it updates ({name: nn.Module};
            parameter groups as nanoGPT's configure_optimizers builds them). Default: torch.optim.Adam (fused on
            CUDA).
        hyperparameters: the optimizer's own settings, e.g. `{"lr": 1e-3, "betas": (0.9, 0.99)}`: the
            baseline trains with exactly these; params.lr / beta1 / beta2 / lr_scale of a trial override them.
            Default: torch.optim.Adam's (lr 1e-3, betas (0.9, 0.999)).
        grad_clip: optional max gradient norm, clipped per phase before its optimizer steps (after unscaling).
        lr_schedule: optional `lr_schedule(step) -> factor`, the lr multiplier at optimizer step `step`
            (0-based), as torch's LambdaLR takes it.
        sample_unit: what a sample is worth to the user (`"tokens"`), so `<unit>/s` is reported beside
            samples/s; with `sample_size`.
        sample_size: `sample_size(batch) -> int`, the units in one batch, e.g. `lambda batch: batch[0].numel()`
            (from shapes; no device reads).
        collate: optional `collate_fn` for the training and validation DataLoaders.
        eval_batch_size: batch size of `val_batches` (fixed, so quality is comparable across trials).
        batch_size: the batch you train at (samples per optimizer step and process). The baseline, trial 0,
            trains at it, and a space that searches batch_size splits it into micro-batch x accumulation
            (its effective batch) unless the space fixes the batch itself. Default None: tuner's, 64.
        target_eval_samples: optional, for a study with a target: its evaluations during training (every K
            samples, the time to target's) score a fixed, seeded subset of this many validation samples, the same
            for every trial, as nanoGPT's estimate_loss(eval_iters) does; the trial's quality at the end is the
            whole split's. The pre-flight chooses K from the subset's cost. None (default): every evaluation
            scores the whole split.
        name: shown in reports (default: the import path).
        info: free text for reports (e.g. the model's size).

    Example:
        ```python
        import tuner
        from torch import nn
        from torch.nn import functional as F

        def make(hidden: int = 64) -> tuner.Workload:
            return tuner.Workload(
                models={"net": lambda: nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))},
                datasets=datasets,  # () -> (train, validation)
                loss=lambda models, batch: F.cross_entropy(models["net"](batch[0]), batch[1]),
                evaluate=evaluate,  # (models, val_batches) -> {"val_loss": ...}
                quality=("val_loss", "min"),
            )
        ```
    """

    models: Mapping[str, Callable[[], Any]]
    datasets: Callable[[], tuple["Dataset", "Dataset"]]
    loss: LossFn | None = None
    phases: Sequence[Phase] = ()
    evaluate: Evaluate | None = None
    quality: tuple[str, str] | None = None
    optimizer: OptimizerFactory | None = None
    collate: Callable[[list[Any]], Any] | None = None
    eval_batch_size: int = 256
    batch_size: int | None = None
    target_eval_samples: int | None = None
    name: str = ""
    info: Mapping[str, Any] = field(default_factory=dict)  # free text for reports (e.g. the model's size)
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    grad_clip: float | None = None
    lr_schedule: Callable[[int], float] | None = None
    sample_unit: str | None = None
    sample_size: SampleSize | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.models, Mapping) or not self.models:
            raise TypeError("Workload.models must be a non-empty mapping: name -> zero-argument model factory")
        for name, factory in self.models.items():
            if _is_module(factory):  # an nn.Module itself (a class is a factory)
                raise TypeError(f"Workload.models[{name!r}] is a model; give a factory that builds a fresh one per "
                                f"trial, e.g. lambda: {type(factory).__name__}(...)")
            if not isinstance(name, str) or not callable(factory):
                raise TypeError(f"Workload.models[{name!r}] must be a zero-argument callable returning an nn.Module")
        if not callable(self.datasets):
            raise TypeError("Workload.datasets must be a zero-argument callable returning (train, validation)")
        if (self.loss is None) == (not self.phases):
            raise TypeError("give Workload exactly one of loss=(models, batch) -> loss, or phases=[tuner.Phase, ...]")
        if self.loss is not None and not callable(self.loss):
            raise TypeError("Workload.loss must be callable (models, batch) -> loss tensor")
        names = [p.name for p in self.phases]
        if len(set(names)) != len(names):
            raise TypeError(f"Workload.phases: phase names must be unique (got {names})")
        for p in self.phases:
            if not isinstance(p, Phase):
                raise TypeError("Workload.phases must hold tuner.Phase objects")
            unknown = [m for m in p.models if m not in self.models]
            if unknown:
                raise TypeError(f"Phase {p.name!r} updates {unknown}, which Workload.models does not define "
                                f"(it has {list(self.models)})")
        if self.quality is not None:
            if (not isinstance(self.quality, (tuple, list)) or len(self.quality) != 2
                    or str(self.quality[1]).lower() not in _DIRECTIONS):
                raise TypeError('Workload.quality must be (metric, "min" | "max"), e.g. ("val_loss", "min")')
            if self.evaluate is None:
                raise TypeError("Workload.quality names an evaluate() metric, but the workload has no evaluate")
            object.__setattr__(self, "quality", (str(self.quality[0]), _DIRECTIONS[str(self.quality[1]).lower()]))
        if self.evaluate is not None and not callable(self.evaluate):
            raise TypeError("Workload.evaluate must be callable (models, val_batches) -> {metric: value}")
        if not isinstance(self.eval_batch_size, int) or self.eval_batch_size < 1:
            raise TypeError("Workload.eval_batch_size must be a positive int")
        if self.batch_size is not None and (isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int)
                                            or self.batch_size < 1):
            raise TypeError(f"Workload.batch_size must be a positive int: the batch you train at (got "
                            f"{self.batch_size!r}), or None for tuner's default, 64")
        if self.target_eval_samples is not None and (isinstance(self.target_eval_samples, bool) or not isinstance(
                self.target_eval_samples, int) or self.target_eval_samples < 1):
            raise TypeError("Workload.target_eval_samples must be a positive int: the validation samples the "
                            "time-to-target evaluations score (or None: the whole split)")
        object.__setattr__(self, "phases", tuple(self.phases))
        object.__setattr__(self, "hyperparameters", _check_hyperparameters(self.hyperparameters, "Workload"))
        if self.optimizer is not None and not callable(self.optimizer):
            raise TypeError("Workload.optimizer must be callable: optimizer(params, **hyperparameters)")
        if self.grad_clip is not None and (isinstance(self.grad_clip, bool) or
                                           not isinstance(self.grad_clip, (int, float)) or self.grad_clip <= 0):
            raise TypeError(f"Workload.grad_clip must be a positive max gradient norm (got {self.grad_clip!r})")
        if self.lr_schedule is not None and not callable(self.lr_schedule):
            raise TypeError("Workload.lr_schedule must be callable: lr_schedule(step) -> lr factor")
        if (self.sample_unit is None) != (self.sample_size is None):
            raise TypeError('give Workload both sample_unit (e.g. "tokens") and sample_size (batch -> units), or '
                            'neither')
        if self.sample_unit is not None and (not isinstance(self.sample_unit, str) or not self.sample_unit.strip()
                                             or not callable(self.sample_size)):
            raise TypeError('Workload.sample_unit must be a name such as "tokens" and sample_size a callable '
                            '(batch -> units in it)')

    def training_phases(self) -> tuple[Phase, ...]:
        """The phases to run: the single-optimizer form is one phase over every model."""
        if self.phases:
            return tuple(self.phases)
        loss = self.loss
        assert loss is not None
        return (Phase("train", lambda models, batch, shared: loss(models, batch), tuple(self.models)),)
