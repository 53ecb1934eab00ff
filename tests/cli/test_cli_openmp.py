"""On a machine other work shares, torch's OpenMP threads spinning at barriers made a step 8x slower (README,
"Shared machines"): tuner's commands start with a passive wait policy unless the user chose one, and set it
before torch is imported (libgomp reads it once, when torch loads)."""

import subprocess
import sys

import pytest

from tuner.cli import main
from tuner.cli.app import quiet_openmp
from tests.helpers.userworkloads import write

SHOWS_POLICY = '''
import os


def make():
    raise RuntimeError(f"policy={os.environ.get('OMP_WAIT_POLICY')} spin={os.environ.get('GOMP_SPINCOUNT')}")
'''


def run_train(tmp_path, capsys) -> str:
    path = write(tmp_path, SHOWS_POLICY, name="showpolicy.py")
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"workload: {path}:make\nbudget: {{samples: 64}}\nparams: {{device: cpu}}\n")
    assert main(["train", "--config", str(cfg), "--reports-dir", str(tmp_path / "r")]) == 2
    return capsys.readouterr().err


@pytest.fixture
def no_policy(monkeypatch):
    for key in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME"):
        monkeypatch.delenv(key, raising=False)


def test_the_workload_runs_under_a_passive_wait_policy(tmp_path, capsys, no_policy):
    assert "policy=PASSIVE spin=None" in run_train(tmp_path, capsys)


@pytest.mark.parametrize("key,value", [("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "300000")])
def test_a_policy_the_user_set_is_kept(tmp_path, capsys, monkeypatch, no_policy, key, value):
    monkeypatch.setenv(key, value)
    err = run_train(tmp_path, capsys)
    assert f"{'policy' if key == 'OMP_WAIT_POLICY' else 'spin'}={value}" in err
    if key == "GOMP_SPINCOUNT":
        assert "policy=None" in err  # a spin count the user chose is their policy: none is added beside it


def test_quiet_openmp_fills_only_an_empty_environment():
    env: dict[str, str] = {}
    quiet_openmp(env)
    assert env == {"OMP_WAIT_POLICY": "PASSIVE"}
    kept = {"KMP_BLOCKTIME": "1"}
    quiet_openmp(kept)
    assert kept == {"KMP_BLOCKTIME": "1"}


def test_the_cli_imports_no_torch_before_it_sets_the_policy():
    code = "import sys, tuner.cli; assert 'torch' not in sys.modules, 'torch imported with tuner.cli'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def restored_env(monkeypatch):
    """The keys a config's env sets in this process, put back as they were afterwards."""
    for key in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME"):
        monkeypatch.setenv(key, "placeholder")
        monkeypatch.delenv(key)


def test_a_configs_env_is_what_the_run_trains_under(tmp_path, capsys, monkeypatch, restored_env):
    """`tuner export` writes the environment its trial ran under as env:; `tuner train --config` sets it before
    torch loads, over a different value the shell had (with a note), so the run reads what the trial read."""
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    path = write(tmp_path, SHOWS_POLICY, name="showpolicy.py")
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"workload: {path}:make\nbudget: {{samples: 64}}\nparams: {{device: cpu}}\n"
                   f"env: {{OMP_WAIT_POLICY: PASSIVE, GOMP_SPINCOUNT: 1000}}\n")
    assert main(["train", "--config", str(cfg), "--reports-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "policy=PASSIVE spin=1000" in err
    assert "OMP_WAIT_POLICY=PASSIVE from the config's env: (its trial ran under it), not ACTIVE" in err
