"""Efficiency and goodput derived from the baseline's noise scale as a study's records are read (and trials.csv)."""

from __future__ import annotations

import csv

import pytest

from tuner.study import StudyFolder
from tuner.analysis import read_records
from tests.helpers.records import write_csv
from tests.helpers.studies import goodput_study


def test_each_trial_is_judged_against_the_baseline_noise_scale_and_effective_batch(tmp_path):
    records = {r.trial: r for r in read_records(StudyFolder(goodput_study(tmp_path)))}
    # trial 0: the baseline itself (batch 64); 1: batch 256, 2600 samples/s; 2: batch 32, 900 samples/s; phi = 900
    assert records[0].metrics["efficiency"] == pytest.approx(1.0)
    assert records[0].metrics["goodput"] == pytest.approx(1500.0)
    assert records[1].metrics["efficiency"] == pytest.approx(964 / 1156)
    assert records[1].metrics["goodput"] == pytest.approx(2600 * 964 / 1156)
    assert records[2].metrics["efficiency"] == pytest.approx(964 / 932)
    assert all(r.metrics["baseline_noise_scale"] == 900.0 for r in records.values())


def test_a_confirmed_trial_s_goodput_is_made_of_its_confirmed_throughput(tmp_path):
    """Trial 1 read 2600 samples/s in the search and 2000 in its re-runs: the table shows 2000, and its goodput
    said 2600 x efficiency beside it (issue 52)."""
    from tests.helpers.records import write_rerun
    from tuner.study import Rerun

    folder = StudyFolder(goodput_study(tmp_path))
    for k, thr in enumerate((1990.0, 2010.0)):
        write_rerun(folder, 1, Rerun(repeat=k, state="complete", metrics={"throughput": thr}))
    records = {r.trial: r for r in read_records(folder)}
    centre = records[1].confirmed.figures["throughput"].centre
    assert centre == pytest.approx(2000.0, rel=1e-3)
    assert records[1].metrics["goodput"] == pytest.approx(centre * 964 / 1156)
    assert records[2].metrics["goodput"] == pytest.approx(900 * 964 / 932)  # never re-run: its one reading


def test_without_the_baselines_noise_scale_there_is_no_efficiency_nor_goodput(tmp_path):
    records = read_records(StudyFolder(goodput_study(tmp_path, noise_scale=None)))
    assert not any(k in r.metrics for r in records for k in ("efficiency", "goodput", "baseline_noise_scale"))


def test_trials_csv_carries_goodput_and_efficiency_row_by_row_and_rebuilt(tmp_path):
    study_dir = goodput_study(tmp_path)  # written row by row, as a search does
    rows = {r["trial"]: r for r in csv.DictReader((study_dir / "trials.csv").open())}
    assert float(rows["1"]["goodput"]) == pytest.approx(2600 * 964 / 1156)
    assert float(rows["1"]["efficiency"]) == pytest.approx(964 / 1156)
    write_csv(StudyFolder(study_dir))
    rebuilt = {r["trial"]: r for r in csv.DictReader((study_dir / "trials.csv").open())}
    assert rebuilt["2"]["goodput"] == rows["2"]["goodput"] != ""


def test_the_lr_rule_a_trial_followed_is_named_against_the_baseline(tmp_path):
    from tuner.analysis import baseline_record, lr_advice

    folder = StudyFolder(goodput_study(tmp_path))
    records = {r.trial: r for r in read_records(folder)}
    base = baseline_record(folder.read_meta().baseline, list(records.values()))
    assert lr_advice(records[0], base) is None  # the baseline's own batch: no rule to state
    linear = lr_advice(records[1], base)
    assert linear is not None and linear.rule == "linear"
    assert linear.rules() == pytest.approx({"linear": 4e-3, "sqrt": 2e-3, "adascale": 1e-3 * 964 / 1156 * 4})
    kept = lr_advice(records[2], base)  # batch 32 at the baseline's lr
    assert kept is not None and kept.rule == "kept" and "no rule applied" in kept.text()
    records[2].optimizer = {"train": {"optimizer": "Adam", "lr": 1e-3 * 964 / 932 / 2}}  # AdaScale's gain for 32
    assert lr_advice(records[2], base).rule == "adascale"
    records[2].optimizer = {"train": {"optimizer": "Adam", "lr": 3e-4}}
    assert lr_advice(records[2], base).rule == "searched"


def test_goodput_is_made_of_the_throughput_the_table_shows_across_rounds_that_drifted(tmp_path):
    """The machine read 2x faster in the second confirmation round: trial 3, re-run only there, read 201 samples/s,
    1.0x the baseline read beside it. The table shows it as 100 (in the baseline's first round's units) and its
    goodput was 201 x efficiency beside it: twice the useful samples/s of a config no faster than the baseline."""
    from tests.helpers.records import write_record, write_rerun
    from tuner.analysis import Study
    from tuner.report.view import adjusted_metrics, figure_text, goodput_text
    from tuner.study import Objective, Rerun, StudyMeta, TrialRecord

    folder = StudyFolder(tmp_path / "drift")
    folder.write_meta(StudyMeta(name="drift", objectives=[Objective(metric="throughput", direction="maximize")],
                                baseline={"trial": 0}))
    reruns = {0: [(99.0, 0), (101.0, 0), (200.0, 1), (202.0, 1)], 2: [(150.0, 0), (152.0, 0)],
              3: [(200.0, 1), (202.0, 1)]}
    for n, (thr, batch) in {0: (100.0, 64), 2: (150.0, 64), 3: (200.0, 256), 4: (300.0, 128)}.items():
        metrics = {"throughput": thr, "effective_batch": batch, **({"noise_scale": 900.0} if n == 0 else {})}
        write_record(folder, TrialRecord(trial=n, state="complete", metrics=metrics))
    for n, runs in reruns.items():
        for k, (thr, round_) in enumerate(runs):
            write_rerun(folder, n, Rerun(repeat=k, round=round_, state="complete", metrics={"throughput": thr}))
    study = Study.load(folder)
    assert study.drift_adjusted("throughput")
    for r in study.records:
        assert r.metrics["goodput"] / r.metrics["efficiency"] == pytest.approx(study.value(r, "throughput"))
    trial3 = study.trial(3)
    assert study.value(trial3, "throughput") == pytest.approx(100.0, rel=1e-2)
    assert trial3.metrics["goodput"] == pytest.approx(100.0 * 964 / 1156, rel=1e-2)  # 201 x efficiency before
    shown = figure_text(study, trial3, "throughput", adjusted_metrics(study))
    assert shown.startswith("100.0 (1.00x the baseline; read 201") and "throughput 100.0 x efficiency" in \
        goodput_text(trial3)
