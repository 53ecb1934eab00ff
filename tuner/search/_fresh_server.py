"""The fork server behind a fresh-process run (tuner.search._fresh): both ends of its protocol, one server per
environment (`Servers`), and the fresh interpreter that stands in for a server on a host with a GPU (`forkable`).

The server (`python -c BOOT --server PARENT`, BOOT calling `cli`) imports what every trial imports (`_PRELOAD`:
torch and tuner's own modules) and pays, once, the one-time costs every trial's first steps pay whatever its
workload (`warm_up`: tuner's train path on its built-in CNN, single-threaded; no thread pool left, no CUDA context);
it imports the user's workload module where that import changes nothing a trial reads (tuner.search._preload).
Each job line on its stdin goes to a child forked before it came (`_Spare`: forked while the server is idle,
after the last child has gone); the child runs its job (`main`) and builds what its figures depend on itself, its own untimed
warm-up included, and says when its payload is written, so its trial process goes on while the kernel tears the
child down (`_wait_child`). A child dies with the server and the server with its trial process (PR_SET_PDEATHSIG,
`_die_with_parent`).

Over 400 lines because both ends of one protocol live here, the trial process's (`_Server`, `Servers`) and the
server's (`serve`, `_Spare`, `_child`): a change to one end is read beside the other.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any

from tuner.knobs import env_vars
from tuner.search._preload import PRELOADED, preload
from tuner.workload import kill_process

# The environment-knob variables (tuner.knobs.env_vars: OMP_WAIT_POLICY, malloc's thresholds): libgomp and glibc's
# malloc read them once, when torch loads, so a server is started under the ones its children train under.
ENV_VARS = env_vars()
MODULE = "tuner.search._fresh_server"
# How the server, or one job in a fresh interpreter, starts: `python -c BOOT ARGS`, which imports this module by its
# name and calls cli(ARGS). Not `python -m` this module: tuner.search's package imports it, so runpy warned (a
# RuntimeWarning printed by every `tuner export --verify`), and the children read WARMED from the module by its name.
BOOT = f"import sys; from {MODULE} import cli; cli(sys.argv[1:])"


def forkable() -> bool:
    """Whether this host's re-runs may be forked from the server: not where a GPU could be used. A CUDA (or ROCm)
    driver that was initialized before a fork does not work in the child, and an import that merely asks for
    the device count initializes it; on such hosts each re-run is a fresh interpreter instead (its imports cost
    little against GPU trials' set-up). A CPU-only host, or CUDA_VISIBLE_DEVICES set empty, forks."""
    import glob

    if os.environ.get("CUDA_VISIBLE_DEVICES", "x").strip() in ("", "-1"):
        return True
    return not any(glob.glob(pattern) for pattern in ("/dev/nvidia[0-9]*", "/dev/kfd", "/dev/dxg"))


def run_in_interpreter(job: Path, out: Path, env: dict[str, str | None] | None = None, *, quiet: bool = False,
                       timeout: float | None = None, started: Callable[[int], None] | None = None) -> int:
    """The job in a fresh interpreter of its own (`python -c BOOT JOB OUT PARENT`), under
    `env`'s environment-knob variables where given (None: unset); `started` is told its pid."""
    out_to = subprocess.DEVNULL if quiet else 2  # its prints: the trial's stderr
    child = subprocess.Popen([sys.executable, "-c", BOOT, str(job), str(out), str(os.getpid())],
                             env=_child_env(env), stdin=subprocess.DEVNULL, stdout=out_to, stderr=out_to)
    if started is not None:
        started(child.pid)
    try:
        return child.wait(timeout)
    except subprocess.TimeoutExpired:
        return -9
    finally:  # interrupted (Ctrl-C, Tune stopping the trial) or past its time: the child does not outlive its trial
        if child.poll() is None:
            child.kill()
            child.wait()


def _child_env(env: dict[str, str | None] | None = None) -> dict[str, str]:
    """The trial process's environment (threads, visible devices), with the modules it imports on the path (Ray's
    shipped modules and tuner's own checkout included), and `env`'s environment-knob variables (None: unset)."""
    child = dict(os.environ)
    child["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    for var, value in (env or {}).items():
        if value is None:
            child.pop(var, None)
        else:
            child[var] = value
    return child


def knob_vars(env: dict[str, str | None] | None) -> tuple[tuple[str, str | None], ...]:
    """The environment-knob variables a process started under `env` has (this process's own, `env`'s over them):
    what a server is keyed by."""
    have = {var: os.environ.get(var) for var in ENV_VARS} | dict(env or {})
    return tuple(sorted(have.items()))


def ending(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"exit status {code}"


class _Server:
    """The trial process's end of the fork server: once its imports are done it says `ready`; then a job's paths
    go in on its stdin, and the child's pid and then its exit code (negative: the signal that ended it) come back
    on its stdout."""

    def __init__(self, env: dict[str, str | None] | None = None, quiet: bool = False) -> None:
        self.proc = _popen_for_good([sys.executable, "-c", BOOT, "--server", str(os.getpid())],
                                    env=_child_env(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                    bufsize=1, stderr=subprocess.DEVNULL if quiet else None)
        self.is_ready = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ready(self) -> None:
        """Wait until the server has imported what every re-run imports (or has died: run() then says so)."""
        if not self.is_ready:
            assert self.proc.stdout is not None
            self.proc.stdout.readline()
            self.is_ready = True

    def run(self, job: Path, out: Path, timeout: float | None = None,
            started: Callable[[int], None] | None = None, preload: str | None = None) -> int:
        """Fork a child for `job`, wait for it (killed after `timeout` s), return its exit code (0 as soon as the
        child has written its payload, before its exit); the child never outlives this call. `started` is told
        the child's pid (a caller in another thread may end it). `preload`: the user's workload reference, which
        the server imports before it forks where that is safe (tuner.search._preload)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.ready()
        try:
            self.proc.stdin.write(f"{job}\t{out}\t{preload or ''}\n")
            self.proc.stdin.flush()
            pid = int(self.proc.stdout.readline() or 0)
        except (OSError, ValueError):
            pid = 0
        if not pid:  # the server died (killed, out of memory): no child was started
            self.close()
            return self.proc.returncode or -9
        if started is not None:
            started(pid)
        code = None
        timer = None
        if timeout is not None:
            import threading

            timer = threading.Timer(timeout, kill_process, (pid,))  # the server then reports it killed
            timer.daemon = True
            timer.start()
        try:
            code = int(self.proc.stdout.readline() or -9)  # nothing: the server died, and its child with it
            return code
        finally:  # interrupted (Ctrl-C, Tune stopping the trial): the child does not outlive its trial
            if timer is not None:
                timer.cancel()
            if code is None:
                kill_process(pid)
                self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _popen_for_good(cmd: list[str], **kwargs: Any) -> subprocess.Popen:
    """Popen from a thread that lasts as long as this process. The server dies with the thread that started it
    (PR_SET_PDEATHSIG follows the thread, not the process), and Ray Tune runs each trial in a thread of its own:
    started from that thread, the server would die with the first re-run's trial."""
    import threading

    box: dict[str, Any] = {}
    ready = threading.Event()

    def start() -> None:
        try:
            box["proc"] = subprocess.Popen(cmd, **kwargs)
        except BaseException as err:  # noqa: BLE001 - raised in the caller's thread below
            box["error"] = err
        ready.set()
        threading.Event().wait()  # never set: this thread ends with the process

    threading.Thread(target=start, name="tuner-rerun-server", daemon=True).start()
    ready.wait()
    if "error" in box:
        raise box["error"]
    return box["proc"]


class Servers:
    """Fork servers keyed by the environment-knob variables they were started under (`knob_vars`): the one for an
    environment serves every job that wants it, forking a child each. They die with this process (each was started
    from a lasting thread, set to die with its parent); `close` ends them sooner."""

    def __init__(self) -> None:
        self.by_env: dict[tuple[tuple[str, str | None], ...], _Server] = {}

    def get(self, env: dict[str, str | None] | None = None, quiet: bool = False) -> _Server:
        """The live server for `env` (None: this process's own environment), started if there is none."""
        key = knob_vars(env)
        server = self.by_env.get(key)
        if server is None or not server.alive():
            server = self.by_env[key] = _Server(dict(key), quiet=quiet)
        return server

    def start(self, envs: list[dict[str, str | None] | None], quiet: bool = False) -> None:
        """Start the servers for `envs` together and wait until each is ready: their imports overlap, and none is
        left importing beside a timed run forked from another."""
        for server in [self.get(env, quiet=quiet) for env in envs]:
            server.ready()

    def close(self) -> None:
        for server in self.by_env.values():
            server.close()
        self.by_env.clear()


# What every re-run imports whatever its workload (tuner's training, measuring and built-in workloads' modules;
# torch through them), and torch._dynamo: every torch.optim optimizer's constructor imports it (Optimizer.
# _patch_step_function), 1.2 s of a 2-core CPU that each re-run paid in its pre-flight; and psutil, which every
# trial's CPU-share and peak-memory readings import (14 ms quiet, paid by each child: issue 55 row 1). The imports
# start no thread and no device. The user's workload module only through `preload`: its import may do anything.
_PRELOAD = ("tuner.train.trial", "tuner.train.preflight", "tuner.measure.quality", "tuner.measure.flops",
            "tuner.builtin.gan", "tuner.builtin.cnn", "torch._dynamo", "psutil")


# What this process's warm-up did (`warm_up`): the pid it ran in and how many times it ran there. A forked child
# inherits it: a trial reads the server's pid and 1, the warm-up paid once per server, not once per trial.
WARMED: dict[str, int] = {}


def warm_up() -> None:
    """Pay in the server, once, what every trial's first training step and evaluation pay in a new process
    whatever the workload (issue 55: each forked child paid them in its own warm-up): torch's lazy
    initializations (the autograd engine, the optimizers' step wrappers and torch._dynamo's disable wrappers,
    GradScaler, the oneDNN convolution and pooling kernels' set-up), through tuner's own train path (the pre-flight's
    warm-up, as tuner.search._trial.warm_process runs it) on its built-in CNN over synthetic data in a throw-away
    cache. Every child
    inherits the same state, and no trial runs here, so nothing of one trial reaches another; each child still
    builds its own workload before its clock starts and runs the loop's untimed warm-up steps. Where the warm-up
    fails, WARMED stays empty and each child warms itself (warm_process), as before.

    Single-threaded: GNU OpenMP's thread pool does not survive a fork (a child of a parent that ran a parallel
    region hangs in its first one), so the warm-up runs at one thread (no parallel region, no pool) and the
    thread count is put back for the children. torch's random state is put back too.

    Tiny (batch 2 of 8 x 8 images): glibc's malloc raises its mmap and trim thresholds to the largest block a
    process frees, and every child inherits them; the CNN's default batch freed 8-16 MB blocks here, which kept a
    trial's step tensors on the heap, and its figures 10-15% above what the user's own fresh process reads (issue
    58). Blocks this small stay under the threshold a process has after importing torch."""
    import tempfile

    import torch

    from tuner.config import parse_config
    from tuner.device import resolve_device
    from tuner.train import check_workload

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory(prefix="tuner-warm-") as cache, torch.random.fork_rng(devices=[]):
            cfg = parse_config({"workload": "cnn", "dataset": "synthetic", "workload_options": {"image_size": 8},
                                "params": {"device": "cpu", "batch_size": 2}}, "warm-up")
            check_workload(cfg, Path(cache), resolve_device("cpu"), warm_only=True)  # as warm_process does
    except Exception as err:  # noqa: BLE001 - the children then warm themselves
        print(f"tuner: the trial server's warm-up failed ({err}); each trial warms up itself", file=sys.stderr)
        return
    finally:
        torch.set_num_threads(threads)
    WARMED.update(pid=os.getpid(), runs=WARMED.get("runs", 0) + 1)


def dumps_job(job: tuple[Any, ...]) -> bytes:
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


def main(job_path: str, out_path: str) -> None:
    fn, args = pickle.loads(Path(job_path).read_bytes())
    payload = fn(*args)
    tmp = Path(out_path).with_suffix(".tmp")
    tmp.write_text(json.dumps(payload))
    tmp.rename(out_path)  # the parent reads a whole payload or none


# What a child writes on its `done` pipe once its payload is written and its exit handlers have run, just before
# os._exit: the server then reports exit status 0 at once and reaps the child while its trial process reads the
# payload (the kernel's teardown of a ~650 MB process took 10-25 ms of each trial's turnaround on 2 loaded cores:
# issue 55 row 1).
PAYLOAD_WRITTEN = b"1"
_REAP_POLL_S = 0.05  # how often the server looks whether a child that has not said `done` has ended


def _wait_child(pid: int, done: int) -> tuple[int, bool]:
    """The child's exit code as the trial process is told it, and whether the child is reaped: (0, False) once the
    child says its payload is written (it ends right after; the server reaps it after reporting), else its exit
    status once it has ended. Polled, not blocked on the pipe alone: a process the child forked (a DataLoader's
    worker) may hold the pipe open after the child died."""
    import select

    while True:
        readable, _, _ = select.select([done], [], [], _REAP_POLL_S)
        if readable:
            if os.read(done, 1) == PAYLOAD_WRITTEN:
                return 0, False
            _, status = os.waitpid(pid, 0)  # every write end closed: the child has ended
            return os.waitstatus_to_exitcode(status), True
        ended, status = os.waitpid(pid, os.WNOHANG)
        if ended:
            return os.waitstatus_to_exitcode(status), True


def serve(parent: int) -> None:
    """The fork server: import what every trial imports and pay its one-time costs once (`warm_up`), then fork
    one child per job line on stdin; the child builds the rest. Ends when its trial process closes stdin or dies."""
    _die_with_parent(parent)
    import torch

    for name in _PRELOAD:
        importlib.import_module(name)
    stdout = os.dup(1)
    os.dup2(2, 1)  # the warm-up's prints (a C library's too) go to stderr: stdout is the protocol
    try:
        warm_up()
    finally:
        sys.stdout.flush()
        os.dup2(stdout, 1)
        os.close(stdout)
    assert not torch.cuda.is_initialized()  # a CUDA context does not survive a fork: each child makes its own
    print("ready", flush=True)
    spare: _Spare | None = None
    for line in sys.stdin:
        job, out, *rest = line.rstrip("\n").split("\t")
        if rest and rest[0]:
            preload(rest[0])
        if spare is not None and spare.preloaded != len(PRELOADED):  # forked before this job's module came in
            spare.discard()
            spare = None
        child = spare if spare is not None else _Spare()
        spare = None
        child.give(job, out)
        print(child.pid, flush=True)
        code, reaped = _wait_child(child.pid, child.done)
        os.close(child.done)
        print(code, flush=True)
        if not reaped:  # its payload is read meanwhile; the next child is forked only after it has gone
            os.waitpid(child.pid, 0)
        spare = _Spare()  # the next job's child, forked now: its trial process's turnaround does not wait for it
    if spare is not None:
        spare.discard()


class _Spare:
    """A child forked before its job is known (the fork and the child's own set-up, 10-15 ms of a trial's turnaround
    on 2 loaded cores: issue 55 row 1), forked while the server is idle, after the last child has gone, so it is
    the process a fork at the job's arrival would be. It waits, without running, for its job on a pipe."""

    def __init__(self) -> None:
        jobs, self.jobs = os.pipe()
        self.done, tell = os.pipe()
        self.preloaded = len(PRELOADED)
        sys.stdout.flush()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.jobs)
            os.close(self.done)
            _child(jobs, tell)
        os.close(jobs)
        os.close(tell)

    def give(self, job: str, out: str) -> None:
        os.write(self.jobs, f"{job}\t{out}\n".encode())
        os.close(self.jobs)

    def discard(self) -> None:
        """End it unused: the pipe closed without a job, it exits."""
        os.close(self.jobs)
        os.close(self.done)
        os.waitpid(self.pid, 0)


def _read_job(jobs: int) -> tuple[str, str] | None:
    """The job line on `jobs` (None: the pipe closed without one)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(jobs, 4096)
        if not chunk:
            return None
        data += chunk
    job, out = data.decode().rstrip("\n").split("\t")
    return job, out


def _child(jobs: int, done: int) -> None:
    """A forked re-run: its prints go to stderr (the server's stdout is the protocol), it dies with the server
    (and so with the trial process), it reads its job from `jobs`, it says on `done` when its payload is written
    and its exit handlers ran, and it never returns into the server's loop."""
    code = 1
    try:
        os.dup2(2, 1)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        _die_with_parent(os.getppid())
        _leave_server_finalizers()
        given = _read_job(jobs)
        if given is None:  # discarded unused
            os._exit(0)
        main(*given)
        code = 0
    except BaseException:  # noqa: BLE001 - run_one records the trial's own errors; this is tuner's
        import traceback

        traceback.print_exc()
    finally:  # never back into the server's loop; no teardown of the modules (tuner.files.fast_exit)
        from tuner.files import fast_exit

        said = (lambda: os.write(done, PAYLOAD_WRITTEN)) if code == 0 else None
        fast_exit(code, last=said)


def _leave_server_finalizers() -> None:
    """The weakref finalizers a child inherits are the server's (its imports': torch.library's 187, each
    deregistering an operator library), so the child's exit does not run them: undoing what its server set up, in
    a process about to end, cost 0.05-0.06 s a trial between trials (issue 55 row 1, interleaved on 2 loaded
    cores). Finalizers the trial makes after the fork still run at its exit (fast_exit), as in a process of its
    own; the server's own exit is unchanged."""
    import weakref

    for finalizer in list(weakref.finalize._registry):  # type: ignore[attr-defined]
        finalizer.atexit = False


def cli(argv: list[str]) -> None:
    """What a started interpreter runs (BOOT): `--server PARENT`, the fork server; `JOB OUT PARENT`, one job."""
    if argv[:1] == ["--server"]:
        serve(int(argv[1]))
    else:
        _die_with_parent(int(argv[2]))
        main(argv[0], argv[1])
        # The parent waits for this process to end before the next re-run starts: skip Python's ~2 s teardown of
        # torch's modules (the payload and the trial's files are written; tuner.files.fast_exit).
        from tuner.files import fast_exit

        fast_exit(0)
