"""A confirmation re-run in a fresh OS process, started by the phase's (reused) Ray trial process.

The re-run's own figures must come from a process of its own, as `tuner train`'s do (re-runs sharing one process
agreed within 1% while separate processes of the same config read 290-329 samples/s; benchmarks/results/retrain.md).
A fresh Ray trial actor per re-run gave that, but Ray and Tune took about 2 s to turn each actor over, and a fresh
interpreter pays its imports (2-3 s of a 2-core CPU: Python, torch, tuner) before the re-run's own work begins.

So the Tune trial process (it imports neither torch nor the workload) starts one fork server (tuner.search.
_fresh_server: `python -m tuner.search._fresh_server --server`) with its first search trial (`start_server`), and
the server forks one child per re-run. The server has only imported torch and tuner's own modules: no operation
run, no thread pool, no CUDA context, no workload module. Each child builds what its figures depend on itself, as
`tuner train` does: the workload, its data and models, the loader's workers, the FID extractor and statistics, the
device's context, torch's thread pools. The trial process waits without working while the child trains, so nothing
of it competes with the child's timed windows; the child dies with the server, and the server with the trial
process (Ray ends a stopped trial's process with SIGKILL). On a host with a GPU (any NVIDIA or AMD device node,
unless CUDA_VISIBLE_DEVICES is set empty) each re-run is a fresh interpreter instead: a GPU driver initialized in
the server would not work in its children (`forkable`).

Servers are keyed by the environment-knob variables they were started under (`Servers`; OMP_WAIT_POLICY, which
libgomp reads once, when torch loads). A search trial whose wait policy differs from the one torch was loaded under
in its trial process (`place_trial`) is forked from the server started under its policy, as a re-run is: in a fresh
interpreter each, such trials paid torch's load again, and a study whose probe chose ACTIVE spent 21 s of set-up per
trial instead of 2.4 s (benchmarks/results/lab-notes.md, row 2, twenty-third session). A server under the user's
own environment sets none of the variables: tuner sets none it did not choose as a knob. The wait-policy probe
(tuner.search._env_probe) reads each value in children of that value's server too (`run_job`).

This module is the trial process's side: where a run goes and what comes back; the server is _fresh_server.py.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from tuner.knobs import knob_env
from tuner.search._fresh_server import ENV_VARS, Servers, dumps_job, ending, forkable, knob_vars, run_in_interpreter
from tuner.search._protocol import TrialOrder, to_tune
from tuner.search._trial import Engine, TrialSetup, _now, final_report, ray_node_id, run_one
from tuner.study import TrialRecord


# The environment-knob variables (tuner.search._fresh_server.ENV_VARS: OMP_WAIT_POLICY) as the user's environment
# had them when this process started, and as torch was loaded under in it (None: not yet): libgomp reads them once,
# at load.
_USER_ENV: dict[str, str | None] = {var: os.environ.get(var) for var in ENV_VARS}
_LOADED: dict[str, str | None] | None = None
_SERVERS = Servers()  # this trial process's own, for its re-runs and its trials of another environment


def wanted_env(config: dict[str, Any], setup: TrialSetup) -> dict[str, str | None]:
    """The environment-knob variables a trial must train under: the user's own, with what its knobs set (an
    OMP_WAIT_POLICY the study chose); tuner sets nothing else."""
    order = TrialOrder.from_config(config)
    params = setup.space.trial_config(order.searched, setup.base).params
    return _USER_ENV | knob_env(params)


def place_trial(config: dict[str, Any], setup: TrialSetup) -> dict[str, str | None] | None:
    """Where a trial trains: None, in this process (before torch loads here, its environment is set first, so
    later trials that want the same run here too); else the environment of the process it needs (forked from
    the server started under it, run_fresh), since torch here was loaded under another (a baseline at the user's
    wait policy beside a study's choice)."""
    global _LOADED
    want = wanted_env(config, setup)
    if _LOADED is None:
        if "torch" in sys.modules:
            _LOADED = {var: os.environ.get(var) for var in ENV_VARS}
        else:
            for var, value in want.items():
                if value is None:
                    os.environ.pop(var, None)
                else:
                    os.environ[var] = value
            _LOADED = dict(want)
    return None if want == _LOADED else want


def run_fresh(config: dict[str, Any], setup: TrialSetup, engine: Engine,
              env: dict[str, str | None] | None = None) -> dict[str, Any]:
    """Run one re-run (`config`: the trial's own config with its repeat), or a trial whose environment differs from
    the one torch was loaded under here (`env`, place_trial), in a process of its own, forked from the server
    started under its environment (run_job); return the payload run_one would have returned in this one. A child
    that dies without one becomes an error record."""
    node = ray_node_id()  # the child runs on this node but outside Ray
    if env is None and not TrialOrder.from_config(config).rerun:
        env = place_trial(config, setup)
    elif env is None:
        want = wanted_env(config, setup)
        env = None if want == (_LOADED if _LOADED is not None else _USER_ENV) else want
    code, payload = run_job(_run_trial, (config, setup, engine, node), env)
    if payload is not None:
        return payload
    order = TrialOrder.from_config(config)
    record = TrialRecord(state="error", trial=order.trial, params=order.searched,
                         wall_limit_s=order.limits.wall_limit_s, ended=_now(), host=socket.gethostname(), node=node,
                         error=f"the re-run's process ended with {ending(code)} before it reported (killed, "
                               f"or out of host memory)")
    return to_tune(final_report(record, setup.objectives))


def run_job(fn: Any, args: tuple[Any, ...], env: dict[str, str | None] | None = None, *,
            servers: Servers | None = None, quiet: bool = False, timeout: float | None = None) -> tuple[int, Any]:
    """Run `fn(*args)` (a module-level function whose result is JSON) in a process of its own under `env`'s
    environment-knob variables (None: this process's own; a None value: unset): forked from the server `servers`
    (this trial process's own by default) keeps for that environment, or, on a host that does not fork, in a fresh
    interpreter. Return the child's exit code and its result (None where it reported none). `quiet`: its output
    is dropped; `timeout`: seconds before the child is killed."""
    with tempfile.TemporaryDirectory(prefix="tuner-rerun-") as tmp:
        job, out = Path(tmp) / "job.pkl", Path(tmp) / "payload.json"
        job.write_bytes(dumps_job((fn, args)))
        if forkable():
            code = (servers if servers is not None else _SERVERS).get(env, quiet=quiet).run(job, out, timeout)
        else:
            code = run_in_interpreter(job, out, env, quiet=quiet, timeout=timeout)
        return code, (json.loads(out.read_text()) if out.is_file() else None)


def _run_trial(config: dict[str, Any], setup: TrialSetup, engine: Engine, node: str | None) -> dict[str, Any]:
    return run_one(config, setup, engine=engine, node=node)


def start_server() -> None:
    """Start this trial process's fork server with its first search trial, beside that trial's warm-up (issue 20
    item 6): started with the first re-run, its imports (~3 s of this 2-core CPU) stood between the search's last
    trial and the first re-run. The trial waits for them to end before its timed work (train_trial), so they
    never compete with a timed window. Not where re-runs are fresh interpreters (forkable)."""
    from tuner.search._trial import before_timing

    server = _SERVERS.by_env.get(knob_vars(None))  # the one under this process's own environment
    if not forkable() or (server is not None and server.alive()):
        return
    before_timing(_SERVERS.get().ready)


