"""The Optuna study tuner creates names its objectives, so optuna-dashboard labels its axes throughput and fid
instead of 0 and 1 (docs/how-to/dashboard.md)."""

from __future__ import annotations

from tuner.search._storage import default_storage, open_optuna_study, open_storage


def test_the_optuna_study_names_its_objectives(tmp_path):
    storage = open_storage(default_storage(tmp_path))
    study = open_optuna_study(storage, "s", "0" * 32, ["maximize", "minimize"], ["throughput", "fid"])
    assert study.metric_names == ["throughput", "fid"]
    again = open_optuna_study(open_storage(default_storage(tmp_path)), "s", "0" * 32, ["maximize", "minimize"])
    assert again.metric_names == ["throughput", "fid"]  # kept in the database: a resume without names keeps them
