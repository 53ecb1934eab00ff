"""The runs behind a numerics parity verdict (_judge.py judges them): the same steps from the same seed on the same
batches in fp32 and under a numerics knob, and in fp32 with YARDSTICK_SEEDS other seeds (the noise).

Every arm loads in-process (num_workers 0: loader knobs never change the math, and one process keeps the batches
and their random augmentations in the same order for every arm) and records the mean training loss of each
optimizer step (tuner.train.train_steps). A loss that stops being finite ends that arm there: the verdict reads it
as diverged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner.config import Params, TrialConfig
from tuner.errors import ConfigError, RunFailed
from tuner.knobs import numerics_knobs, worker_knobs
from tuner.parity._judge import YARDSTICK_SEEDS, ParityVerdict, judge

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
    from tuner.train import train_steps

    with train_steps(cfg, steps, cache_dir) as (_, losses):
        return losses


def check_arms(cfg: TrialConfig, knob_sets: list[dict[str, Any]], cache_dir: Path) -> None:
    """Each arm's knobs valid for this config and this machine (its params and its pre-flight), before anything
    trains: a bad value is one line naming it, not a failure minutes into the check."""
    from pydantic import ValidationError

    from tuner.train import preflight

    for s in knob_sets:
        try:
            Params.model_validate({**cfg.params.model_dump(), **FP32, **s})
        except ValidationError as err:
            first = err.errors()[0]
            raise ConfigError(f"--knob {', '.join(f'{k}={v}' for k, v in s.items())}: {first['msg']}") from None
        preflight(arm_config(cfg, {**FP32, **s}), cache_dir)


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
