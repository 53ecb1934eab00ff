"""The two ceilings of a trial, timed like the trial itself (warm-up excluded, device synced at window ends).

- compute: the trial's training step fed one batch that is already on the device, so no loader and no copy;
- input: the trial's DataLoader alone, each batch copied to the device as training copies it, no model.

Each keeps a wall-time deadline (warm-up included) and holds windows of the trial's minimum steps, or is skipped
with its reason (CeilingSkipped): a model whose step is too slow for the deadline gets no ceiling rather than a
one-step reading. Each takes a second or two; `tuner.study.headroom` turns them into a verdict. A study caches them by the knobs
they depend on (CeilingCache): loader knobs do not change the compute ceiling, batch and precision do not change
what a loader of a given batch size delivers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tuner.config import Budget, Measure
from tuner.device import Device
from tuner.measure.timing import Clock, WaitMeter, WindowTimer, summarize
from tuner.study.headroom import cache_key  # noqa: F401 - torch-free, so `tuner report` reads the cache too

WINDOWS = 3  # the median of three windows: one slow window (an epoch boundary, a neighbour) does not decide
MIN_WINDOWS = 2  # a deadline too short for three windows of enough steps takes two, never one-step windows


class CeilingSkipped(Exception):
    """A ceiling not measured because its deadline cannot hold enough steps; the message says why."""


def ceiling_measure(seconds: float, measure: Measure | None = None) -> Measure:
    """The trial's window minimums, in at most WINDOWS windows and one or two warm-up steps: a ceiling is a
    second or two, so its warm-up stops as soon as going on would not leave it two windows."""
    m = measure or Measure()
    return Measure(warmup_steps=1, warmup_max_steps=5, warmup_settle=m.warmup_settle, windows=WINDOWS,
                   min_windows=MIN_WINDOWS, window_min_steps=m.window_min_steps,
                   window_min_seconds=min(m.window_min_seconds, seconds / 8))


def check_fits(seconds: float, step_seconds: float | None, measure: Measure) -> None:
    """Raise CeilingSkipped when one warm-up step and the fewest windows of the least steps, at the trial's own
    step time, cannot fit the ceiling's deadline."""
    if step_seconds is None:
        return
    need = step_seconds * (1 + MIN_WINDOWS * measure.window_min_steps)
    if need > seconds:
        raise CeilingSkipped(f"one step takes {step_seconds:.3g} s: {seconds:.3g} s cannot hold a warm-up step and "
                             f"{MIN_WINDOWS} windows of {measure.window_min_steps} steps (needs {need:.3g} s)")


def compute_ceiling(step: Any, batch: Any, device: Device, seconds: float, agree: Any = None,
                    clock: Clock = time.perf_counter, *, step_seconds: float | None = None,
                    measure: Measure | None = None) -> float | None:
    """Samples/s of `step` (a tuner.train.step.PhaseStep) fed `batch`, already on the device, over and over,
    within `seconds` of wall time (warm-up included). `step_seconds` (the trial's settled step) decides before
    any step whether the deadline can hold a reading: CeilingSkipped when not, or when the deadline cut it."""
    from itertools import repeat

    from tuner.train.loop import run_loop

    m = ceiling_measure(seconds, measure)
    check_fits(seconds, step_seconds, m)
    loop = run_loop(step, repeat(batch), budget=Budget(seconds=seconds), measure=m, device=device, agree=agree,
                    clock=clock, wall_limit_s=seconds)
    if loop.diverged:
        return None
    if len(loop.windows) < MIN_WINDOWS:
        raise CeilingSkipped(f"cut at its {seconds:.3g} s deadline after {len(loop.windows)} full window(s) "
                             f"(steps of about {loop.step_seconds or 0:.3g} s)")
    return summarize(loop.windows).throughput


def input_ceiling(batches: Iterator[Any], device: Device, seconds: float, *, warmup_batches: int = 2,
                  pinned: bool = False, clock: Clock = time.perf_counter, measure: Measure | None = None) -> float:
    """Samples/s a batch iterator (the trial's loader, endless) delivers to the device within `seconds` of wall
    time: each batch is copied as training copies it (non_blocking when pinned), the device is synced at window
    ends, and each window holds at least the trial's minimum of batches. CeilingSkipped when the deadline cannot
    hold MIN_WINDOWS such windows."""
    from tuner.train.batch import batch_len, to_device

    m = ceiling_measure(seconds, measure)
    dev = device.torch_device
    start = clock()
    deadline = start + seconds
    for _ in range(warmup_batches):  # worker start-up and the first prefetch are start-up, not steady state
        to_device(next(batches), dev, pinned)
        if clock() >= deadline:
            raise CeilingSkipped(f"the loader's start-up ({warmup_batches} batches) took longer than its "
                                 f"{seconds:.3g} s deadline")
    meter = WaitMeter(batches, clock)
    timer = WindowTimer(device, meter, clock)
    for i in range(WINDOWS):
        window_s = max((deadline - clock()) / (WINDOWS - i), m.window_min_seconds)
        timer.start()
        t0, n = clock(), 0
        cut = False
        while True:
            batch = to_device(next(meter), dev, pinned)
            timer.add(batch_len(batch, 1))
            n += 1
            if n >= m.window_min_steps and clock() - t0 >= window_s:
                break
            if clock() >= deadline:
                cut = True
                break
        timer.close()
        if n < m.window_min_steps:
            timer.windows.pop()
        if cut or clock() >= deadline:
            break
    if len(timer.windows) < MIN_WINDOWS:
        raise CeilingSkipped(f"cut at its {seconds:.3g} s deadline after {len(timer.windows)} full window(s)")
    return summarize(timer.windows).throughput  # type: ignore[return-value]




class CeilingCache:
    """Ceilings measured in a study, by key, in one JSON file of the study folder. Trials on other processes
    and nodes of the same study read and add to it; a lost race costs one extra measurement, never a wrong one."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> float | None:
        entry = self._read().get(key)
        value = entry.get("value") if isinstance(entry, dict) else None
        return float(value) if isinstance(value, (int, float)) and value > 0 else None

    def put(self, key: str, value: float, what: dict[str, Any]) -> None:
        from tuner.files import atomic_write, locked

        with locked(self.path.parent):
            data = self._read()
            data[key] = {"value": value, **what}
            atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True, default=str))
