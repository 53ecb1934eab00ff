"""The busy-machine meter (issue 58): other processes' CPU time over an interval, apart from this process's own
(its children, a DataLoader's workers, count as its own), as a share of the CPUs a run computes with. A planted
competing process (a detached spinner: not this process's child) is seen; the same spinner as a child is not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tuner.measure.load import OthersMeter, machine_cpus, sample

SPIN = "while True: pass"


def detached_spinners(n: int) -> list[int]:
    """n CPU-bound processes that are not this process's children (the shell that started them has exited)."""
    out = subprocess.run(["sh", "-c", " ".join([f'{sys.executable} -c "{SPIN}" >/dev/null 2>&1 & echo $!;'] * n)],
                         capture_output=True, text=True, check=True).stdout
    return [int(p) for p in out.split()]


@pytest.fixture
def spinners():
    started: list[int] = []

    def start(n: int) -> None:
        started.extend(detached_spinners(n))
        time.sleep(0.3)  # running before the meter starts

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


def test_this_processs_own_children_are_its_own_work(spinners):
    """A child (as a DataLoader worker is) spinning is not 'others'; the same spinner detached is."""
    child = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        time.sleep(0.3)
        meter = OthersMeter(1)
        time.sleep(1.5)
        own = meter.read()
    finally:
        child.kill()
        child.wait()
    spinners(1)
    meter = OthersMeter(1)
    time.sleep(1.5)
    other = meter.read()
    assert own is not None and other is not None
    assert other.others_cpus - own.others_cpus >= 0.5  # the detached one counted as others, the child not


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
