"""The two ceilings of a trial, timed like the trial itself (warm-up excluded, device synced at window ends).

- compute: the trial's training step fed one batch that is already on the device, so no loader and no copy;
- input: the trial's DataLoader alone, each batch copied to the device as training copies it, no model.

Each takes a second or two; `tuner.study.headroom` turns them into a verdict. A study caches them by the knobs
they depend on (CeilingCache): loader knobs do not change the compute ceiling, batch and precision do not change
what a loader of a given batch size delivers.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tuner.config import Budget, Measure
from tuner.device import Device
from tuner.measure.timing import Clock, WaitMeter, WindowTimer, summarize

WINDOWS = 3  # the median of three windows: one slow window (an epoch boundary, a neighbour) does not decide


def compute_ceiling(step: Any, batch: Any, device: Device, seconds: float, agree: Any = None,
                    clock: Clock = time.perf_counter) -> float | None:
    """Samples/s of `step` (a tuner.train.step.PhaseStep) fed `batch`, already on the device, over and over."""
    from itertools import repeat

    from tuner.train.loop import run_loop

    loop = run_loop(step, repeat(batch), budget=Budget(seconds=seconds), measure=Measure(warmup_steps=2,
                    windows=WINDOWS), device=device, agree=agree, clock=clock)
    if loop.diverged:
        return None
    return summarize(loop.windows).throughput


def input_ceiling(batches: Iterator[Any], device: Device, seconds: float, *, warmup_batches: int = 2,
                  pinned: bool = False, clock: Clock = time.perf_counter) -> float | None:
    """Samples/s a batch iterator (the trial's loader, endless) delivers to the device: each batch is copied as
    training copies it (non_blocking when pinned), and the device is synced at window ends."""
    from tuner.train.batch import batch_len, to_device

    dev = device.torch_device
    for _ in range(warmup_batches):  # worker start-up and the first prefetch are start-up, not steady state
        to_device(next(batches), dev, pinned)
    meter = WaitMeter(batches, clock)
    timer = WindowTimer(device, meter, clock)
    window_s = seconds / WINDOWS
    for _ in range(WINDOWS):
        timer.start()
        t0 = clock()
        while True:
            batch = to_device(next(meter), dev, pinned)
            timer.add(batch_len(batch, 1))
            if clock() - t0 >= window_s:
                break
        timer.close()
    return summarize(timer.windows).throughput


def cache_key(kind: str, parts: dict[str, Any]) -> str:
    """A short stable key for `parts` (what the ceiling depends on)."""
    text = json.dumps({"kind": kind, **parts}, sort_keys=True, default=str)
    return f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


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
