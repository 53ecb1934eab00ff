"""A confirmation re-run in a fresh OS process, started by the phase's (reused) Ray trial process.

The re-run's own figures must come from a process that imports and builds everything itself, as `tuner train`
does (re-runs sharing one process agreed within 1% while separate processes of the same config read 290-329
samples/s; benchmarks/results/retrain.md). A fresh Ray trial actor per re-run gave that, but Ray and Tune took
about 2 s to turn each actor over (a new worker importing ray and ray.tune, registering, the actor's creation),
before the re-run's own imports began. Here the Tune trial process stays (it imports neither torch nor the
workload) and runs each re-run as a child: `python -m tuner.search._fresh JOB OUT`, a plain Python process like
`tuner train`'s, with the trial actor's environment (threads, visible devices, the module path). The parent
waits without working while the child trains, so nothing of it competes with the child's timed windows.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tuner.search._trial import TRIAL_KEY, WALL_KEY, Engine, TrialSetup, _now, ray_node_id, run_one, \
    searched_params, tune_payload
from tuner.study import TrialRecord


def run_fresh(config: dict[str, Any], setup: TrialSetup, engine: Engine) -> dict[str, Any]:
    """Run one re-run (`config`: the trial's own config with its repeat) in a fresh child process; return the
    payload run_one would have returned in this one. A child that dies without one becomes an error record."""
    node = ray_node_id()  # the child runs on this node but outside Ray
    with tempfile.TemporaryDirectory(prefix="tuner-rerun-") as tmp:
        job, out = Path(tmp) / "job.pkl", Path(tmp) / "payload.json"
        job.write_bytes(_dumps((config, setup, engine, node)))
        env = dict(os.environ)
        # The modules this trial process imports (Ray's shipped modules and tuner's own checkout included).
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        child = subprocess.Popen([sys.executable, "-m", "tuner.search._fresh", str(job), str(out), str(os.getpid())],
                                 env=env,
                                 stdin=subprocess.DEVNULL, stdout=2)  # its prints: the trial's stderr
        try:
            code = child.wait()
        finally:  # interrupted (Ctrl-C, Tune stopping the trial): the child does not outlive its trial
            if child.poll() is None:
                child.kill()
                child.wait()
        if out.is_file():
            return json.loads(out.read_text())
    record = TrialRecord(state="error", trial=int(config[TRIAL_KEY]), params=searched_params(config),
                         wall_limit_s=config.get(WALL_KEY), ended=_now(), host=socket.gethostname(), node=node,
                         error=f"the re-run's process ended with exit status {code} before it reported (killed, "
                               f"or out of host memory)")
    return tune_payload(record, setup.objectives)


def _dumps(job: tuple[Any, ...]) -> bytes:
    """Ray's cloudpickle, as Ray ships a trial's parameters: what is importable goes by name (the child then
    imports no ray), what is registered by value (the tests' fake engines) by value."""
    from ray import cloudpickle

    return cloudpickle.dumps(job)


def _die_with_parent(parent: int) -> None:
    """On Linux the child is killed when its trial process dies: Ray ends a stopped trial's actor with SIGKILL,
    so no `finally` of the parent runs to end it."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the parent's own `finally` ends it
        return
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)


def main(job_path: str, out_path: str, parent: str) -> None:
    _die_with_parent(int(parent))
    config, setup, engine, node = pickle.loads(Path(job_path).read_bytes())
    payload = run_one(config, setup, engine=engine, node=node)
    tmp = Path(out_path).with_suffix(".tmp")
    tmp.write_text(json.dumps(payload))
    tmp.rename(out_path)  # the parent reads a whole payload or none


if __name__ == "__main__":
    main(*sys.argv[1:4])
    # The parent waits for this process to end before the next re-run starts: skip Python's ~2 s teardown of
    # torch's modules (the payload and the trial's files are written; tuner.files.fast_exit).
    from tuner.files import fast_exit

    fast_exit(0)

