"""A confirmation re-run in a fresh child process of its trial process (tuner.search._fresh), outside Ray here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tuner.search._fresh import run_fresh
from tuner.search._protocol import TrialOrder, record_of
from tuner.search._trial import TrialSetup
from tuner.space import Space
from tuner.study import Objective, TrialResult

OBJ = [Objective(metric="throughput", direction="max")]


def engine_pid(cfg, *, out_dir=None, **_):
    """Fake: writes the process it ran in beside its grid; throughput from the batch size."""
    (Path(out_dir) / "pid").write_text(str(os.getpid()))
    return TrialResult(state="complete", throughput=float(cfg.params.batch_size), train_seconds=0.01)


def engine_killed(cfg, **_):
    """Fake: the process dies as the kernel's out-of-memory killer would end it, without a word."""
    os._exit(137)


def _setup(tmp_path: Path) -> TrialSetup:
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the child cannot import a test module
    space = Space.model_validate({"objectives": [], "params": {"batch_size": 8}})
    return TrialSetup(space=space, base={"workload": "cnn", "dataset": "synthetic", "budget": {"samples": 64},
                                         "params": {"device": "cpu"}},
                      objectives=OBJ, study_dir=str(tmp_path / "s"), cache_dir=str(tmp_path / "c"))


def test_each_rerun_runs_in_a_fresh_process_and_reports_as_run_one_would(tmp_path):
    setup = _setup(tmp_path)
    pids = []
    for repeat in (0, 1):
        record = record_of(run_fresh(TrialOrder(trial=3, repeat=repeat).to_config(), setup, engine_pid))
        assert record is not None and record.state == "complete" and record.trial == 3
        assert record.get("throughput") == 8.0 and record.config is not None and record.started is not None
        pids.append(int((tmp_path / "s" / "trials" / "0003" / "confirm" / f"{repeat:02d}" / "pid").read_text()))
    assert len(set(pids)) == 2 and os.getpid() not in pids


def test_a_rerun_whose_process_dies_without_a_report_is_an_error_trial(tmp_path):
    record = record_of(run_fresh(TrialOrder(trial=3, repeat=0).to_config(), _setup(tmp_path), engine_killed))
    assert record is not None and record.state == "error" and record.trial == 3
    assert "exit status 137" in (record.error or "")


def engine_family(cfg, *, out_dir=None, **_):
    """Fake: writes its process and its parent beside its grid."""
    (Path(out_dir) / "family").write_text(f"{os.getpid()} {os.getppid()}")
    return TrialResult(state="complete", throughput=1.0, train_seconds=0.01)


@pytest.fixture
def no_server(monkeypatch):
    """No fork server yet in this process (as in a fresh trial process); the one the test starts is ended after."""
    from tuner.search import _fresh

    monkeypatch.setattr(_fresh, "_SERVERS", _fresh.Servers())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the CPU, where re-runs are forked (a GPU host does not fork)
    yield
    _fresh._SERVERS.close()


def test_reruns_run_from_ray_tunes_per_trial_threads_are_children_of_one_lasting_fork_server(tmp_path, no_server):
    """Ray Tune runs each trial in a thread of its own, and a child set to die with its parent dies with the
    thread that started it: the server every re-run is forked from must outlive the first re-run's thread, or
    each re-run would pay a new server's imports."""
    import threading

    setup = _setup(tmp_path)
    for repeat in (0, 1):  # each from a thread that ends after its re-run, as Tune's trial threads do
        order = TrialOrder(trial=3, repeat=repeat).to_config()
        thread = threading.Thread(target=run_fresh, args=(order, setup, engine_family))
        thread.start()
        thread.join()
    family = [(tmp_path / "s" / "trials" / "0003" / "confirm" / f"{r:02d}" / "family").read_text().split()
              for r in (0, 1)]
    (pid0, parent0), (pid1, parent1) = family
    assert pid0 != pid1  # a fresh process each
    assert parent0 == parent1 != str(os.getpid())  # both forked from the one server, which is not this process


def engine_pool(cfg, *, out_dir=None, **_):
    """Fake: leaves a live thread pool behind, as torch.compile's inductor or a user's workload does (held to the
    end of the process, as a library that shuts its pool down at exit holds it)."""
    import atexit
    import concurrent.futures

    pool = concurrent.futures.ThreadPoolExecutor(2)
    pool.submit(lambda: 1).result()
    atexit.register(pool.shutdown)
    return TrialResult(state="complete", throughput=1.0, train_seconds=0.01)


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "interpreter"])
def test_a_rerun_that_leaves_a_live_thread_pool_ends_when_its_work_is_done(tmp_path, no_server, monkeypatch, fork):
    """Its child ends through fast_exit: a pool's idle workers kept it waiting until the driver's cap (issue 57)."""
    import threading

    from tuner.search import _fresh

    monkeypatch.setattr(_fresh, "forkable", lambda: fork)
    box = {}
    runner = threading.Thread(target=lambda: box.update(payload=run_fresh(
        TrialOrder(trial=3, repeat=0).to_config(), _setup(tmp_path), engine_pool)), daemon=True)
    runner.start()
    runner.join(90)  # a hang fails here rather than holding the suite
    assert not runner.is_alive(), "the re-run's child never ended"
    record = record_of(box["payload"])
    assert record is not None and record.state == "complete" and record.get("throughput") == 1.0


def engine_imports(cfg, *, out_dir=None, **_):
    """Fake: writes whether the modules every optimizer's constructor imports were there before it ran."""
    (Path(out_dir) / "imports").write_text(" ".join(str(m in sys.modules) for m in ("torch", "torch._dynamo")))
    return TrialResult(state="complete", throughput=1.0, train_seconds=0.01)


def test_a_forked_rerun_starts_with_what_every_optimizer_imports_already_imported(tmp_path, no_server):
    """torch.optim's optimizers import torch._dynamo when built (1.2 s of this CPU): the server imports it once,
    so no re-run pays it again in its pre-flight."""
    run_fresh(TrialOrder(trial=3, repeat=0).to_config(), _setup(tmp_path), engine_imports)
    assert (tmp_path / "s" / "trials" / "0003" / "confirm" / "00" / "imports").read_text() == "True True"


def engine_warmed(cfg, *, out_dir=None, **_):
    """Fake: writes its server's pid and where and how often its process's one-time warm-up ran."""
    import json

    from tuner.search import _fresh_server

    (Path(out_dir) / "warmed").write_text(json.dumps({"server": os.getppid(),
                                                      "warmed": getattr(_fresh_server, "WARMED", None)}))
    return TrialResult(state="complete", throughput=1.0, train_seconds=0.01)


def test_the_one_time_warm_up_runs_once_in_the_server_not_in_each_forked_rerun(tmp_path, no_server):
    """Every child of a server inherits its warm-up (torch's and tuner's one-time costs, paid before its first fork):
    each child paid them itself, ~0.7 s a trial on a quiet CPU (issue 55)."""
    import json

    setup = _setup(tmp_path)
    seen = []
    for repeat in (0, 1):
        run_fresh(TrialOrder(trial=3, repeat=repeat).to_config(), setup, engine_warmed)
        seen.append(json.loads((tmp_path / "s" / "trials" / "0003" / "confirm" / f"{repeat:02d}" / "warmed")
                               .read_text()))
    assert seen[0]["server"] == seen[1]["server"]
    assert all(s["warmed"] == {"pid": s["server"], "runs": 1} for s in seen), seen


def engine_finalizers(cfg, *, out_dir=None, **_):
    """Fake: writes how many inherited finalizers would run at its exit, and registers one of its own that writes
    a marker when it runs (at the child's exit)."""
    import weakref

    inherited = [f for f in list(weakref.finalize._registry) if f.atexit]
    (Path(out_dir) / "inherited").write_text(str(len(inherited)))
    weakref.finalize(sys, (Path(out_dir) / "own").write_text, "ran")  # sys lives until the exit
    return TrialResult(state="complete", throughput=1.0, train_seconds=0.01)


def test_a_forked_reruns_exit_runs_its_own_finalizers_not_its_servers(tmp_path, no_server):
    """The server's finalizers (torch.library's, ~190, each deregistering an operator library) are the server's:
    the child's exit does not run them (issue 55 row 1: 0.05-0.06 s a trial); its own still run."""
    run_fresh(TrialOrder(trial=3, repeat=0).to_config(), _setup(tmp_path), engine_finalizers)
    grid = tmp_path / "s" / "trials" / "0003" / "confirm" / "00"
    assert (grid / "inherited").read_text() == "0"
    assert (grid / "own").read_text() == "ran"


def engine_reports(cfg, *, out_dir=None, reporter=None, **_):
    """Fake: reports two windows while it 'trains', then says where it ran."""
    from tuner.study.reports import WindowReport

    for window in (1, 2):
        reporter.window(WindowReport(window=window, budget_used=float(window), samples=8 * window, throughput=8.0))
    (Path(out_dir) / "pid").write_text(str(os.getpid()))
    return TrialResult(state="complete", throughput=8.0, train_seconds=0.01)


def test_a_forked_trials_reports_while_it_trains_reach_tune_in_order_before_its_last(tmp_path, no_server):
    """A search trial's windows, phases and rungs are what its scheduler and the live view read: forked, the
    child's reports are passed on by its trial process as they are made, then its final one is returned."""
    from tuner.search._protocol import from_tune

    sent = []
    payload = run_fresh(TrialOrder(trial=2).to_config(), _setup(tmp_path), engine_reports, send=sent.append)
    assert [from_tune(r).window for r in sent] == [1, 2]
    record = record_of(payload)
    assert record is not None and record.state == "complete" and record.get("throughput") == 8.0
    assert int((tmp_path / "s" / "trials" / "0002" / "pid").read_text()) != os.getpid()


def engine_reports_then_sleeps(cfg, *, out_dir=None, reporter=None, **_):
    """Fake: says where it runs, reports one window, then trains 'forever'."""
    import time

    from tuner.study.reports import WindowReport

    (Path(out_dir) / "pid").write_text(str(os.getpid()))
    reporter.window(WindowReport(window=1, budget_used=1.0, samples=8, throughput=8.0))
    time.sleep(120)
    return TrialResult(state="complete", throughput=8.0, train_seconds=120.0)


def test_a_forked_trial_stopped_at_a_report_ends_its_child(tmp_path, no_server):
    """Ray stops a trial by raising SystemExit in the report it waits on: the trial process then ends the child
    training for it, rather than leave it beside the next trial."""
    from tests.helpers.searchproc import running  # here: the forked children import this module
    def stop(report):
        raise SystemExit(0)

    with pytest.raises(SystemExit):
        run_fresh(TrialOrder(trial=2).to_config(), _setup(tmp_path), engine_reports_then_sleeps, send=stop)
    child = int((tmp_path / "s" / "trials" / "0002" / "pid").read_text())
    assert not running(child), "the stopped trial's child trains on"
    [server] = list(_fresh_servers().by_env.values())
    assert server.alive()  # the server forks the next trial


def _fresh_servers():
    from tuner.search import _fresh

    return _fresh._SERVERS


def engine_sleeps(cfg, *, out_dir=None, **_):
    """Fake: says where it runs, then trains 'forever'."""
    import time

    (Path(out_dir) / "pid").write_text(str(os.getpid()))
    time.sleep(120)
    return TrialResult(state="complete", throughput=1.0, train_seconds=120.0)


def _trial_process(tmp: str, fork: bool) -> None:
    """A stand-in for the Ray trial process: runs one re-run of engine_sleeps, forked or in an interpreter."""
    from tuner.search import _fresh

    _fresh.forkable = lambda: fork  # as on a CPU-only host, or as on a GPU host
    run_fresh(TrialOrder(trial=3, repeat=0).to_config(), _setup(Path(tmp)), engine_sleeps)


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "interpreter"])
def test_a_rerun_dies_with_its_trial_process(tmp_path, fork):
    """Ray ends a stopped trial's process with SIGKILL (no `finally` runs there): its re-run, a grandchild behind
    the fork server, must not train on beside the next trial."""
    from tests.helpers.searchproc import running  # here: the forked children import this module
    import signal
    import subprocess
    import time

    here = Path(__file__).resolve().parent
    trial = subprocess.Popen([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(here)!r}); "
                                                    f"from test_fresh_rerun import _trial_process; "
                                                    f"_trial_process({str(tmp_path)!r}, {fork})"])
    pid_file = tmp_path / "s" / "trials" / "0003" / "confirm" / "00" / "pid"
    deadline = time.monotonic() + 120
    while not pid_file.is_file() and time.monotonic() < deadline and trial.poll() is None:
        time.sleep(0.1)
    assert pid_file.is_file(), "the re-run never started"
    time.sleep(0.2)
    child = int(pid_file.read_text())
    trial.send_signal(signal.SIGKILL)
    trial.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and running(child):
        time.sleep(0.1)
    assert not running(child), "the re-run outlived its trial process"



def engine_kills_server(cfg, **_):
    """Fake: the fork server dies under the re-run (as the out-of-memory killer might choose it)."""
    import signal
    import time

    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(60)


def test_a_dead_fork_server_makes_its_rerun_an_error_and_the_next_rerun_gets_a_new_one(tmp_path, no_server):
    setup = _setup(tmp_path)
    record = record_of(run_fresh(TrialOrder(trial=3, repeat=0).to_config(), setup, engine_kills_server))
    assert record is not None and record.state == "error" and "before it reported" in (record.error or "")
    record = record_of(run_fresh(TrialOrder(trial=3, repeat=1).to_config(), setup, engine_pid))
    assert record is not None and record.state == "complete"


def test_only_a_host_without_a_usable_gpu_forks_its_reruns(monkeypatch):
    """A CUDA driver initialized before a fork fails in the child: a GPU host's re-runs are fresh interpreters."""
    import glob

    from tuner.search import _fresh

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert _fresh.forkable()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(glob, "glob", lambda pattern: ["/dev/nvidia0"] if "nvidia" in pattern else [])
    assert not _fresh.forkable()
    monkeypatch.setattr(glob, "glob", lambda pattern: [])
    assert _fresh.forkable()


def engine_env(cfg, *, out_dir=None, **_):
    """Fake: writes its process, its parent and, as each had it when it started, its OMP_WAIT_POLICY and its
    parent's (the server's, at its exec: what libgomp read when the server loaded torch)."""
    import json

    raw = Path(f"/proc/{os.getppid()}/environ").read_bytes().decode(errors="replace").split("\0")
    parent_env = dict(kv.split("=", 1) for kv in raw if "=" in kv)
    (Path(out_dir) / "env.json").write_text(json.dumps({
        "pid": os.getpid(), "parent": os.getppid(), "policy": os.environ.get("OMP_WAIT_POLICY"),
        "server_policy": parent_env.get("OMP_WAIT_POLICY"), "server_env": parent_env}))
    return TrialResult(state="complete", throughput=1.0, train_seconds=0.01)


def _seen(tmp_path: Path, trial: int) -> dict:
    import json

    [found] = (tmp_path / "s" / "trials").glob(f"{trial:04d}*/**/env.json")
    return json.loads(found.read_text())


def test_trials_of_another_wait_policy_are_forked_from_one_server_started_under_it_and_the_users_set_nothing(
        tmp_path, no_server, monkeypatch):
    """A trial whose policy differs from the one torch loaded under in its trial process paid a fresh interpreter
    (torch loaded again, 21 s of set-up against 2.4 s in the default study): now a server started under that
    policy forks it, a process of its own each. A trial at the user's default gets the user's environment: no
    variable of tuner's."""
    from tuner.search import _fresh

    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # this trial process's own, which a trial's env overrides
    monkeypatch.setenv("TUNER_TEST_MINE", "kept")  # one of the user's own
    setup = _setup(tmp_path)
    for trial in (1, 2):  # at the user's default: OMP_WAIT_POLICY unset
        run_fresh(TrialOrder(trial=trial).to_config(), setup, engine_env, env={"OMP_WAIT_POLICY": None})
    run_fresh(TrialOrder(trial=3).to_config(), setup, engine_env, env={"OMP_WAIT_POLICY": "PASSIVE"})
    one, two, passive = _seen(tmp_path, 1), _seen(tmp_path, 2), _seen(tmp_path, 3)
    assert one["pid"] != two["pid"] and os.getpid() not in (one["pid"], two["pid"])  # a process of its own each
    assert one["parent"] == two["parent"] != passive["parent"]  # forked from the one server for that environment
    assert one["policy"] is None and one["server_policy"] is None  # unset, as the user has it, when torch loaded
    mine = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "PYTHONPATH")}
    assert {k: v for k, v in one["server_env"].items() if k != "PYTHONPATH"} == mine  # nothing else set or lost
    assert passive["policy"] == passive["server_policy"] == "PASSIVE"
    assert len(_fresh._SERVERS.by_env) == 2
    servers = [s.proc for s in _fresh._SERVERS.by_env.values()]
    _fresh._SERVERS.close()
    assert all(proc.poll() is not None for proc in servers) and not _fresh._SERVERS.by_env


def _two_server_process(tmp: str) -> None:
    """A stand-in for the Ray trial process: a re-run forked from the server under its own environment, then a
    trial under another policy from a second server, which trains 'forever'."""
    setup = _setup(Path(tmp))
    run_fresh(TrialOrder(trial=3, repeat=0).to_config(), setup, engine_family)
    run_fresh(TrialOrder(trial=4).to_config(), setup, engine_sleeps, env={"OMP_WAIT_POLICY": "PASSIVE"})


def test_every_server_dies_with_its_trial_process(tmp_path):
    """Ray ends a stopped trial's process with SIGKILL: neither server, nor the trial forked from one, lingers."""
    from tests.helpers.searchproc import running  # here: the forked children import this module
    import signal
    import subprocess
    import time

    here = Path(__file__).resolve().parent
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    trial = subprocess.Popen([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(here)!r}); "
                                                    f"from test_fresh_rerun import _two_server_process; "
                                                    f"_two_server_process({str(tmp_path)!r})"], env=env)
    deadline = time.monotonic() + 120
    pid_files = []
    while not pid_files and time.monotonic() < deadline and trial.poll() is None:
        pid_files = list((tmp_path / "s" / "trials").glob("0004*/**/pid")) if (tmp_path / "s").is_dir() else []
        time.sleep(0.1)
    assert pid_files, "the second server's trial never started"
    time.sleep(0.2)
    child = int(pid_files[0].read_text())
    with open(f"/proc/{child}/stat") as f:
        second = int(f.read().rsplit(") ", 1)[1].split()[1])  # its parent: the second server
    _, first = (tmp_path / "s" / "trials" / "0003" / "confirm" / "00" / "family").read_text().split()
    assert second != int(first)
    trial.send_signal(signal.SIGKILL)
    trial.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(running(p) for p in (child, second, int(first))):
        time.sleep(0.1)
    assert not any(running(p) for p in (child, second, int(first))), "a server or its child outlived the trial"


def test_a_fresh_process_prints_nothing_of_its_own_start(tmp_path, capfd):
    """`tuner export --verify` printed runpy's RuntimeWarning twice: the server and a one-job interpreter were
    started with `python -m` on a module its own package imports. The child's stderr is the trial's: it holds
    the user's prints and errors, and nothing from how the child was started. Both kinds run here: a re-run
    forked from the server, and a job in an interpreter of its own (a GPU host's kind)."""
    import json
    import pickle

    from tuner.search._fresh_server import run_in_interpreter

    record = record_of(run_fresh(TrialOrder(trial=3, repeat=0).to_config(), _setup(tmp_path), engine_pid))
    assert record is not None and record.state == "complete"
    job, out = tmp_path / "job.pkl", tmp_path / "out.json"
    job.write_bytes(pickle.dumps((os.getpid, ())))
    assert run_in_interpreter(job, out) == 0
    assert json.loads(out.read_text()) not in (os.getpid(), None)  # it ran, in a process of its own
    err = capfd.readouterr().err
    assert "RuntimeWarning" not in err and "found in sys.modules" not in err, err
