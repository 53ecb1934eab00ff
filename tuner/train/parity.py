"""The runs behind a numerics parity verdict (tuner.measure.parity judges them): the same steps from the same seed
on the same batches in fp32 and under a numerics knob, and in fp32 with YARDSTICK_SEEDS other seeds (the noise).

Every arm loads in-process (num_workers 0: loader knobs never change the math, and one process keeps the batches
and their random augmentations in the same order for every arm) and records the mean training loss of each
optimizer step. A loss that stops being finite ends that arm there: the verdict reads it as diverged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.config import Params, TrialConfig
from tuner.errors import RunFailed
from tuner.knobs import numerics_knobs, worker_knobs
from tuner.measure.parity import YARDSTICK_SEEDS, ParityVerdict, judge

if TYPE_CHECKING:
    from tuner.train._build import Training

FP32 = Params.defaults(numerics_knobs())  # the reference: no numerics knob on (fp32, no TF32, no compile)
STEPS = 200  # optimizer steps per arm by default (docs/concepts/knobs.md: how it was chosen)


def knob_settings(cfg: TrialConfig) -> dict[str, Any]:
    """The config's numerics knobs that differ from fp32's: what its parity check compares."""
    return {k: getattr(cfg.params, k) for k in numerics_knobs() if getattr(cfg.params, k) != FP32.get(k)}


def arm_config(cfg: TrialConfig, update: dict[str, Any]) -> TrialConfig:
    """`cfg` with `update` applied, loading in-process (the same batches for every arm)."""
    return cfg.model_copy(update={"params": cfg.params.model_copy(update={**Params.defaults(worker_knobs()),
                                                                          **update})})


def trajectory(cfg: TrialConfig, steps: int, cache_dir: Path) -> list[float]:
    """The mean training loss of each of `steps` optimizer steps of `cfg`, from a fresh seeded build."""
    with trained(cfg, steps, cache_dir) as (_, losses):
        return losses


@contextmanager
def trained(cfg: TrialConfig, steps: int, cache_dir: Path) -> Iterator[tuple[Training, list[float]]]:
    """`cfg` built fresh and seeded and trained `steps` optimizer steps, with the mean training loss of each: the
    one training loop of a parity run, yielded inside its trial scope so a caller can go on to score the models
    under the same device and numerics (benchmarks/fixed_batch.py)."""
    from tuner.device import resolve_device
    from tuner.train._build import build_training, trial_scope

    device = resolve_device(cfg.params.device)
    losses: list[float] = []
    with trial_scope(cfg, device, cache_dir, None):
        training = build_training(cfg, device)
        batches = training.batches()
        try:
            for _ in range(steps):
                training.step(batches)
                losses.append(training.step.pop_mean_loss())
                if not math.isfinite(losses[-1]):
                    break
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()
        yield training, losses


def check_parity(cfg: TrialConfig, knob_sets: list[dict[str, Any]], steps: int, cache_dir: Path,
                 progress: Callable[[str], None] | None = None) -> list[ParityVerdict]:
    """fp32, then each set of numerics knobs, then fp32 with each of the next YARDSTICK_SEEDS seeds: `steps`
    steps each, one verdict per set (the fp32 arms are shared)."""
    named = {", ".join(f"{k}={v}" for k, v in knobs.items()): knobs for knobs in knob_sets}
    yardsticks = {f"fp32, seed {cfg.params.seed + i}": arm_config(cfg, {**FP32, "seed": cfg.params.seed + i})
                  for i in range(1, YARDSTICK_SEEDS + 1)}
    arms = {"fp32": arm_config(cfg, FP32),
            **{name: arm_config(cfg, {**FP32, **knobs}) for name, knobs in named.items()}, **yardsticks}
    runs: dict[str, list[float]] = {}
    for label, arm in arms.items():
        if progress is not None:
            progress(f"parity: {steps} steps in {label} ...")
        runs[label] = trajectory(arm, steps, cache_dir)
    reference, others = runs["fp32"], [runs[label] for label in yardsticks]
    if len(reference) < steps or any(len(o) < steps for o in others):
        raise RunFailed(f"fp32 itself did not train {steps} finite steps (loss {reference[-1:]}): parity needs a "
                        f"reference that trains; lower the lr or check the workload")
    return [judge(name, reference, runs[name], *others) for name in named]
