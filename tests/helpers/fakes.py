"""Test doubles shared by several test modules."""

from __future__ import annotations

import itertools

import torch

from tuner.device import Device


class FakeCudaDevice(Device):
    """Computes on the CPU but takes every CUDA-only branch: pin_memory allowed, sync counted, fp16 scaler on.

    What only a real GPU can confirm: that torch.cuda.synchronize makes the clock honest, that pinned memory and
    non_blocking copies overlap with compute, and fp16/bf16 speed and numerics on the hardware.
    """

    def __init__(self) -> None:
        super().__init__("cuda", torch.device("cpu"), "fake GPU")

    def supported_precisions(self) -> list[str]:
        return ["fp32", "fp16", "bf16"]


class FakeClock:
    """A clock that advances only when told: deterministic timing tests."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


class PrefetchingLoader:
    """A loader-bound input pipeline on a fake clock: workers make a batch every `make_s` seconds into a queue of
    `depth` (num_workers x prefetch_factor) and stop while it is full; next() takes a ready batch at once or waits
    (the clock advances) for the one being made. It hands out `batches` in turn (None without them)."""

    def __init__(self, clock, make_s, depth, batches=None):
        from collections import deque

        self.clock, self.make_s, self.depth = clock, make_s, depth
        self.queue, self.busy_until = deque(), clock() + make_s
        self.batches = itertools.cycle(batches) if batches is not None else itertools.repeat(None)

    def _catch_up(self, t):
        while self.busy_until is not None and self.busy_until <= t:
            self.queue.append(self.busy_until)
            self.busy_until = self.busy_until + self.make_s if len(self.queue) < self.depth else None

    def __iter__(self):
        return self

    def __next__(self):
        self._catch_up(self.clock())
        if not self.queue:
            self.clock.advance(self.busy_until - self.clock())
            self._catch_up(self.clock())
        self.queue.popleft()
        if self.busy_until is None:  # a slot freed: the workers start the next batch now
            self.busy_until = self.clock() + self.make_s
        return next(self.batches)


class TickingClock:
    """A clock that advances by `tick` at every read: loops that end on time still end, and how long anything
    takes is counted in clock reads, not in what the machine's load makes of it."""

    def __init__(self, tick: float = 0.001) -> None:
        self.t, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.t += self.tick
        return self.t


def ceilings_on_a_ticking_clock(monkeypatch, module_name: str, tick: float = 0.005) -> None:
    """The ceilings that module `module_name` measures (its `ceilings` and `measure_ceiling`, from
    tuner.train.ceilings) keep time in reads of a TickingClock: a deadline holds the same steps at any load. On the
    real clock at load 8-20 a 0.5-1 s deadline held no compute reading and the ceiling was skipped."""
    import functools
    import importlib

    module = importlib.import_module(module_name)
    clock = TickingClock(tick)
    for name in ("ceilings", "measure_ceiling"):
        if hasattr(module, name):
            monkeypatch.setattr(module, name, functools.partial(getattr(module, name), clock=clock))
