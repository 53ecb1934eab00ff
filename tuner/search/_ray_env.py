"""Ray for a study: the quiet environment, starting a local Ray (marked as the study's: tuner.search._ray_sessions)
or joining a cluster, stopping it with everything it started, and Ray's loggers.

One copy of these settings, used by `tuner search`, the tests' shared Ray session and the benchmarks.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tuner.errors import DeviceError
from tuner.search._ray_sessions import SESSION_MARK, mark_session, session_dir

# What Ray reads at start-up: no usage stats, no auth token file, the old (quiet) console output, no Tune result
# loggers (tuner writes its own records).
QUIET_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "RAY_AIR_NEW_OUTPUT": "0",
    "TUNE_PRINT_ALL_TRIAL_ERRORS": "0",
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
    "RAY_DEDUP_LOGS": "0",
    # A trial reports every window, and its objectives only at rungs and at its end (tuner.search._trial).
    "TUNE_DISABLE_STRICT_METRIC_CHECKING": "1",
}
RAY_LOGGERS = ("ray", "ray.tune", "ray.train", "ray.tune.tune", "ray.tune.execution.tune_controller")


def quiet_ray_environment() -> None:
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)


def package_root() -> str:
    """The folder that holds the `tuner` package: workers import this tuner, even from a source checkout."""
    return str(Path(__file__).resolve().parents[2])


def worker_env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (package_root(), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}


def ship_excludes() -> list[str]:
    """What Ray leaves out of a shipped folder (runtime_env excludes, gitignore syntax): caches, VCS and virtual
    environments (tuner.workload.SHIP_EXCLUDES, which ship_paths's size limit leaves out too)."""
    from tuner.workload import SHIP_EXCLUDES

    return [p if p.startswith("*") else f"{p}/" for p in SHIP_EXCLUDES]


def shipped_env(py_modules: list[str] | None) -> dict[str, str]:
    """Tells the workers where the user's shipped files came from, so their tracebacks name the user's own paths
    (tuner.workload.frames.user_path), not Ray's copies."""
    from tuner.workload import SHIPPED_ENV

    return {SHIPPED_ENV: os.pathsep.join(py_modules)} if py_modules else {}


# Ray prestarts a worker per CPU for the first driver's job as it connects, beside ray.init's own start-up: on 2
# cores ray.init took 2.6-3.6 s with them and 2.0-3.1 s without (5+5 runs, interleaved), and Tune's trial actor
# started no later (2.0-2.3 s after fit() either way, a probe-length pause after ray.init).
# Ray starts its workers at niceness 15 (worker_niceness), so every trial ran below the user's own training: beside
# one process spinning on one of 2 cores, torchvision's MobileNetV3-Small (batch 64, 2 threads) trained under 8.7
# samples/s in a trial and could not finish 3 steps in a 10 s one, where `tuner train` of the same config read 149
# (quiet: 578); at 0 the trial read 152 (sixty-ninth session). At 0 Ray sets none: its workers run at the niceness
# the study was started at, as the user's loop would.
LOCAL_SYSTEM_CONFIG = {"prestart_worker_first_driver": False, "worker_niceness": 0}


# Head processes a local study's Ray never uses, which ray.init starts anyway: the autoscaler's monitor (a fixed
# local node has nothing to scale), the API server (with include_dashboard=False still a minimal dashboard process,
# which ray.init waits for to register), and, unless --verbose shows workers' output, the log monitor. Ray's
# RayParams has no_monitor but ray.init does not pass it, nor offers the others. In the default study on 2 cores
# (3 + 3 runs, interleaved) ray.init took 1.3-1.4 s instead of 3.4-3.7 s and the probes after it 3.3-4.7 s instead
# of 5.0-5.6 s (those processes' start-up no longer beside them): the first trial began 8.4-9.5 s after ray.init
# was called instead of 11.7-13.1 s.
_UNUSED_HEAD_PROCESSES = ("start_monitor", "start_api_server")
_UNUSED_QUIET = ("start_log_monitor",)


def start_local_ray(cpus: float, gpus: float, *, verbose: bool = False, object_store_mb: int = 256,
                    py_modules: list[str] | None = None, excludes: tuple[str, ...] = ()) -> None:
    """A local Ray with exactly these resources, quiet, workers able to import tuner and the user's workload."""
    import ray

    quiet_ray_environment()
    runtime_env: dict[str, Any] = {"env_vars": worker_env() | shipped_env(py_modules)}
    if py_modules:
        runtime_env["py_modules"] = list(py_modules)
        runtime_env["excludes"] = [*ship_excludes(), *excludes]
    with _without(_UNUSED_HEAD_PROCESSES + (() if verbose else _UNUSED_QUIET)), _apart(), _keeping_stop_handler():
        ray.init(num_cpus=int(cpus), num_gpus=int(gpus), object_store_memory=object_store_mb * 2**20,
                 include_dashboard=False, log_to_driver=verbose,
                 logging_level=logging.INFO if verbose else logging.ERROR, runtime_env=runtime_env,
                 _system_config=dict(LOCAL_SYSTEM_CONFIG))
    mark_session()


@contextmanager
def _without(starts: tuple[str, ...]) -> Iterator[None]:
    """Ray's node, for the duration, skipping these of its process starts (methods of ray._private.node.Node);
    where Ray's internals moved, nothing is skipped and Ray starts as it always does."""
    try:
        from ray._private.node import Node
    except ImportError:
        yield
        return
    saved = {name: Node.__dict__[name] for name in starts if callable(Node.__dict__.get(name))}
    try:
        for name in saved:
            setattr(Node, name, _skipped)
        yield
    finally:
        for name, method in saved.items():
            setattr(Node, name, method)


def _skipped(self: Any, *args: Any, **kwargs: Any) -> None:
    return None


@contextmanager
def _apart() -> Iterator[None]:
    """The processes Ray starts for the duration (its head processes, and through the raylet its agents and
    workers) in a process group of their own. A signal to the driver's group (`timeout` sends SIGTERM to its whole
    group, a closed terminal SIGHUP to the foreground one) then reaches only the driver, which stops the study and
    ends them (stop_ray); reaching them too, it killed the GCS under the stopping driver, which waited 60 s for it
    and exited 1 (Ctrl-C's SIGINT, sent to the group too, Ray already blocks in them). Where Ray's internals
    moved, they stay in the driver's group, as before."""
    try:
        from ray._private import services
    except ImportError:
        yield
        return
    original = getattr(services, "ConsolePopen", None)
    if not isinstance(original, type) or os.name != "posix":
        yield
        return

    class _OwnGroup(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            before = kwargs.get("preexec_fn")

            def preexec() -> None:
                if before is not None:
                    before()
                os.setpgid(0, 0)

            kwargs["preexec_fn"] = preexec
            super().__init__(*args, **kwargs)

    services.ConsolePopen = _OwnGroup
    try:
        yield
    finally:
        services.ConsolePopen = original


@contextmanager
def _keeping_stop_handler() -> Iterator[None]:
    """ray.init without its SIGTERM handler (`sys.exit`) where the caller has its own (a study's, tuner.search.
    _stop): a SIGTERM while Ray starts then stops the study as one a moment later would, not with exit status 15
    and Ray half started."""
    try:
        from ray._private import utils
    except ImportError:
        yield
        return
    current = signal.getsignal(signal.SIGTERM)
    if not callable(current) or not callable(getattr(utils, "set_sigterm_handler", None)):
        yield
        return
    original = utils.set_sigterm_handler
    utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        utils.set_sigterm_handler = original


def stop_ray(local: bool) -> None:
    """ray.shutdown(), without the second it waits for the autoscaler's monitor of a Ray started here (`local`;
    a cluster's processes are never touched): Ray asks
    each process it started to end (SIGTERM) and waits up to 1 s before killing it, and the monitor (idle on a
    local Ray: it has no cluster to scale) takes that whole second every time, 1.0 of ray.shutdown's 1.4 s at the
    end of every study. So it is killed first, as Ray would a second later; the others end on Ray's request.
    (start_local_ray no longer starts the monitor; this still holds where Ray's internals moved and it did.)"""
    import ray

    try:
        from ray._private import ray_constants, worker

        node = worker._global_node if local else None
        for info in node.all_processes.get(ray_constants.PROCESS_TYPE_MONITOR, []) if node is not None else []:
            if info.process.poll() is None:
                info.process.kill()
                info.process.wait(timeout=5)
    except Exception:  # noqa: BLE001 - Ray's internals moved: ray.shutdown still ends everything, a second later
        pass
    session = session_dir() if local else None
    tree = _local_tree() if local else []
    ray.shutdown()
    _end_left(tree)
    if session is not None:
        (session / SESSION_MARK).unlink(missing_ok=True)  # ended as it should: nothing for end_stale_sessions


def _local_tree() -> list[Any]:
    """The processes of the local Ray started here (psutil.Process): its head processes and everything under them
    (the raylet's agents and workers, a trial's fork server and its children, a trial's loader workers)."""
    import psutil

    try:
        from ray._private import worker

        node = worker._global_node
        infos = [i for group in node.all_processes.values() for i in group] if node is not None else []
    except Exception:  # noqa: BLE001 - Ray's internals moved: ray.shutdown alone, as before
        return []
    tree: list[Any] = []
    for info in infos:
        try:
            head = psutil.Process(info.process.pid)
            tree += [head, *head.children(recursive=True)]
        except psutil.Error:
            continue
    return tree


def _end_left(tree: list[Any]) -> None:
    """Kill what of `tree` ray.shutdown left running. It ends the head processes; the agents and workers under the
    raylet end when they notice it gone, or linger (after a kill -9 of the driver, about 275 s: issue 57), and a
    stopped trial's fork server and loader workers with them. The study has kept all it needs by now."""
    import psutil

    left = [p for p in tree if _running(p)]
    for proc in left:
        try:
            proc.kill()  # psutil checks the pid is still the same process first
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=5)


def _running(proc: Any) -> bool:
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def tuner_ship_path() -> str | None:
    """tuner's own package folder when it is not installed in site-packages (a source checkout or an editable
    install): shipped with a job on a cluster, so that every node runs the driver's tuner and not whatever tuner
    (if any) is installed there. None for a regular install, which the nodes have as well."""
    folder = Path(package_root()) / "tuner"
    if any(part in ("site-packages", "dist-packages") for part in folder.parts):
        return None
    return str(folder)


def join_ray(address: str, *, verbose: bool = False, py_modules: list[str] | None = None,
             excludes: tuple[str, ...] = ()) -> None:
    """Join a running cluster. The user's workload module travels to its workers (runtime_env py_modules), and
    so does tuner itself when it runs from a source checkout (tuner_ship_path); its dependencies (torch, ray, ...)
    must be installed on every node."""
    import ray

    quiet_ray_environment()
    modules = [*(py_modules or []), *([own] if (own := tuner_ship_path()) else [])]
    runtime_env: dict[str, Any] = {"py_modules": modules, "excludes": [*ship_excludes(), *excludes]} if modules \
        else {}
    if py_modules:
        runtime_env["env_vars"] = shipped_env(py_modules)
    try:
        with _keeping_stop_handler():
            ray.init(address=address, include_dashboard=False, log_to_driver=verbose,
                     logging_level=logging.INFO if verbose else logging.ERROR, runtime_env=runtime_env or None)
    except Exception as err:
        raise DeviceError(f"cannot join the Ray cluster at {address}: {type(err).__name__}: {err}; check the "
                          f"address (`ray status` on the head node) or start one with `ray start --head`") from None


def quiet_loggers(verbose: bool) -> dict[str, int]:
    """Silence Ray Tune's own warnings (e.g. its 'resume with Tuner.restore' hint, which is not how tuner
    resumes) unless verbose; returns the previous levels for `restore_loggers`."""
    before = {n: logging.getLogger(n).level for n in RAY_LOGGERS}
    if not verbose:
        for n in RAY_LOGGERS:  # CRITICAL: Tune logs every failed trial at ERROR; tuner reports them itself
            logging.getLogger(n).setLevel(logging.CRITICAL)
    return before


def restore_loggers(levels: dict[str, int]) -> None:
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
