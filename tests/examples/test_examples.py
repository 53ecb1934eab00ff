"""The shipped examples, as a user runs them: `tuner train` on their config, a 3-trial `tuner search` with
`--workload path:make`, the report, the export, and the exported config run again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tuner.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = ["vae", "classifier"]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_trains_from_its_config(name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)  # the configs name their workload relative to the repository root, as the README runs them
    code, out, err = run(capsys, "train", "--config", f"examples/{name}.yaml", "--budget-samples", "1500",
                         "--reports-dir", tmp_path, "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["state"] == "complete" and result["throughput"] > 0 and result["val_loss"] > 0


@pytest.mark.ray
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_searches_reports_exports_and_reruns(name, ray_session, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    reports = tmp_path / "reports"
    code, out, err = run(capsys, "search", "--space", "amp_loader", "--workload", f"examples/{name}.py:make",
                         "--study", name, "--trials", "3", "--budget-samples", "1500", "--reports-dir", reports,
                         "--confirm", "0", "--format", "json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["finished"] == 3 and summary["states"] == {"complete": 3}, summary
    assert [o["metric"] for o in summary["objectives"]] == ["throughput", "val_loss"]
    assert summary["objectives"][1]["direction"] == "minimize"  # from the workload's quality=("val_loss", "min")

    code, out, err = run(capsys, "report", name, "--reports-dir", reports, "--format", "json")
    assert code == 0, err
    trials = json.loads(out)["trials"]
    assert len(trials) == 3 and all(t["val_loss"] > 0 for t in trials)
    assert all(t["config"]["workload"] == f"{REPO / 'examples' / name}.py:make" for t in trials)

    code, out, err = run(capsys, "export", name, "--reports-dir", reports)
    assert code == 0, err
    best = reports / name / "best.yaml"
    assert yaml.safe_load(best.read_text())["workload"].endswith(f"examples/{name}.py:make")
    monkeypatch.chdir(tmp_path)  # the exported config carries an absolute path: it runs from anywhere
    code, out, err = run(capsys, "train", "--config", best, "--budget-samples", "800", "--reports-dir", reports,
                         "--format", "json")
    assert code == 0, err
    assert json.loads(out)["state"] == "complete"
