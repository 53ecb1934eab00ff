"""Starting and stopping the Ray a study starts on this machine (tuner.search._ray_env)."""

from __future__ import annotations

import json
import subprocess
import sys

STARTS_AND_STOPS = """
import json, os, sys
import ray
from tuner.search._ray_env import start_local_ray, stop_ray
from ray._private import worker
from ray._private.node import Node

verbose = sys.argv[1] == "verbose"
start_local_ray(1, 0, verbose=verbose)
pids = {kind: [i.process.pid for i in infos] for kind, infos in worker._global_node.all_processes.items()}
answer = ray.get(ray.remote(lambda: 41 + 1).remote())
restored = all(getattr(Node, name).__name__ == name for name in ("start_monitor", "start_api_server",
                                                                  "start_log_monitor"))
stop_ray(local=True)
alive = {kind: [p for p in ps if os.path.exists(f"/proc/{p}") and open(f"/proc/{p}/stat").read().split()[2] != "Z"]
         for kind, ps in pids.items()}
print(json.dumps({"started": sorted(pids), "alive": {k: v for k, v in alive.items() if v}, "answer": answer,
                  "restored": restored}))
"""


def start_and_stop(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", STARTS_AND_STOPS, mode], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_local_ray_starts_without_the_head_processes_a_study_never_uses_and_stops_every_one_it_started():
    """No autoscaler monitor (a fixed local node), no API server (ray.init waited for it to register: 3.4-3.8 s
    against 1.5 s without), and no log monitor unless --verbose shows workers' output; tasks still run, Ray's own
    methods are back as they were, and every process Ray started ends with stop_ray."""
    quiet = start_and_stop("quiet")
    assert {"gcs_server", "raylet"} <= set(quiet["started"])
    assert not {"monitor", "dashboard", "log_monitor"} & set(quiet["started"])
    assert quiet["answer"] == 42 and quiet["restored"] and quiet["alive"] == {}
    verbose = start_and_stop("verbose")
    assert "log_monitor" in verbose["started"] and "monitor" not in verbose["started"]
    assert verbose["answer"] == 42 and verbose["alive"] == {}


# Starts a study's local Ray, runs a task (a worker beside the raylet's agents), then dies as a kill -9 would.
KILLED_DRIVER = """
import os, signal
import ray
from tuner.search._ray_env import start_local_ray
from ray._private import worker

start_local_ray(1, 0)
ray.get(ray.remote(lambda: 1).remote())
print(worker._global_node.get_session_dir_path(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def holding(folder) -> list[int]:
    """Processes with a file open under `folder` (how end_stale_sessions finds a session's processes)."""
    import psutil

    out = []
    for proc in psutil.process_iter():
        try:
            if any(f.path.startswith(str(folder) + "/") for f in proc.open_files()):
                out.append(proc.pid)
        except psutil.Error:
            pass
    return out


def test_the_next_study_ends_what_a_killed_studys_local_ray_left_running():
    """kill -9 of `tuner search` left the raylet's agents and its workers running about 275 s (issue 57). The next
    study (end_stale_sessions, before it starts its own Ray) ends every process of a session tuner marked whose
    driver is gone."""
    from pathlib import Path

    from tuner.search._ray_sessions import SESSION_MARK, end_stale_sessions

    out = subprocess.run([sys.executable, "-c", KILLED_DRIVER], capture_output=True, text=True, timeout=120)
    assert out.returncode == -9, out.stderr[-2000:]
    session = Path(out.stdout.strip().splitlines()[-1])
    assert (session / SESSION_MARK).exists()
    assert holding(session), "nothing of the killed driver's Ray was left to end"
    assert end_stale_sessions(session.parent)  # the agents at least (a worker may end on its own meanwhile)
    assert holding(session) == [] and not (session / SESSION_MARK).exists()


def test_a_session_whose_driver_lives_or_that_tuner_did_not_start_is_never_touched(tmp_path):
    """A running study's Ray (its driver alive) and the user's own Ray (no mark) keep every process."""
    import os

    import psutil

    from tuner.search._ray_sessions import SESSION_MARK, end_stale_sessions

    live, own = tmp_path / "session_live", tmp_path / "session_own"
    for folder in (live, own):
        (folder / "logs").mkdir(parents=True)
    (live / SESSION_MARK).write_text(json.dumps({"pid": os.getpid(), "started": None}))
    holders = [subprocess.Popen([sys.executable, "-c", f"import time; f = open({str(f / 'logs' / 'x.log')!r}, 'w'); "
                                 "print(flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
               for f in (live, own)]
    try:
        for proc in holders:
            proc.stdout.readline()  # its file is open
        assert end_stale_sessions(tmp_path) == []
        assert all(proc.poll() is None for proc in holders)
        (live / SESSION_MARK).write_text(json.dumps({"pid": 2**22 + 12345, "started": 0.0}))  # no such process
        assert end_stale_sessions(tmp_path) == [holders[0].pid]
        holders[0].wait(timeout=10)
        assert not psutil.pid_exists(holders[0].pid) and holders[1].poll() is None
    finally:
        for proc in holders:
            proc.kill()
            proc.wait()


def _holder(session) -> subprocess.Popen:
    """A process with a file open under `session`'s logs, as a Ray driver keeps its own (its first line: ready)."""
    (session / "logs").mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", f"import time; f = open({str(session / 'logs' / 'x.log')!r}, 'w'); "
                             "print(flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()
    return proc


def test_a_live_driver_is_not_taken_for_a_dead_one_when_the_clock_is_stepped(tmp_path):
    """A wall-clock start time moves when the machine's clock is stepped (psutil adds the boot time, which the
    step moves); CI's VM did so mid-run, its live pytest workers' marks read as dead drivers', and the next study
    SIGKILLed them. The mark's start ticks since boot decide; a mark without them (written before) is alive while
    its pid holds the session's files. Ticks of another process (the pid reused) still end the session."""
    import psutil

    from tuner.search._ray_sessions import SESSION_MARK, _start_ticks, end_stale_sessions

    session = tmp_path / "session_live"
    driver = _holder(session)
    try:
        ticks, started = _start_ticks(driver.pid), psutil.Process(driver.pid).create_time()
        assert ticks is not None
        for mark in ({"pid": driver.pid, "started": started - 3600.0, "ticks": ticks},  # the clock stepped an hour
                     {"pid": driver.pid, "started": started + 5.0}):  # an older mark, no ticks
            (session / SESSION_MARK).write_text(json.dumps(mark))
            assert end_stale_sessions(tmp_path) == [] and driver.poll() is None
        (session / SESSION_MARK).write_text(json.dumps({"pid": driver.pid, "started": started, "ticks": ticks + 1}))
        assert end_stale_sessions(tmp_path) == [driver.pid]
        driver.wait(timeout=10)  # psutil reaped it (its child here): the status is lost, the process is gone
        assert not psutil.pid_exists(driver.pid) and not (session / SESSION_MARK).exists()
    finally:
        driver.kill()
        driver.wait()


def test_a_study_never_ends_the_process_that_started_it(tmp_path):
    """`tuner search` started by a program that holds a file of a session whose mark reads stale (its driver
    gone) ends the session's other processes, never its own parent: in CI the parent was a pytest worker."""
    from tuner.search._ray_sessions import SESSION_MARK

    session = tmp_path / "session_dead"
    other = _holder(session)
    (session / SESSION_MARK).write_text(json.dumps({"pid": 2**22 + 12345, "started": 0.0}))  # no such process
    try:
        with open(session / "logs" / "mine.log", "w"):  # this process holds the session's files too
            out = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from tuner.search."
                                  "_ray_sessions import end_stale_sessions as end; print(end(Path(sys.argv[1])))",
                                  str(tmp_path)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split() == [f"[{other.pid}]"]  # the other holder only; this test is still running
        assert other.wait(timeout=10) == -9
    finally:
        other.kill()
        other.wait()


def test_a_studys_trials_run_at_the_niceness_the_study_was_started_at(tmp_path):
    """Ray starts its workers at niceness 15: beside a process at the user's niceness such a trial lost the CPU (a
    MobileNet trial under 8.7 samples/s where `tuner train` of its config read 149). The study's local Ray sets none,
    so a trial runs as the user's training would: started under `nice -n 1`, its record says 1, not 15 (nor 0). (At
    `nice -n 3`, which yields more of the CPU to the suite's other worker, its one trial of 128 samples took 74 s.)"""
    import os

    from tests.helpers.searchproc import tuner_env

    base = os.getpriority(os.PRIO_PROCESS, 0)
    done = subprocess.run([sys.executable, "-m", "tuner", "search", "--space", "quick", "--study", "nice",
                           "--trials", "1", "--budget-samples", "128", "--confirm", "0", "--parity-seconds", "0",
                           "--no-probe", "--reports-dir", str(tmp_path)],
                          cwd=tmp_path, env=tuner_env(), capture_output=True, text=True, timeout=600,
                          preexec_fn=lambda: os.nice(1))
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "nice" / "trials" / "0000" / "result.json").read_text())
    assert record["state"] == "complete", record.get("error")
    assert record["environment"]["niceness"] == min(base + 1, 19)
