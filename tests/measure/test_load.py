"""The busy-machine meter (issue 58): other processes' CPU time over an interval, apart from this process's own
(its children, a DataLoader's workers, count as its own), as a share of the CPUs a run computes with. A planted
competing process (a detached spinner: not this process's child) is seen; the same spinner as a child is not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tuner.measure import load
from tuner.measure.load import CpuShare, OthersMeter, machine_cpus, sample

SPIN = "while True: pass"


def detached_spinners(n: int) -> list[int]:
    """n CPU-bound processes that are not this process's children (the shell that started them has exited)."""
    out = subprocess.run(["sh", "-c", " ".join([f'{sys.executable} -c "{SPIN}" >/dev/null 2>&1 & echo $!;'] * n)],
                         capture_output=True, text=True, check=True).stdout
    return [int(p) for p in out.split()]


@pytest.fixture
def spinners():
    started: list[int] = []

    def start(n: int) -> list[int]:
        pids = detached_spinners(n)
        started.extend(pids)
        time.sleep(0.3)  # running before the meter starts
        return pids

    yield start
    for pid in started:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_competing_process_is_seen_as_others_share(spinners):
    spinners(machine_cpus())
    got = sample(1.0)
    assert got is not None and got.busy and got.others_cpus >= 0.5 * machine_cpus()
    assert "other processes took" in got.describe()


def cpu_seconds(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def others_beside(spinner: int, monkeypatch, spun: float = 0.3) -> CpuShare:
    """What OthersMeter reads on a machine planted as this process and `spinner` alone (their CPU times), over the
    time the spinner takes to use `spun` CPU seconds: on the real, shared machine the spinner's share, and so what
    it adds to the machine's busy time, moves with the load (on a saturated one it adds nothing: it takes its time
    from the others), so the interval is counted in the spinner's own CPU time, not in seconds."""
    monkeypatch.setattr(load, "_machine_busy", lambda: cpu_seconds(os.getpid()) + cpu_seconds(spinner))
    meter, start = OthersMeter(1), cpu_seconds(spinner)
    deadline = time.monotonic() + 300  # a hang guard only: under any load the spinner gets some CPU
    while cpu_seconds(spinner) - start < spun:
        assert time.monotonic() < deadline, "the spinner got no CPU time"
        time.sleep(0.05)
    got = meter.read()
    assert got is not None
    return got


def test_this_processs_own_children_are_its_own_work(spinners, monkeypatch):
    """A child (as a DataLoader worker is) spinning is not 'others'; the same spinner detached is."""
    child = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        own = others_beside(child.pid, monkeypatch)
    finally:
        child.kill()
        child.wait()
    (detached,) = spinners(1)
    other = others_beside(detached, monkeypatch)
    # CPU seconds others used over each interval: the child's 0.3 none of it (a reading's rounding apart), the
    # detached spinner's all of it
    assert own.others_cpus * own.seconds < 0.05, own
    assert other.others_cpus * other.seconds >= 0.25, other


def test_a_trial_records_the_share_other_processes_took_of_its_cpus(spinners, tmp_path):
    from tuner.config import Budget, Params, TrialConfig
    from tuner.train import run_trial

    spinners(machine_cpus())
    cfg = TrialConfig(workload="cnn", dataset="synthetic", workload_options={"image_size": 8},
                      budget=Budget(samples=256), params=Params(batch_size=32, device="cpu"),
                      quality={"enabled": False}, measure={"warmup_steps": 1, "windows": 2, "window_min_steps": 1,
                                                           "ceiling_seconds": 0})
    res = run_trial(cfg, cache_dir=tmp_path)
    env = res.environment
    assert env is not None and env.others_share is not None and env.busy, env
