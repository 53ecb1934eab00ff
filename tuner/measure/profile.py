"""Profiling primitives for `tuner profile`: a step's parts timed and marked, torch.profiler's operator table.

- PhaseClock: a PhaseStep's `phase_range`. Each part of a step (data, forward, backward, optimizer) runs inside a
  `tuner.<part>` torch.profiler.record_function range, so the trace shows it, and its wall time is added up with
  the device synced at both ends. On CUDA that makes a part's time the time its kernels took, not the time it took
  to launch them; the syncs also take away the overlap a normal step has (a copy behind a kernel), so shares are
  of a slightly serialized step. Only the profiled steps pay for them.
- top_operators: torch.profiler's key averages as rows, by self time (device time on CUDA, CPU time otherwise).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import torch

from tuner.device import Device
from tuner.measure.timing import Clock

PARTS = ("data", "forward", "backward", "optimizer")
RANGE_PREFIX = "tuner."


class PhaseClock:
    """Adds up the wall time of each part of the steps it marks (see the module's docstring)."""

    def __init__(self, device: Device, clock: Clock = time.perf_counter) -> None:
        self.device, self.clock = device, clock
        self.seconds = dict.fromkeys(PARTS, 0.0)

    @contextlib.contextmanager
    def __call__(self, part: str) -> Iterator[None]:
        self.device.synchronize()
        start = self.clock()
        try:
            with torch.profiler.record_function(RANGE_PREFIX + part):
                yield
        finally:
            self.device.synchronize()
            self.seconds[part] += self.clock() - start

    def shares(self, step_seconds: float) -> dict[str, float]:
        """Each part's share of `step_seconds` (the steps' synced wall time), and `other`: what is left
        (the loss bookkeeping, Python between the parts)."""
        if step_seconds <= 0:
            return {**dict.fromkeys(PARTS, 0.0), "other": 0.0}
        out = {part: min(s / step_seconds, 1.0) for part, s in self.seconds.items()}
        out["other"] = max(1.0 - sum(out.values()), 0.0)
        return out


def activities(device: Device) -> list[Any]:
    """CPU always; CUDA too when the device really is a GPU (a test's fake CUDA device computes on the CPU)."""
    from torch.profiler import ProfilerActivity

    acts = [ProfilerActivity.CPU]
    if device.torch_device.type == "cuda":
        acts.append(ProfilerActivity.CUDA)
    return acts


def _device_us(evt: Any) -> float:
    """Self device time in microseconds: `self_device_time_total` since torch 2.4's rename, else the CUDA name."""
    for name in ("self_device_time_total", "self_cuda_time_total"):
        value = getattr(evt, name, None)
        if isinstance(value, (int, float)):
            return float(value)
    return 0.0


def top_operators(prof: Any, k: int, on_device: bool) -> list[dict[str, Any]]:
    """The `k` operators with the most self time in a finished torch.profiler.profile, most first: name, calls,
    self CPU and device ms, and `share` of all operators' self time (device time when `on_device`, else CPU
    time). The tuner.* ranges are parts of the step, reported as shares elsewhere, not operators."""
    rows = []
    for evt in prof.key_averages():
        if evt.key.startswith(RANGE_PREFIX):
            continue
        cpu_us, dev_us = float(evt.self_cpu_time_total), _device_us(evt)
        rows.append({"name": evt.key, "calls": int(evt.count), "self_cpu_ms": cpu_us / 1e3,
                     "self_device_ms": dev_us / 1e3 if on_device else None,
                     "_self": dev_us if on_device else cpu_us})
    total = sum(r["_self"] for r in rows)
    rows.sort(key=lambda r: r["_self"], reverse=True)
    out = []
    for r in rows[:k]:
        self_us = r.pop("_self")
        r["self_ms"] = self_us / 1e3
        r["share"] = self_us / total if total > 0 else 0.0
        out.append(r)
    return out
