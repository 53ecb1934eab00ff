"""Throughput measurement: window timers that synchronize before reading the clock, and data-wait metering.

Rules: warm-up is excluded by the caller; the clock is read only at window
ends, each time after `device.synchronize()`; nothing in a window forces a per-step sync; samples/s counts
training samples consumed, so gradient accumulation cannot inflate it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tuner.device import Device

Clock = Callable[[], float]


@dataclass
class Window:
    samples: int
    seconds: float
    wait_seconds: float

    @property
    def throughput(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0


class WaitMeter:
    """Wraps a batch iterator and adds up host time spent blocked in `next()` (waiting on the input pipeline).

    Reading the host clock here forces no device sync. On CUDA the host can run ahead of the GPU, so a wait
    hidden behind queued kernels is not counted: exactly the wait that does not slow training down.
    """

    def __init__(self, batches: Iterable[Any], clock: Clock = time.perf_counter) -> None:
        self._it = iter(batches)
        self._clock = clock
        self.seconds = 0.0
        self.batches = 0  # batches drawn so far
        self.last_wait = 0.0  # the last next()'s wait: a loader's prefetch queue is empty once a batch waited

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        t = self._clock()
        try:
            batch = next(self._it)
            self.batches += 1
            return batch
        finally:
            self.last_wait = self._clock() - t
            self.seconds += self.last_wait


@dataclass
class WindowTimer:
    """Measures consecutive windows of steps. Call `start()` once after warm-up, then `close()` at each window end."""

    device: Device
    meter: WaitMeter | None = None
    clock: Clock = time.perf_counter
    windows: list[Window] = field(default_factory=list)
    _t0: float = 0.0
    _wait0: float = 0.0
    _samples: int = 0

    def _now(self) -> float:
        self.device.synchronize()
        return self.clock()

    def start(self) -> None:
        self._t0 = self._now()
        self._wait0 = self.meter.seconds if self.meter else 0.0
        self._samples = 0

    def add(self, samples: int) -> None:
        self._samples += samples

    @property
    def open_samples(self) -> int:
        return self._samples

    def close(self) -> Window:
        t = self._now()
        wait = self.meter.seconds if self.meter else 0.0
        w = Window(self._samples, t - self._t0, wait - self._wait0)
        self.windows.append(w)
        self._t0, self._wait0, self._samples = t, wait, 0
        return w


@dataclass
class ThroughputSummary:
    """What a trial's timed windows say. `throughput` is all timed samples over all timed seconds, what a user's
    own loop (samples / seconds around N steps) and an epoch's wall clock read: the median of the windows, which
    it was until 2026-12-08, drops the slow windows (a loader worker's hiccup, an epoch boundary) that training
    still pays, and read loader-bound configs 12-13% above a plain loop (benchmark row 4)."""

    throughput: float | None  # all timed samples / all timed seconds
    spread: float | None  # (max - min) / median of the windows' rates: 0.1 means they varied by 10% of the median
    data_wait: float | None  # waiting time / timed time over all windows
    windows: list[float]
    median: float | None = None  # the median window's samples/s: what throughput would read without the slow ones


def summarize(windows: list[Window]) -> ThroughputSummary:
    read = [w for w in windows if w.seconds > 0 and w.samples > 0]
    if not read:
        return ThroughputSummary(None, None, None, [], None)
    rates = [w.throughput for w in read]
    med = statistics.median(rates)
    total = sum(w.seconds for w in read)
    wait = sum(w.wait_seconds for w in read)
    return ThroughputSummary(
        throughput=sum(w.samples for w in read) / total,
        spread=(max(rates) - min(rates)) / med if med > 0 else None,
        data_wait=min(1.0, wait / total),
        windows=rates,
        median=med,
    )
