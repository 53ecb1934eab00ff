"""tuner measures in the user's environment (issue 58): a passive OpenMP wait policy it used to set for every
command made trials 1.4-1.7x slower on a quiet CPU, flipped bf16's verdict and was what the export handed the user.
Now a command sets no variable that changes speed; a wait policy is a knob (omp_wait_policy), set before torch loads
only where a config chose it, and a policy the user set is kept as it was."""

import subprocess
import sys

import pytest

from tuner.cli import main
from tests.helpers.userworkloads import write

SHOWS_POLICY = '''
import os


def make():
    raise RuntimeError(f"policy={os.environ.get('OMP_WAIT_POLICY')} spin={os.environ.get('GOMP_SPINCOUNT')}")
'''


def run_train(tmp_path, capsys, params: str = "device: cpu", extra: str = "") -> str:
    path = write(tmp_path, SHOWS_POLICY, name="showpolicy.py")
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"workload: {path}:make\nbudget: {{samples: 64}}\nparams: {{{params}}}\n{extra}")
    assert main(["train", "--config", str(cfg), "--reports-dir", str(tmp_path / "r")]) == 2
    return capsys.readouterr().err


@pytest.fixture
def no_policy(monkeypatch):
    """None of the keys set, and each put back as it was afterwards: `tuner train` sets a config's env in this
    process's os.environ, which must not leak into later tests (a GOMP_SPINCOUNT left set reads as the user's)."""
    for key in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME"):
        monkeypatch.setenv(key, "placeholder")
        monkeypatch.delenv(key)


def test_the_workload_runs_in_the_users_environment_with_nothing_set(tmp_path, capsys, no_policy):
    assert "policy=None spin=None" in run_train(tmp_path, capsys)


@pytest.mark.parametrize("key,value", [("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "300000")])
def test_a_policy_the_user_set_is_kept(tmp_path, capsys, monkeypatch, no_policy, key, value):
    monkeypatch.setenv(key, value)
    err = run_train(tmp_path, capsys)
    assert f"{'policy' if key == 'OMP_WAIT_POLICY' else 'spin'}={value}" in err
    if key == "GOMP_SPINCOUNT":
        assert "policy=None" in err  # a spin count the user chose is their policy: none is added beside it


def test_a_config_whose_knob_chose_a_wait_policy_trains_under_it(tmp_path, capsys, no_policy):
    """The knob (what an export of a study that chose it carries) is set before torch loads."""
    assert "policy=PASSIVE" in run_train(tmp_path, capsys, params="device: cpu, omp_wait_policy: passive")


def test_the_cli_imports_no_torch_before_a_configs_environment_is_set():
    code = "import sys, tuner.cli; assert 'torch' not in sys.modules, 'torch imported with tuner.cli'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_a_configs_env_is_what_the_run_trains_under(tmp_path, capsys, monkeypatch, no_policy):
    """`tuner export` writes the environment its trial ran under as env:; `tuner train --config` sets it before
    torch loads, over a different value the shell had (with a note), so the run reads what the trial read."""
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    err = run_train(tmp_path, capsys, extra="env: {OMP_WAIT_POLICY: PASSIVE, GOMP_SPINCOUNT: 1000}\n")
    assert "policy=PASSIVE spin=1000" in err
    assert "OMP_WAIT_POLICY=PASSIVE from the config's env: (its trial ran under it), not ACTIVE" in err
