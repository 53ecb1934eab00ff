"""`tuner search --scheduler asha`: trials report at their rungs, a dominated one is stopped there and recorded
`stopped` with the rung it reached and what it measured, and Optuna gets it as PRUNED, never FAIL."""

from __future__ import annotations

import json

import optuna
import pytest

from tests.helpers.studies import load_trials, read_meta
from tuner.cli import main
from tests.helpers.userworkloads import write
from tuner.analysis import read_records

# Batch 32 is planted slow (a sleep in its loss) and bad (its val_loss 5 against 0.5): every batch-16 trial
# dominates it at every rung, so the first batch-32 trial that meets two batch-16 trials at a rung is stopped.
PLANTED = '''
import time

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import TensorDataset

import tuner

EVAL_SLEEP = {sleep}


def data(n=192):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    y = (x.sum(1) > 0).long()
    return TensorDataset(x[: n - 32], y[: n - 32]), TensorDataset(x[n - 32:], y[n - 32:])


def loss(models, batch):
    if batch[0].shape[0] == 32:
        time.sleep({step_sleep})
    return F.cross_entropy(models["net"](batch[0]), batch[1])


def evaluate(models, val_batches):
    for _ in val_batches:
        pass
    ctx = tuner.trial_context()
    if not ctx.preflight:
        time.sleep(EVAL_SLEEP)
    return {{"val_loss": 5.0 if ctx.params.batch_size == 32 else 0.5}}


def make():
    # BatchNorm: the split of the effective batch changes what is learned (so the sampler searches it, and a
    # quality that differs with batch_size is what such a model can show)
    return tuner.Workload(models={{"net": lambda: nn.Sequential(nn.BatchNorm1d(4), nn.Linear(4, 2))}}, datasets=data,
                          loss=loss, evaluate=evaluate,
                          quality=("val_loss", "min"))
'''

SPACE = """
description: batch size only, a planted bad half
defaults: {{workload: {workload}, budget: {{samples: 480}}, trials: {trials}, baseline: false}}
objectives: {objectives}
params:
  batch_size: {{type: categorical, choices: [16, 32]}}
  precision: fp32
  num_workers: 0
trial: {{measure: {{warmup_steps: 1, warmup_max_steps: 2, windows: 6, ceiling_seconds: 0}}}}
"""


BOTH = "[{metric: throughput, direction: max}, {metric: quality}]"


def planted_space(tmp_path, trials: int, sleep: float = 0.0, step_sleep: float = 0.03, objectives: str = BOTH):
    work = write(tmp_path / "proj", PLANTED.format(sleep=sleep, step_sleep=step_sleep), name="planted.py")
    space = tmp_path / "planted.yaml"
    space.write_text(SPACE.format(workload=f"{work}:make", trials=trials, objectives=objectives))
    return space


@pytest.mark.ray
def test_asha_stops_a_dominated_trial_and_records_it_stopped_with_its_rung(ray_session, tmp_path, capsys):
    # Ranked on quality alone, so who stops depends on the draws, never on a timing: with two objectives, trials
    # of one batch size tie on quality and rank by their throughput, which a loaded machine reorders (CI drew six
    # batch-32 trials first and, each faster than the last, none was stopped). Seed 0 draws 32, 16, 32, 32, ...:
    # a batch-32 trial that meets batch-16 ones at a rung is below its top third.
    space = planted_space(tmp_path, trials=8, objectives="[{metric: quality}]")
    reports = tmp_path / "reports"
    code = main(["search", "--space", str(space), "--study", "asha", "--scheduler", "asha", "--sampler", "random",
                 "--seed", "0", "--confirm", "0", "--concurrency", "1", "--reports-dir", str(reports)])
    out, err = capsys.readouterr()
    assert code == 0, err
    study_dir = reports / "asha"
    meta = read_meta(study_dir)
    assert meta["scheduler"]["name"] == "asha" and meta["scheduler"]["eta"] == 3
    rungs = meta["scheduler"]["rungs"]
    assert rungs[-1] == 480 and len(rungs) == 3  # 480 / 9, 480 / 3, 480
    records = {r["trial"]: r for r in load_trials(study_dir)}
    assert len(records) == 8
    stopped = [r for r in records.values() if r["state"] == "stopped"]
    assert stopped, {n: (r["state"], r["params"]) for n, r in records.items()}
    for r in stopped:
        assert r["params"]["batch_size"] == 32  # only the dominated half is ever stopped
        assert r["rung"] in (0, 1) and rungs[r["rung"]] <= r["measured_at"] < 480
        assert r["throughput"] > 0 and r["val_loss"] == 5.0 and r["windows"]  # what it measured is kept
        assert r["samples"] < 480 and r["error"] is None
        entries = json.loads((study_dir / "trials" / f"{r['trial']:04d}" / "rungs.json").read_text())
        assert entries[-1]["rung"] == r["rung"] and entries[-1]["went_on"] is False
    for r in records.values():
        if r["state"] == "complete":
            assert r["rung"] == 2 and r["measured_at"] >= 480  # finished: compared at the top rung
    trials = optuna.load_study(study_name="asha", storage=f"sqlite:///{study_dir / 'study.db'}").trials
    states = {t.number: t.state.name for t in trials}
    assert {states[r["trial"]] for r in stopped} == {"PRUNED"}  # never FAIL, never early values as COMPLETE
    # FAIL only for a draw that repeated a trial's config and was drawn anew (a 2-config space, 8 trials)
    assert all("repeat_of" in t.user_attrs for t in trials if t.state.name == "FAIL")
    assert all(t.user_attrs["record"]["state"] == "stopped" for t in trials if t.state.name == "PRUNED")
    rows = (study_dir / "trials.csv").read_text().splitlines()
    assert sum(",stopped," in row for row in rows) == len(stopped)


@pytest.mark.ray
def test_fifo_is_the_default_and_records_no_rung(ray_session, tmp_path, capsys):
    space = planted_space(tmp_path, trials=2)
    reports = tmp_path / "reports"
    code = main(["search", "--space", str(space), "--study", "fifo", "--confirm", "0", "--reports-dir",
                 str(reports)])
    assert code == 0, capsys.readouterr().err
    meta = read_meta(reports / "fifo")
    assert meta["scheduler"]["name"] == "fifo"
    records = load_trials(reports / "fifo")
    assert len(records) == 2 and all(r["state"] == "complete" and r["rung"] is None for r in records)
    assert not list((reports / "fifo").glob("trials/*/rungs.json"))


@pytest.mark.parametrize("args, needle", [
    (["--scheduler", "sha"], "unknown scheduler 'sha'; use one of fifo, asha"),
    (["--scheduler", "race"], "--scheduler race races trials to a target: give --target VALUE"),
    (["--eta", "2"], "--min-budget and --eta set the rungs of --scheduler asha"),
    (["--scheduler", "asha", "--eta", "1"], "--eta must be > 1"),
    (["--scheduler", "asha", "--min-budget", "480"], "--min-budget must be > 0 and below the trial budget (480 "
                                                     "samples"),
])
def test_bad_scheduler_settings_are_one_line_and_nothing_is_written(tmp_path, capsys, args, needle):
    space = planted_space(tmp_path, trials=2)
    reports = tmp_path / "reports"
    code = main(["search", "--space", str(space), "--reports-dir", str(reports), *args])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not reports.exists() or not any(reports.iterdir())


# --- the Optuna state of a stopped trial, told by the searcher (no Ray run) ------------------------------------


def stopped_searcher(tmp_path):
    from tests.helpers.searchers import tiny_searcher
    from tuner.search._protocol import TrialOrder

    searcher, folder, objectives = tiny_searcher(tmp_path / "s", rungs=[53.3, 160.0, 480.0])
    order = TrialOrder.from_config(searcher.suggest("t1"))
    assert order.limits.rungs == (53.3, 160.0, 480.0)  # the rungs are given to the trial
    return searcher, folder, objectives, order.trial


def rung_report(number, objectives):
    from tuner.search._protocol import to_tune
    from tuner.search._trial import rung_report as make_report
    from tuner.study import TrialRecord

    record = TrialRecord(trial=number, state="stopped", rung=0, measured_at=64.0, windows=[90.0, 110.0],
                         params={"batch_size": 16}, metrics={"throughput": 100.0, "loss": 2.5})
    return to_tune(make_report(record, objectives))


@pytest.mark.parametrize("tell, state, values", [("pruned", "PRUNED", None), ("complete", "COMPLETE", [100.0, 2.5])])
def test_a_stopped_trial_reaches_optuna_pruned_or_with_its_rung_values_never_fail(tmp_path, monkeypatch, tell,
                                                                                   state, values):
    from tuner.search import _searcher as searcher_module

    monkeypatch.setattr(searcher_module, "_STOPPED_TELL", tell)
    searcher, folder, objectives, number = stopped_searcher(tmp_path)
    searcher.on_trial_complete("t1", result=rung_report(number, objectives))  # Ray: the scheduler stopped it
    trial = searcher.study.trials[number]
    assert trial.state.name == state and trial.values == values
    assert trial.user_attrs["record"]["state"] == "stopped" and trial.user_attrs["record"]["rung"] == 0
    assert trial.constraints["failed"] <= 0  # feasible: a stop is not a failure
    record = read_records(folder)[0]  # the same call wrote the study folder
    assert record.state == "stopped" and record.rung == 0 and record.measured_at == 64.0 and record.throughput == 100
    assert "stopped" in folder.csv_path.read_text()


def test_a_stopped_trial_whose_result_file_a_kill_lost_is_restored_from_optuna(tmp_path):
    from tuner.search._storage import reconcile_study

    searcher, folder, objectives, number = stopped_searcher(tmp_path)
    searcher.on_trial_complete("t1", result=rung_report(number, objectives))
    (folder.trial_dir(number) / "result.json").unlink()
    reconcile_study(folder, searcher._storage, "s")
    assert [(r.trial, r.state, r.rung) for r in read_records(folder)] == [(number, "stopped", 0)]


# --- kill -9 mid-rung, then --resume (real `python -m tuner` processes) -------------------------------------------


def test_a_kill_mid_rung_resumes_with_the_trial_and_the_rung_records_consistent(tmp_path):
    """A trial that closed a rung and was still training at the kill comes back as Optuna FAIL with no record and
    no rung entries (a new trial runs in its place); the rung entries of every recorded trial are kept as they
    were, and the resumed scheduler goes on from them."""
    import time

    from tests.helpers.searchproc import finish, search, sigkill

    space = planted_space(tmp_path, trials=6, sleep=1.0)  # 1 s per rung evaluation: time to land the kill
    reports = tmp_path / "reports"
    study_dir = reports / "asha"
    first = search(["--space", str(space), "--study", "asha", "--scheduler", "asha", "--sampler", "random",
                    "--seed", "3", "--confirm", "0", "--concurrency", "1"], reports)
    try:
        deadline = time.monotonic() + 300
        while True:
            mid = [p.parent for p in study_dir.glob("trials/*/rungs.json") if not (p.parent / "result.json").is_file()]
            if mid and list(study_dir.glob("trials/*/result.json")):
                break
            assert first.poll() is None, f"search ended before it could be killed: {first.communicate()}"
            assert time.monotonic() < deadline, "no trial between two rungs within 300 s"
            time.sleep(0.02)
        sigkill(first)
    except BaseException:
        sigkill(first)
        raise
    killed = int(mid[0].name)
    if (mid[0] / "result.json").is_file():
        pytest.skip("the trial finished before the kill landed")
    kept = {p: p.read_text() for p in study_dir.glob("trials/*/rungs.json") if (p.parent / "result.json").is_file()}

    second = search(["--study", "asha", "--resume"], reports)
    out, err = finish(second, timeout=400)
    assert second.returncode == 0, err
    records = {r["trial"]: r for r in load_trials(study_dir)}
    assert len(records) == 6 and killed not in records
    assert not (study_dir / "trials" / f"{killed:04d}" / "rungs.json").exists()  # its entries went with it
    for path, text in kept.items():
        assert path.read_text() == text
    for path in study_dir.glob("trials/*/rungs.json"):
        assert (path.parent / "result.json").is_file()
    trials = optuna.load_study(study_name="asha", storage=f"sqlite:///{study_dir / 'study.db'}").trials
    states = {t.number: t.state.name for t in trials}
    assert states[killed] == "FAIL"
    assert sorted(n for n, s in states.items() if s in ("COMPLETE", "PRUNED")) == sorted(records)
    for n, r in records.items():
        assert states[n] == ("PRUNED" if r["state"] == "stopped" else "COMPLETE")
        entries = json.loads((study_dir / "trials" / f"{n:04d}" / "rungs.json").read_text())
        assert entries[-1]["went_on"] is (r["state"] != "stopped")


# --- --concurrency 2: two trials at once, rung decisions as they come, then --resume ------------------------------


def consistent(study_dir, rungs):
    """Every view of every trial agrees: its record, its rungs.json, its trials.csv row and its Optuna state.
    Returns the records by number."""
    import csv

    records = {r["trial"]: r for r in load_trials(study_dir)}
    rows = {int(row["trial"]): row for row in csv.DictReader((study_dir / "trials.csv").open())}
    assert sorted(rows) == sorted(records)
    trials = optuna.load_study(study_name="asha", storage=f"sqlite:///{study_dir / 'study.db'}").trials
    states = {t.number: t.state.name for t in trials}
    assert sorted(n for n, s in states.items() if s != "FAIL") == sorted(records) and "RUNNING" not in states.values()
    for n, r in records.items():
        assert r["state"] in ("complete", "stopped"), (n, r["state"], r["error"])
        assert rows[n]["state"] == r["state"]
        assert states[n] == ("PRUNED" if r["state"] == "stopped" else "COMPLETE")
        entries = json.loads((study_dir / "trials" / f"{n:04d}" / "rungs.json").read_text())
        assert [e["rung"] for e in entries] == list(range(len(entries)))  # one decision per rung reached, in order
        assert all(e["went_on"] for e in entries[:-1])
        if r["state"] == "stopped":
            assert entries[-1] == {**entries[-1], "rung": r["rung"], "went_on": False} and r["rung"] < len(rungs) - 1
            assert r["throughput"] > 0 and r["error"] is None  # what it measured is kept
        else:
            assert r["rung"] == len(rungs) - 1 and entries[-1]["went_on"] and r["measured_at"] >= rungs[-1]
    return records


def batch16_at_rung0(study_dir) -> int:
    return sum(1 for p in study_dir.glob("trials/*/rungs.json")
               for e in json.loads(p.read_text()) if e["rung"] == 0 and e["values"][1] == 0.5)


@pytest.mark.ray
def test_asha_with_two_trials_at_once_records_consistently_and_resumes(ray_session, tmp_path, capsys):
    """Two trials train at once and each rung decision is made as its report arrives (a trial alone at a rung
    goes on: nothing waits for the rung to fill). Stopped and complete trials agree in every view, and --resume
    rebuilds the scheduler from the rung records: a batch-32 trial that meets the batch-16 ones recorded before
    the resume is stopped at rung 0 (planted: batch 32 sleeps 0.2 s a step, so even two trials sharing the CPUs
    leave every batch-16 trial faster as well as better)."""
    space = planted_space(tmp_path, trials=6, step_sleep=0.2)
    reports = tmp_path / "reports"
    study_dir = reports / "asha"
    code = main(["search", "--space", str(space), "--study", "asha", "--scheduler", "asha", "--sampler", "random",
                 "--seed", "6", "--confirm", "0", "--concurrency", "2", "--reports-dir", str(reports)])
    assert code == 0, capsys.readouterr().err
    meta = read_meta(study_dir)
    assert meta["resources"]["concurrency"] == 2
    rungs = meta["scheduler"]["rungs"]
    first = consistent(study_dir, rungs)
    assert len(first) == 6
    kept = {p: p.read_text() for p in study_dir.glob("trials/*/rungs.json")}
    assert batch16_at_rung0(study_dir) >= 2  # seed 6 samples batch 16 for trials 0, 1 and 3

    code = main(["search", "--study", "asha", "--resume", "--trials", "9", "--concurrency", "2", "--reports-dir",
                 str(reports)])
    assert code == 0, capsys.readouterr().err
    records = consistent(study_dir, rungs)
    assert len(records) == 9 and all(records[n] == first[n] for n in first)
    for path, text in kept.items():
        assert path.read_text() == text  # the first run's rung records are kept as they were
    for n in set(records) - set(first):  # the resumed scheduler holds them: every new batch-32 trial is beaten
        if records[n]["params"]["batch_size"] == 32:
            assert records[n]["state"] == "stopped" and records[n]["rung"] == 0, records[n]


def test_a_trial_the_race_stops_under_tpe_reaches_optuna_pruned_not_as_a_failure(tmp_path):
    """Issue 51: the race told Optuna that a trial it stopped failed (penalties and a violated constraint), which
    steered the default TPE sampler away from a region left only for being slower than the best so far (it picked
    3.72 s against FIFO's 2.47 s). Under TPE, as the study makes it, the stopped trial is PRUNED and feasible;
    its record still ends `not reached` with the race as its reason."""
    from types import SimpleNamespace

    from tuner.schedule import Race
    from tuner.search._protocol import FinalReport, TrialOrder, WindowReport, to_tune
    from tuner.search._sampler import make_sampler
    from tuner.search._scheduler import TuneScheduler
    from tuner.study import TrialRecord
    from tuner.target import NOT_REACHED

    searcher, folder, objectives = tiny_searcher_tpe(tmp_path, make_sampler("tpe", 0, 8, None))
    winner_cfg, slow_cfg = searcher.suggest("t1"), searcher.suggest("t2")
    adapter = TuneScheduler(Race(margin=1.5), objectives)
    winner = SimpleNamespace(config=winner_cfg, trial_id="t1", last_result={})
    won = to_tune(FinalReport(values={"throughput": 100.0, "loss": 0.5}, feasible=True,
                              record=TrialRecord(trial=TrialOrder.from_config(winner_cfg).trial, state="complete",
                                                 metrics={"time_to_target": 4.0, "throughput": 100.0, "loss": 0.5})))
    adapter.on_trial_result(None, winner, won)
    slow = SimpleNamespace(config=slow_cfg, trial_id="t2", last_result={})
    for t in (2.0, 4.0, 6.0, 6.5):
        slow.last_result = to_tune(WindowReport(budget_used=t, window=int(t), samples=int(100 * t),
                                                throughput=50.0, train_seconds=t))
        adapter.on_trial_result(None, slow, slow.last_result)
    adapter.on_trial_complete(None, slow, slow.last_result)  # the race's final report, as Ray hands it on
    searcher.on_trial_complete("t2", result=slow.last_result)
    number = TrialOrder.from_config(slow_cfg).trial
    trial = searcher.study.trials[number]
    assert trial.state.name == "PRUNED" and trial.values is None  # not a failure TPE learns to avoid
    assert trial.constraints["failed"] <= 0 and trial.user_attrs["record"]["state"] == NOT_REACHED
    record = next(r for r in read_records(folder) if r.trial == number)
    assert record.state == NOT_REACHED and "race" in (record.error or "")


def tiny_searcher_tpe(tmp_path, sampler):
    from tests.helpers.searchers import tiny_searcher

    return tiny_searcher(tmp_path / "s", sampler=sampler)
