"""The two ceilings of a trial, timed like the trial itself (warm-up excluded, device synced at window ends).

- compute: the trial's training step fed one batch that is already on the device, so no loader and no copy;
- input: the trial's DataLoader alone, each batch copied to the device as training copies it, no model.

Each keeps a wall-time deadline (warm-up included) and holds windows of the trial's minimum steps, or is skipped
with its reason (CeilingSkipped): a model whose step is too slow for the deadline gets no ceiling rather than a
one-step reading. This module holds their timing rules and the study's cache; the loops that drive a step or a loader for them
are tuner.train.ceilings' (compute_ceiling, input_ceiling), since they run training code. Each takes a second or two; tuner.study.readings.assess turns them into a verdict. A study caches them by the knobs
they depend on (CeilingCache, keyed by ceiling_cache_keys; torch-free, so `tuner report` reads the cache too): loader knobs do not change the compute ceiling, batch and precision do not change
what a loader of a given batch size delivers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuner.config import Measure

WINDOWS = 3  # the median of three windows: one slow window (an epoch boundary, a neighbour) does not decide
MIN_WINDOWS = 2  # a deadline too short for three windows of enough steps takes two, never one-step windows
STABLE_WINDOWS = 8  # a reading that may end once stable: up to 8 shorter windows within the same deadline
# A ceiling reading ends once its last WINDOWS windows agree within 3% (`settled`): the probes' readings and a
# trial's own ceilings alike. A quiet machine reads a steady rate in about 3/8 of the deadline; a noisy one reads
# on to it as before.
STABLE = 0.03


class CeilingSkipped(Exception):
    """A ceiling not measured because its deadline cannot hold enough steps; the message says why, and
    `step_seconds` the step it timed where a reading was cut (the probes fit a longer deadline to it)."""

    def __init__(self, message: str, step_seconds: float | None = None) -> None:
        super().__init__(message)
        self.step_seconds = step_seconds


def fitted_seconds(step_seconds: float, measure: Measure, spare: float = 1.5) -> float:
    """A deadline `spare` times what one warm-up step and MIN_WINDOWS windows of the least steps need at
    `step_seconds` (check_fits' rule, the other way round)."""
    return spare * step_seconds * (1 + MIN_WINDOWS * measure.window_min_steps)


def ceiling_measure(seconds: float, measure: Measure | None = None) -> Measure:
    """The trial's window minimums, in at most WINDOWS windows and one or two warm-up steps: a ceiling is a
    second or two, so its warm-up stops as soon as going on would not leave it two windows."""
    m = measure or Measure()
    return Measure(warmup_steps=1, warmup_max_steps=5, warmup_settle=m.warmup_settle, windows=WINDOWS,
                   min_windows=MIN_WINDOWS, window_min_steps=m.window_min_steps,
                   window_min_seconds=min(m.window_min_seconds, seconds / 8))


def stable_measure(seconds: float, measure: Measure | None = None) -> Measure:
    """ceiling_measure for a reading that ends once its rate is stable (`settled`): up to STABLE_WINDOWS windows
    of at least seconds / STABLE_WINDOWS and the trial's minimum steps each, so WINDOWS of them that agree end it
    after about 3/8 of the deadline; an unsettled rate reads on to the deadline."""
    m = ceiling_measure(seconds, measure)
    return m.model_copy(update={"windows": STABLE_WINDOWS,
                                "window_min_seconds": min(m.window_min_seconds, seconds / STABLE_WINDOWS)})


def settled(throughputs: list[float], tolerance: float) -> bool:
    """Whether the last WINDOWS windows' rates agree within `tolerance` (max / min - 1): the reading can end,
    its median then moves by less than that."""
    last = throughputs[-WINDOWS:]
    return len(last) == WINDOWS and min(last) > 0 and max(last) / min(last) - 1 <= tolerance


def check_fits(seconds: float, step_seconds: float | None, measure: Measure) -> None:
    """Raise CeilingSkipped when one warm-up step and the fewest windows of the least steps, at the trial's own
    step time, cannot fit the ceiling's deadline."""
    if step_seconds is None:
        return
    need = fitted_seconds(step_seconds, measure, spare=1.0)
    if need > seconds:
        raise CeilingSkipped(f"one step takes {step_seconds:.3g} s: {seconds:.3g} s cannot hold a warm-up step and "
                             f"{MIN_WINDOWS} windows of {measure.window_min_steps} steps (needs {need:.3g} s)")


class CeilingCache:
    """Ceilings measured in a study, by key, in one JSON file of the study folder. Trials on other processes
    and nodes of the same study read and add to it; a lost race costs one extra measurement, never a wrong one."""

    def __init__(self, path: Path, *, create: bool = True) -> None:
        self.path = Path(path)
        self.create = create  # False: a missing folder is not made (a study folder deleted while trials run)

    def sibling(self, name: str) -> "CeilingCache":
        """The cache file `name` beside this one (flops.json beside ceilings.json), made or not as this one is."""
        return CeilingCache(self.path.with_name(name), create=self.create)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> float | None:
        """The value stored under `key`, None when there is none or it is not positive (a marker: `entry`)."""
        value = (self.entry(key) or {}).get("value")
        return float(value) if isinstance(value, (int, float)) and value > 0 else None

    def entry(self, key: str) -> dict[str, Any] | None:
        """What is stored under `key`: its value and what was put with it."""
        entry = self._read().get(key)
        return entry if isinstance(entry, dict) else None

    def put(self, key: str, value: float, what: dict[str, Any]) -> None:
        from tuner.files import atomic_write, locked

        try:
            with locked(self.path.parent, create=self.create):
                data = self._read()
                data[key] = {"value": value, **what}
                atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True, default=str), parents=self.create)
        except FileNotFoundError:
            if self.create:
                raise
            # the folder is gone (a deleted study): the reading is not kept, and the folder is not made again


# --- the study's ceiling cache's keys, read without torch (a study measures ceilings only for the trials whose
# verdict someone reads; every other trial that shares their knobs gets them from here: tuner.analysis.headroom) ---

NOT_MEASURED = ("not measured: ceilings are measured for the trials whose verdict is read (the confirmed front, "
                "`tuner train`, `tuner profile`), not after every search trial")


def cache_key(kind: str, parts: dict[str, Any]) -> str:
    """A short stable key for `parts` (what the ceiling depends on)."""
    import hashlib
    import json

    text = json.dumps({"kind": kind, **parts}, sort_keys=True, default=str)
    return f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def ceiling_cache_keys(cfg: Any, device: str, world: int = 1) -> dict[str, str]:
    """The cache key of each ceiling of TrialConfig `cfg` on `device` (its description): what it depends on and
    nothing else (loader knobs do not move the compute ceiling; accumulation, precision and the optimizer do not
    move the input ceiling): the knobs each ceiling moves come from the role table (tuner.knobs)."""
    from tuner.knobs import CEILINGS, ceiling_knobs

    p = cfg.params
    shared = {"workload": cfg.workload, "options": cfg.workload_options, "dataset": cfg.dataset,
              "device": device, "world": world}
    return {kind: cache_key(kind, {**shared, **{name: getattr(p, name) for name in ceiling_knobs(kind)}})
            for kind in CEILINGS}
