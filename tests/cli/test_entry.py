"""The `tuner` program as a process (`python -m tuner`): it ends without Python's module teardown
(tuner.cli.entry -> tuner.files.fast_exit), and still says everything it printed and exits with the command's code."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.searchproc import REPO, tuner_env


def _tuner(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=REPO, env=tuner_env(), capture_output=True,
                          text=True, timeout=120)


def test_a_command_that_succeeds_prints_all_of_its_output_into_a_pipe_and_exits_0():
    done = _tuner("spaces")
    assert done.returncode == 0, done.stderr
    assert "amp_loader" in done.stdout  # stdout is a pipe (block-buffered): flushed before the process ended


def test_bad_input_still_exits_2_with_its_one_line(tmp_path):
    done = _tuner("report", "no-such-study", "--reports-dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("tuner: error: ") and "no-such-study" in done.stderr
    assert "Traceback" not in done.stderr


def test_train_ends_after_its_result_though_the_workload_keeps_a_live_thread_pool(tmp_path):
    """A workload (or a library it uses, as torch.compile's inductor does) that keeps a ThreadPoolExecutor alive:
    `tuner train` printed its result and then waited on the pool's idle workers until it was killed (issue 57)."""
    import json

    from tests.helpers.userworkloads import HEADER, write

    work = write(tmp_path / "proj", HEADER + '''

import concurrent.futures

POOL = concurrent.futures.ThreadPoolExecutor(2)  # lives as long as the process, as a library's pool does


def make():
    POOL.submit(lambda: 1).result()
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data,
                          loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]))
''', "pooled.py")
    config = tmp_path / "run.yaml"
    config.write_text(f"workload: {work}:make\nbudget: {{samples: 32}}\nparams: {{batch_size: 8, num_workers: 0}}\n"
                      f"quality: {{enabled: false}}\nmeasure: {{warmup_steps: 1, windows: 2}}\n")
    done = _tuner("train", "--config", str(config), "--format", "json", "--reports-dir", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["state"] == "complete"
    assert "not waiting for thread" not in done.stderr  # the pool's workers ended when told to, not at the bound
