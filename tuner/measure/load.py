"""How much of the CPUs other work took while something was measured: a busy machine is seen and said, not read
as noise.

On a shared 2-core machine one competing CPU-bound process cut a bf16 loop 5x and two cut it 44x, and a study
run beside other work read its baseline's re-runs at 99.9 and 29.7 samples/s and called that noise (issue 58).
A figure read while others took a share of its CPUs says so, and the verdict says which figures that touches.

The meter reads the machine's busy CPU time (psutil.cpu_times: user, nice, system, irq, softirq and a VM's steal,
which is CPU time the hypervisor gave others) and this process's own, its live children's included (DataLoader
workers), over an interval. Others' CPU time is the difference. Their share of this run's CPUs is what they took
beyond the CPUs this run left free: max(0, own + others - machine) / own, with `own` the threads it computes
with, so other work on cores the run does not use is not counted against it, and a run that idles (waiting on a
GPU) is not called busy by the others' use of the cores it leaves.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from tuner.study import BUSY_SHARE  # others took 20% of a run's CPUs or more: its figures move with the load


@dataclass(frozen=True)
class CpuShare:
    """Over `seconds`: the CPUs others kept busy on average (`others_cpus`), their share of the run's `cpus`, and
    the 1-minute load average at the end."""

    seconds: float
    others_cpus: float
    share: float
    load1: float | None
    cpus: int

    @property
    def busy(self) -> bool:
        return self.share >= BUSY_SHARE

    def describe(self) -> str:
        load = f", load average {self.load1:.1f}" if self.load1 is not None else ""
        return (f"other processes took {self.share:.0%} of {self.cpus} CPU{'s' if self.cpus != 1 else ''} "
                f"({self.others_cpus:.1f} CPUs busy with their work{load})")


def _machine_busy() -> float:
    import psutil

    t = psutil.cpu_times()
    return sum(getattr(t, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq", "steal"))


def _own_busy() -> float:
    """This process's CPU time, with its live children's (DataLoader workers) and its waited-for ones'."""
    import psutil

    me = psutil.Process()
    t = me.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in me.children(recursive=True):
        try:
            c = child.cpu_times()
            total += c.user + c.system
        except psutil.Error:  # ended between the listing and the reading
            continue
    return total


def machine_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class OthersMeter:
    """Started at construction; `read()` gives what others took since (None where the platform cannot tell)."""

    def __init__(self, cpus: int | None = None) -> None:
        self.cpus = max(1, int(cpus or machine_cpus()))
        try:
            self.t0, self.machine0, self.own0 = time.monotonic(), _machine_busy(), _own_busy()
        except Exception:  # noqa: BLE001 - no psutil reading here: nothing to say, nothing to fail
            self.t0 = None

    def read(self) -> CpuShare | None:
        if self.t0 is None:
            return None
        try:
            seconds = time.monotonic() - self.t0
            machine, own = _machine_busy() - self.machine0, _own_busy() - self.own0
        except Exception:  # noqa: BLE001
            return None
        if seconds <= 0:
            return None
        others = max(0.0, (machine - own) / seconds)
        total = machine_cpus()
        share = min(1.0, max(0.0, self.cpus + others - total) / self.cpus)
        return CpuShare(round(seconds, 3), round(others, 3), round(share, 3), load_average(), self.cpus)


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def sample(seconds: float = 1.0, cpus: int | None = None) -> CpuShare | None:
    """Others' share of `cpus` (default: every CPU of this machine) over `seconds` of this process waiting: before
    a study, what the machine is doing without it."""
    meter = OthersMeter(cpus)
    time.sleep(seconds)
    return meter.read()


def wait_quiet(max_wait_s: float, cpus: int | None = None, every_s: float = 1.0,
               on_wait: object = None) -> CpuShare | None:
    """Sample every `every_s` until others take less than BUSY_SHARE of `cpus`, or `max_wait_s` has passed;
    the last sample. `on_wait(sample)` is called once, when the first sample is busy."""
    deadline = time.monotonic() + max_wait_s
    told = False
    while True:
        got = sample(every_s, cpus)
        if got is None or not got.busy or time.monotonic() >= deadline:
            return got
        if not told and callable(on_wait):
            on_wait(got)
            told = True
