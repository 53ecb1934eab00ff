"""User code that leaves by sys.exit(): at import it is one line and exit 2 for `tuner train` and `tuner search`
(before, both exited 0 with no output); inside a trial it is the trial's error state with the user's frames.
And the paths of Ray's shipped copies of a user's file map back to the user's own path in what a trial records."""

from __future__ import annotations

import pytest

from tuner.cli import main
from tests.helpers.userworkloads import GOOD, HEADER, write

EXITS_AT_IMPORT = GOOD + "\nimport sys\nsys.exit(3)\n"

# Preflight runs two steps: the third call of the loss (inside the trial) leaves by sys.exit().
EXITS_IN_LOSS = HEADER + '''
import sys

CALLS = [0]


def user_loss(models, batch):
    CALLS[0] += 1
    if CALLS[0] > 2:
        sys.exit("bye from the loss")
    return F.cross_entropy(models["net"](batch[0]), batch[1])


def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data, loss=user_loss)
'''

CONFIG = """
workload: {ref}
budget: {{samples: 64}}
params: {{batch_size: 8, num_workers: 0, precision: fp32, device: cpu}}
measure: {{warmup_steps: 1, windows: 2}}
quality: {{enabled: false}}
"""

SPACE = """
description: a user workload that exits
defaults: {{workload: {ref}, budget: {{samples: 64}}, trials: 1}}
objectives:
  default: [{{metric: throughput, direction: max}}]
trial: {{quality: {{enabled: false}}}}
params:
  batch_size: {{type: categorical, choices: [8, 16]}}
  num_workers: 0
  precision: fp32
"""


def _one_line(captured) -> str:
    """The one line on stderr of what a command left (capsys.readouterr(), or the space_search fixture's run)."""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_sys_exit_at_import_is_one_line_and_exit_2_in_train(tmp_path, capsys):
    path = write(tmp_path, EXITS_AT_IMPORT, "exits.py")
    cfg = tmp_path / "run.yaml"
    cfg.write_text(CONFIG.format(ref=f"{path}:make"))
    rc = main(["train", "--config", str(cfg), "--reports-dir", str(tmp_path / "r")])
    line = _one_line(capsys.readouterr())
    assert rc == 2
    assert "calls sys.exit() at import" in line and str(path) in line


def test_sys_exit_at_import_is_one_line_and_exit_2_in_search(tmp_path, monkeypatch, space_search):
    import tuner.search._ray_env as ray_env

    def no_ray(*a, **k):
        raise AssertionError("Ray was started for a workload that cannot be imported")

    monkeypatch.setattr(ray_env, "start_local_ray", no_ray)
    path = write(tmp_path, EXITS_AT_IMPORT, "exits.py")
    searched = space_search.run(SPACE.format(ref=f"{path}:make"), reports=tmp_path / "r")
    rc, line = searched.code, _one_line(searched)
    assert rc == 2
    assert "calls sys.exit() at import" in line and str(path) in line
    assert not (tmp_path / "r").exists()


def test_sys_exit_in_the_loss_is_the_trials_error_state_with_the_users_frames(tmp_path):
    from tuner.config import parse_config
    from tuner.train import run_trial

    import yaml

    path = write(tmp_path, EXITS_IN_LOSS, "exitsinloss.py")
    cfg = parse_config(yaml.safe_load(CONFIG.format(ref=f"{path}:make")), "test")
    result = run_trial(cfg, cache_dir=tmp_path / "cache")
    assert result.state == "error"
    assert "SystemExit" in result.error and "bye from the loss" in result.error
    assert result.traceback is not None and f'File "{path}"' in result.traceback


def test_a_shipped_copys_path_maps_back_to_the_users_file(tmp_path, monkeypatch):
    from tuner.workload.frames import SHIPPED_ENV, user_path

    original = tmp_path / "home" / "mine.py"
    package = tmp_path / "proj" / "mypkg"
    monkeypatch.setenv(SHIPPED_ENV, f"{original}:{package}")
    shipped = "/tmp/ray/session_x/runtime_resources/py_modules_files/_ray_pkg_0123abcd"
    assert user_path(f"{shipped}/mine.py") == str(original)
    assert user_path(f"{shipped}/mypkg/sub/m.py") == str(package / "sub" / "m.py")
    assert user_path(f"{shipped}/other.py") == f"{shipped}/other.py"  # not something the driver shipped
    assert user_path("/home/me/x.py") == "/home/me/x.py"


# A factory / datasets() that never returns: blocked in one long sleep, or (in the trial only) looping in Python.
BLOCKS_IN_FACTORY = GOOD.replace("def make(hidden=8):", "def make(hidden=8):\n    import time; time.sleep(3600)")
BLOCKS_IN_DATASETS = GOOD.replace("datasets=data,", "datasets=lambda: __import__('time').sleep(3600),")
LOOPS_IN_TRIAL_FACTORY = GOOD.replace("def make(hidden=8):", """def make(hidden=8):
    import time
    while not tuner.trial_context().preflight:
        time.sleep(0.05)""")


@pytest.mark.parametrize("body, what", [(BLOCKS_IN_FACTORY, "the workload factory make()"),
                                        (BLOCKS_IN_DATASETS, "the workload's datasets()")])
def test_setup_that_blocks_is_one_line_and_exit_2_in_train(tmp_path, capsys, body, what):
    path = write(tmp_path, body, "blocks.py")
    cfg = tmp_path / "run.yaml"
    cfg.write_text(CONFIG.format(ref=f"{path}:make") + "setup_timeout_s: 1\n")
    rc = main(["train", "--config", str(cfg), "--reports-dir", str(tmp_path / "r")])
    line = _one_line(capsys.readouterr())
    assert rc == 2
    assert f"{what} did not return within 1 s (setup_timeout_s" in line and str(path) in line


def test_a_trials_factory_that_blocks_is_its_error_state_naming_the_factory(tmp_path):
    """In a search the trial runs in a thread of a Ray worker: the limit ends the factory there too."""
    import threading

    import yaml

    from tuner.config import parse_config
    from tuner.train import run_trial

    path = write(tmp_path, LOOPS_IN_TRIAL_FACTORY, "loops.py")
    cfg = parse_config(yaml.safe_load(CONFIG.format(ref=f"{path}:make") + "setup_timeout_s: 1\n"), "test")
    results = []
    thread = threading.Thread(target=lambda: results.append(run_trial(cfg, cache_dir=tmp_path / "cache")))
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the trial hung in its factory"
    (result,) = results
    assert result.state == "error"
    assert "SetupTimeout: the workload factory make() did not return within 1 s" in result.error
    assert str(path) in result.error


def test_a_long_setup_says_what_it_waits_for_on_stderr(capsys):
    import time

    from tuner.train.deadline import SetupTimeout, setup_deadline

    with pytest.raises(SetupTimeout, match=r"the workload's datasets\(\) did not return within 1 s"):
        with setup_deadline(1, "the workload's datasets()", note_after=0.2):
            time.sleep(3600)
    assert "tuner: still waiting for the workload's datasets() after 0.2 s" in capsys.readouterr().err


EXITS_HARD_AT_IMPORT = GOOD + "\nimport os\nos._exit(7)\n"


@pytest.mark.parametrize("command", ["train", "search"])
def test_os_exit_at_import_is_one_line_naming_the_module_and_exit_2(tmp_path, command):
    """Issue 37: os._exit() at import took tuner down with the module's status (7) and nothing on stderr. The
    pre-flight imports the module first where its end can be seen. A real process: in this one it would end pytest."""
    import subprocess
    import sys

    from tests.helpers.searchproc import REPO, tuner_env

    path = write(tmp_path, EXITS_HARD_AT_IMPORT, "vanishes.py")
    spec = tmp_path / "spec.yaml"
    spec.write_text((CONFIG if command == "train" else SPACE).format(ref=f"{path}:make"))
    flag = "--config" if command == "train" else "--space"
    proc = subprocess.run([sys.executable, "-m", "tuner", command, flag, str(spec), "--reports-dir",
                           str(tmp_path / "r")], cwd=REPO, env=tuner_env(), capture_output=True, text=True,
                          timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert str(path) in lines[0] and "ended the process with exit status 7" in lines[0]


def test_os_exit_0_at_import_is_one_line_too_not_a_silent_success(tmp_path):
    """os._exit(0) at import ended the pre-flight's child as a clean import would: tuner went on, imported the
    module itself and vanished with status 0 and nothing said. The child now says on a pipe that it outlived the
    import, so a quiet exit is caught like a loud one."""
    import subprocess
    import sys

    from tests.helpers.searchproc import REPO, tuner_env

    path = write(tmp_path, GOOD + "\nimport os\nos._exit(0)\n", "quits.py")
    spec = tmp_path / "spec.yaml"
    spec.write_text(CONFIG.format(ref=f"{path}:make"))
    proc = subprocess.run([sys.executable, "-m", "tuner", "train", "--config", str(spec), "--reports-dir",
                           str(tmp_path / "r")], cwd=REPO, env=tuner_env(), capture_output=True, text=True,
                          timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(lines) == 1 and str(path) in lines[0] and "ended the process with exit status 0" in lines[0], lines
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").rglob("*.json"))


# The import forks a process that holds what it inherited (the pre-flight's pipe too) for minutes, then ends its own.
LEAVES_A_CHILD_AT_IMPORT = GOOD + '''
import os
import time

if os.fork() == 0:
    with open(os.environ["TUNER_TEST_CHILD_PID"], "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
    os._exit(0)
os._exit(0)
'''


@pytest.mark.parametrize("check", ["probe_import", "import_changes"])
def test_an_import_that_leaves_a_forked_child_holding_the_pipe_is_judged_without_waiting_for_it(tmp_path,
                                                                                                monkeypatch, check):
    """Both pre-flight checks fork an import and read on a pipe what it said. A process the import forked holds the
    pipe's write end: a blocking read would wait for that process's end (here 10 minutes) before a word was said."""
    import os
    import signal
    import time

    from tuner.errors import WorkloadError
    from tuner.workload import import_changes, parse_ref, probe_import

    path = write(tmp_path, LEAVES_A_CHILD_AT_IMPORT, "lingers.py")
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("TUNER_TEST_CHILD_PID", str(pid_file))
    ref = parse_ref(f"{path}:make")
    t0 = time.monotonic()
    try:
        if check == "probe_import":
            with pytest.raises(WorkloadError, match="ended the process with exit status 0"):
                probe_import(ref)
        else:
            assert import_changes(ref) is True  # nothing said: not safe to import once for every trial
        assert time.monotonic() - t0 < 300  # judged long before the child's 600 s
    finally:
        for _ in range(100):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        if pid_file.exists() and pid_file.read_text():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
