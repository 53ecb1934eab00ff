"""Every trial in a fresh OS process, forked by the (reused) Ray trial process's fork server.

A trial's figures must come from a process of its own with nothing left from the one before, as `tuner train`'s
do (re-runs sharing one process agreed within 1% while separate processes of the same config read 290-329
samples/s; benchmarks/results/retrain.md). A fresh Ray trial actor per trial gave that, but Ray and Tune took about
2 s to turn each actor over, and a fresh interpreter pays its imports (2-3 s of a 2-core CPU: Python, torch, tuner)
before the trial's own work begins.

So the Tune trial process (it imports neither torch nor the workload) starts one fork server (tuner.search.
_fresh_server: `python -c _fresh_server.BOOT --server`) with its first trial, and the server forks one child
per trial, search trial and confirmation re-run alike (issue 55: a search trial at the user's environment ran in the
reused trial process itself, beside what the trials before it had left there). The server has imported torch and
tuner's own modules and paid their one-time costs once, on tuner's built-in CNN at one thread
(_fresh_server.warm_up): no thread pool left, no CUDA context, no user workload module. Each child builds what its
figures depend on itself, as `tuner train` does: the workload, its data and models, the loader's workers, the FID
extractor and statistics, the device's context, torch's thread pools. The trial process waits while the child
trains, passing on the reports the child writes while it trains (a window, a phase, a rung: `_Reports`, read every
REPORT_POLL_S) to Tune, and ends the child when Tune stops the trial at one; nothing else of it competes with the
child's timed windows. The child dies with the server, and the server with the trial process (Ray ends a stopped
trial's process with SIGKILL). On a host with a GPU (any NVIDIA or AMD device node, unless CUDA_VISIBLE_DEVICES is
set empty) each trial is a fresh interpreter instead: a GPU driver initialized in the server would not work in its
children (`forkable`).

Servers are keyed by the environment-knob variables they were started under (`Servers`; OMP_WAIT_POLICY, which
libgomp reads once, when torch loads, and glibc's MALLOC_*_THRESHOLD_, read at the process's start): a trial is
forked from the server started under the user's environment with what its knobs set (`wanted_env`). A server
under the user's own environment sets none of the variables: tuner sets none it did not choose as a knob. The
environment probes (tuner.search._env_probe) read each value in children of that value's server too (`run_job`).

This module is the trial process's side: where a run goes and what comes back; the server is _fresh_server.py.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner.knobs import knob_env
from tuner.search._fresh_server import (ENV_VARS, Servers, dumps_job, ending, forkable, run_in_interpreter)
from tuner.search._protocol import TrialOrder, to_tune
from tuner.search._trial import Engine, TrialSetup, _now, final_report, ray_node_id, run_one
from tuner.study import TrialRecord
from tuner.workload import kill_process


# The environment-knob variables (tuner.search._fresh_server.ENV_VARS: OMP_WAIT_POLICY, malloc's) as the user's
# environment had them when this process started: they are read once, at load, so a trial's server starts under them.
_USER_ENV: dict[str, str | None] = {var: os.environ.get(var) for var in ENV_VARS}
_SERVERS = Servers()  # this trial process's own: one per environment its trials want
REPORT_POLL_S = 0.05  # how often the trial process looks for its child's reports (a report waits this long at most)


def wanted_env(config: dict[str, Any], setup: TrialSetup) -> dict[str, str | None]:
    """The environment-knob variables a trial must train under: the user's own, with what its knobs set (an
    OMP_WAIT_POLICY the study chose); tuner sets nothing else."""
    order = TrialOrder.from_config(config)
    params = setup.space.trial_config(order.searched, setup.base).params
    return _USER_ENV | knob_env(params)


def run_fresh(config: dict[str, Any], setup: TrialSetup, engine: Engine,
              env: dict[str, str | None] | None = None,
              send: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run one trial or re-run (`config`: Tune's, holding its TrialOrder) in a process of its own, forked from the
    server started under its environment (`env`, else `wanted_env`; run_job), and return the payload run_one would
    have returned in this one. The reports the child makes while it trains go to `send` (none without one); where
    `send` raises (Tune stopped the trial at a report), the child is ended and the exception goes on. A child that
    dies without a payload becomes an error record."""
    node = ray_node_id()  # the child runs on this node but outside Ray
    env = wanted_env(config, setup) if env is None else env
    if send is None:
        code, payload = run_job(_run_trial, (config, setup, engine, node, None), env,
                                preload=setup.base.get("workload"))
    else:
        code, payload = _Reports(send).run(config, setup, engine, node, env)
    if payload is not None:
        return payload
    order = TrialOrder.from_config(config)
    # a search trial's words as when its Ray process died (tuner.search._recorder.classify_ray_error)
    died = (f"the re-run's process ended with {ending(code)}" if order.rerun else
            f"the trial process died ({ending(code)})")
    record = TrialRecord(state="error", trial=order.trial, params=order.searched,
                         wall_limit_s=order.limits.wall_limit_s, ended=_now(), host=socket.gethostname(), node=node,
                         error=f"{died} before it reported (killed, or out of host memory)")
    return to_tune(final_report(record, setup.objectives))


class _Reports:
    """The trial process's side of a child's reports while it trains: the child appends each as a JSON line to a
    file (`_appender`); this process passes every whole line on to `send`, in order, while it waits for the child
    (which runs from a helper thread, so `send` is called from the caller's: Tune's trial thread)."""

    def __init__(self, send: Callable[[dict[str, Any]], None]) -> None:
        self.send = send
        self.offset = 0
        self.pids: list[int] = []

    def run(self, config: dict[str, Any], setup: TrialSetup, engine: Engine, node: str | None,
            env: dict[str, str | None]) -> tuple[int, Any]:
        with tempfile.TemporaryDirectory(prefix="tuner-trial-") as tmp:
            path = Path(tmp) / "reports.jsonl"
            box: dict[str, Any] = {}

            def job() -> None:
                try:
                    box["out"] = run_job(_run_trial, (config, setup, engine, node, str(path)), env,
                                         started=self.pids.append, preload=setup.base.get("workload"))
                except BaseException as err:  # noqa: BLE001 - raised in the caller's thread below
                    box["error"] = err

            waiter = threading.Thread(target=job, name="tuner-trial-child", daemon=True)
            waiter.start()
            try:
                while True:
                    ended = not waiter.is_alive()  # looked at before the last read: no line written before is lost
                    self.pass_on(path)
                    if ended:
                        break
                    waiter.join(REPORT_POLL_S)
            except BaseException:  # Tune stopped the trial at a report (SystemExit), or this process is stopping
                for pid in self.pids:
                    kill_process(pid)
                waiter.join()
                raise
            if "error" in box:
                raise box["error"]
            return box["out"]

    def pass_on(self, path: Path) -> None:
        """Send the whole lines written since the last look."""
        try:
            with path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:  # the child has not reported yet
            return
        end = chunk.rfind(b"\n") + 1
        self.offset += end
        for line in chunk[:end].splitlines():
            if line.strip():
                self.send(json.loads(line))


def _appender(path: str) -> Callable[[dict[str, Any]], None]:
    """The child's `send`: one JSON line a report, flushed as it is made (its trial process reads them)."""
    def send(report: dict[str, Any]) -> None:
        with open(path, "a") as f:
            f.write(json.dumps(report) + "\n")
    return send


def run_job(fn: Any, args: tuple[Any, ...], env: dict[str, str | None] | None = None, *,
            servers: Servers | None = None, quiet: bool = False, timeout: float | None = None,
            started: Callable[[int], None] | None = None, preload: str | None = None) -> tuple[int, Any]:
    """Run `fn(*args)` (a module-level function whose result is JSON) in a process of its own under `env`'s
    environment-knob variables (None: this process's own; a None value: unset): forked from the server `servers`
    (this trial process's own by default) keeps for that environment, or, on a host that does not fork, in a fresh
    interpreter. Return the child's exit code and its result (None where it reported none). `quiet`: its output
    is dropped; `timeout`: seconds before the child is killed; `started`: told the child's pid; `preload`: the
    workload reference the server imports before it forks, where that is safe (tuner.search._preload)."""
    with tempfile.TemporaryDirectory(prefix="tuner-rerun-") as tmp:
        job, out = Path(tmp) / "job.pkl", Path(tmp) / "payload.json"
        job.write_bytes(dumps_job((fn, args)))
        if forkable():
            server = (servers if servers is not None else _SERVERS).get(env, quiet=quiet)
            code = server.run(job, out, timeout, started=started, preload=preload)
        else:
            code = run_in_interpreter(job, out, env, quiet=quiet, timeout=timeout, started=started)
        return code, (json.loads(out.read_text()) if out.is_file() else None)


def _run_trial(config: dict[str, Any], setup: TrialSetup, engine: Engine, node: str | None,
               reports: str | None) -> dict[str, Any]:
    return run_one(config, setup, engine=engine, node=node, send=_appender(reports) if reports else None)

