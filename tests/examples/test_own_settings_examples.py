"""The examples that bring their own optimizer settings (issue 18): the nanoGPT-style character LM (AdamW groups
from the model, lr 1e-3, betas 0.9/0.99, tokens), torchvision's resnet18 (its own SGD) and the VAE (Adam 1e-3).
Each trains from its config with exactly those settings, and a study searches lr relative to the workload's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tuner.cli import main

REPO = Path(__file__).resolve().parents[2]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def tiny(tmp_path, name, **changes):
    """The example's own config with a tiny budget and no ceilings."""
    cfg = yaml.safe_load((REPO / "examples" / f"{name}.yaml").read_text())
    cfg["workload"] = str(REPO / "examples" / cfg["workload"])  # read from the example's folder
    cfg["params"].update(changes.pop("params", {}))
    cfg.update(budget={"samples": 64}, measure={"warmup_steps": 1, "windows": 2, "ceiling_seconds": 0}, **changes)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_charlm_trains_with_its_own_adamw_groups_and_reports_tokens(tmp_path, capsys):
    code, out, err = run(capsys, "train", "--config", tiny(tmp_path, "charlm", params={"batch_size": 16}),
                         "--reports-dir", tmp_path / "r", "--format", "json")
    assert code == 0, err
    result = json.loads(out)  # one document, though the model prints its size on construction
    assert "number of parameters" in err
    assert result["state"] == "complete" and result["val_loss"] > 0
    assert result["optimizer"] == {"train": {"optimizer": "AdamW", "lr": 1e-3, "betas": [0.9, 0.99],
                                             "weight_decay": 0.1, "grad_clip": 1.0}}
    assert result["sample_unit"] == "tokens"
    assert result["unit_throughput"] == pytest.approx(32 * result["throughput"])  # a sample is 32 tokens


def test_resnet18_trains_with_its_own_sgd(tmp_path, capsys):
    pytest.importorskip("torchvision")
    code, out, err = run(capsys, "train", "--config",
                         tiny(tmp_path, "resnet", params={"batch_size": 16}, workload_options={"image_size": 16}),
                         "--reports-dir", tmp_path / "r", "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["state"] == "complete" and "accuracy" in result
    assert result["optimizer"]["train"] == {"optimizer": "SGD", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4}
    assert result["sample_unit"] == "pixels" and result["unit_throughput"] == pytest.approx(256 * result["throughput"])


def test_vae_trains_with_its_own_lr(tmp_path, capsys):
    code, out, err = run(capsys, "train", "--config", tiny(tmp_path, "vae"), "--reports-dir", tmp_path / "r",
                         "--format", "json")
    assert code == 0, err
    assert json.loads(out)["optimizer"]["train"] == {"optimizer": "Adam", "lr": 1e-3, "betas": [0.9, 0.999]}


@pytest.mark.ray
def test_a_study_searches_lr_relative_to_the_workloads_own(ray_session, tmp_path, capsys, monkeypatch):
    """The optimizer space searches lr_scale: the baseline is the charlm's own lr (x1), every other trial trains at
    its lr_scale times 1e-3, and the record says so."""
    monkeypatch.chdir(REPO)
    reports = tmp_path / "reports"
    code, out, err = run(capsys, "search", "--space", "optimizer", "--workload", "examples/charlm.py:make",
                         "--study", "lm", "--trials", "3", "--budget-samples", "96", "--reports-dir", reports,
                         "--confirm", "0", "--format", "json")
    assert code == 0, err
    json.loads(out)
    code, out, err = run(capsys, "report", "lm", "--reports-dir", reports, "--format", "json")
    trials = {t["trial"]: t for t in json.loads(out)["trials"]}
    assert trials[0]["params"]["lr_scale"] == 1.0 and trials[0]["params"]["beta1"] == 0.9
    assert trials[0]["optimizer"]["train"]["lr"] == pytest.approx(1e-3)
    assert trials[0]["optimizer"]["train"]["betas"] == [0.9, 0.99]
    for t in trials.values():
        if t["state"] == "complete":
            assert t["optimizer"]["train"]["lr"] == pytest.approx(1e-3 * t["params"]["lr_scale"])


@pytest.mark.ray
def test_the_default_study_of_an_sgd_workload_searches_everything_but_the_betas(ray_session, tmp_path, capsys,
                                                                                 monkeypatch):
    """resnet18 trains with SGD, which takes no betas: the default space (amp_loader, which searches Adam's) leaves
    beta1 and beta2 out, says so as the study starts, trains every trial with SGD, and exports no betas; the same
    command with --resume continues it. --no-probe: the speed probes decide no beta (with them it took 113 s in the
    suite; 75 s without, beside one other test)."""
    pytest.importorskip("torchvision")
    monkeypatch.chdir(REPO)
    reports = tmp_path / "r"
    argv = ["search", "--space", "amp_loader", "--workload", "examples/resnet.py:make", "--option", "image_size=16",
            "--study", "sgd", "--budget-samples", "64", "--confirm", "0", "--parity-seconds", "0", "--no-probe",
            "--reports-dir", reports]
    code, out, err = run(capsys, *argv, "--trials", "2")
    assert code == 0, err
    said = " ".join(err.split())  # the progress console (stderr) wraps its lines
    assert f"beta1, beta2 not searched: workload {REPO}/examples/resnet.py:make's optimizer takes no betas" in said
    meta = json.loads((reports / "sgd" / "study.json").read_text())
    assert "beta1" not in meta["space_def"]["params"] and "batch_size" in meta["space_def"]["params"]
    code, out, err = run(capsys, "report", "sgd", "--reports-dir", reports, "--format", "json")
    trials = json.loads(out)["trials"]
    assert len(trials) == 2 and all(t["optimizer"]["train"]["optimizer"] == "SGD" for t in trials)
    assert not any("beta1" in t["params"] or "betas" in t["optimizer"]["train"] for t in trials)
    code, out, err = run(capsys, *argv, "--trials", "3", "--resume")  # the same command, the space re-read
    assert code == 0, err
    code, out, err = run(capsys, "report", "sgd", "--reports-dir", reports, "--format", "json")
    assert len(json.loads(out)["trials"]) == 3


def test_a_space_file_of_ones_own_that_searches_betas_is_refused_for_an_sgd_workload(tmp_path, capsys,
                                                                                     monkeypatch):
    """A space the user wrote that names beta1 and beta2 disagrees with their SGD workload: one line, exit 2,
    before Ray starts, pointing at a space without them, and no study folder."""
    pytest.importorskip("torchvision")
    monkeypatch.chdir(REPO)
    mine = tmp_path / "mine.yaml"
    mine.write_text((REPO / "search_spaces" / "amp_loader.yaml").read_text())
    code, out, err = run(capsys, "search", "--space", mine, "--workload", "examples/resnet.py:make",
                         "--option", "image_size=16", "--study", "sgd", "--trials", "2", "--budget-samples", "64",
                         "--reports-dir", tmp_path / "r", "--format", "json")
    assert code == 2 and out == ""
    assert "beta1, beta2" in err and "--space loader" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "sgd").exists()
