"""Item 6 of issue 20: a study's search trials do not measure their ceilings (only the trials whose verdict is read
do: the confirmation re-runs, `tuner train`, `tuner profile`); a report fills any trial's ceilings from the
study's cache when a trial with the same knobs measured them, and a trial without says why."""

import io
import json

from rich.console import Console

from tuner.config import TrialConfig
from tuner.report.view import trial_panel
from tuner.search import _trial as tr
from tuner.study import StudyFolder, TrialRecord
from tuner.analysis import NOT_MEASURED, ceiling_cache_keys, fill_from_cache, open_study, read_records
from tests.helpers.records import write_record, write_rerun


def _cache_for(record: dict, compute: float | None, input_: float | None) -> dict:
    keys = ceiling_cache_keys(TrialConfig.model_validate(record["config"]), record["device"])
    out = {}
    if compute is not None:
        out[keys["compute"]] = {"value": compute, "kind": "compute"}
    if input_ is not None:
        out[keys["input"]] = {"value": input_, "kind": "input"}
    return out


def test_report_fills_ceilings_from_the_cache_and_says_why_where_none(make_study):
    reports = make_study()
    folder = StudyFolder(reports / "gan-demo")
    raw = {r.trial: r for r in read_records(folder)}
    for n in (0, 2):  # search trials: ceilings not measured, the record says so
        raw[n].metrics["ceiling_skipped"] = NOT_MEASURED
        write_record(folder, raw[n])
    # trial 2's knobs were measured (a confirmation re-run of it): compute 1000, input 800 samples/s
    folder.ceilings_path.write_text(json.dumps(_cache_for(raw[2].to_json(), 1000.0, 800.0)))
    s = open_study(reports, "gan-demo")
    two, zero = s.trial(2), s.trial(0)
    assert two.value("compute_ceiling") == 1000.0 and two.value("input_ceiling") == 800.0
    assert two.get("bound") == "input-bound" and "input-bound at 70% of the compute ceiling" in two.get("headroom")
    assert two.get("ceiling_skipped") is None
    assert zero.value("compute_ceiling") is None and zero.get("ceiling_skipped") == NOT_MEASURED
    buf = io.StringIO()
    console = Console(file=buf, width=250, color_system=None)
    for part in trial_panel(s, zero):
        console.print(part)
    assert "not measured: ceilings are measured for the trials whose verdict is read" in buf.getvalue()
    buf = io.StringIO()
    console = Console(file=buf, width=250, color_system=None)
    for part in trial_panel(s, two):
        console.print(part)
    assert "headroom: input-bound" in buf.getvalue()


def test_only_complete_records_are_filled_and_measured_ones_kept(make_study):
    reports = make_study()
    folder = StudyFolder(reports / "gan-demo")
    records = read_records(folder)
    oom = next(r for r in records if r.state == "oom")
    own = next(r for r in records if r.trial == 1)
    own.metrics.update(compute_ceiling=5.0, input_ceiling=6.0)
    cache = {}
    for r in (oom, own):
        cache.update(_cache_for(r.to_json(), 999.0, 999.0))
    fill_from_cache([oom, own], cache)
    assert oom.get("compute_ceiling") is None  # not complete: no verdict
    assert own.value("compute_ceiling") == 5.0  # measured by the trial itself: kept


def _engine_seeing(monkeypatch, key: str, tmp_path) -> tuple[list, dict]:
    """A planted engine in place of run_trial that records what `run_one` passes it as `key`; and the keyword
    arguments of a tiny TrialSetup."""
    import tuner.train
    from tuner.space import Space
    from tuner.study import TrialResult

    seen: list = []

    def engine(cfg, **kwargs):
        seen.append(kwargs.get(key))
        return TrialResult(state="error", error="planted")

    monkeypatch.setattr(tuner.train, "run_trial", engine)
    monkeypatch.setattr(tr, "warm_process", lambda *a: None)
    space = Space.model_validate({"objectives": [], "params": {"batch_size": 8}})
    kw = dict(space=space, base={"workload": "cnn", "dataset": "synthetic", "budget": {"samples": 64},
                                 "params": {"device": "cpu"}},
              objectives=[], study_dir=str(tmp_path / "s"), cache_dir=str(tmp_path / "c"))
    return seen, kw


def test_search_trials_skip_ceilings_and_reruns_measure_them(tmp_path, monkeypatch):
    from tuner.search._protocol import TrialOrder

    seen, kw = _engine_seeing(monkeypatch, "measure_ceilings", tmp_path)
    setup = tr.TrialSetup(**kw)
    tr.run_one(TrialOrder(trial=0).to_config(), setup)
    tr.run_one(TrialOrder(trial=0, repeat=1).to_config(), setup)
    assert seen == [False, True]


def test_only_the_baselines_search_run_reads_its_noise_scale(tmp_path, monkeypatch):
    """Issue 55: efficiency is against the baseline's noise scale alone, so the baseline's search run reads it and
    no other search trial, nor a re-run, nor any trial of a study without a baseline."""
    from tuner.search._protocol import TrialOrder

    seen, kw = _engine_seeing(monkeypatch, "measure_noise", tmp_path)
    with_base = tr.TrialSetup(**kw, baseline_trial=0)
    for order in (TrialOrder(trial=0), TrialOrder(trial=1), TrialOrder(trial=0, repeat=1)):
        tr.run_one(order.to_config(), with_base)
    tr.run_one(TrialOrder(trial=0).to_config(), tr.TrialSetup(**kw))
    assert seen == [True, False, False, False]


def test_a_confirmed_trial_says_why_its_reruns_have_no_ceiling(make_study):
    from tuner.study import Rerun

    folder = StudyFolder(make_study() / "gan-demo")
    two = next(r for r in read_records(folder) if r.trial == 2)
    two.metrics["ceiling_skipped"] = NOT_MEASURED
    write_record(folder, two)
    write_rerun(folder, 2, Rerun.model_validate({"state": "complete", "throughput": 700.0, "fid": 22.0, "repeat": 0,
                                                "ceiling_skipped": "compute: one step takes 5.9 s"}))
    again = next(r for r in read_records(folder) if r.trial == 2)
    assert again.get("ceiling_skipped") == "in its confirmation re-runs: compute: one step takes 5.9 s"


def test_the_ceiling_cache_is_read_once_until_the_file_changes(make_study, monkeypatch):
    """records() runs for every view and at every trial's end: ceilings.json is parsed again only when it was
    rewritten, and a rewrite shows at once."""
    from pathlib import Path

    from tuner.files import atomic_write

    reports = make_study()
    folder = StudyFolder(reports / "gan-demo")
    raw = {r.trial: r for r in read_records(folder)}
    raw[2].metrics["ceiling_skipped"] = NOT_MEASURED
    write_record(folder, raw[2])
    atomic_write(folder.ceilings_path, json.dumps(_cache_for(raw[2].to_json(), 1000.0, 800.0)))
    reads = []
    real = Path.read_text

    def counted(self, *a, **k):
        if self.name == "ceilings.json":
            reads.append(self)
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "read_text", counted)
    for _ in range(3):
        assert {r.trial: r for r in read_records(folder)}[2].value("compute_ceiling") == 1000.0
    assert len(reads) == 1
    atomic_write(folder.ceilings_path, json.dumps(_cache_for(raw[2].to_json(), 2000.0, 800.0)))
    assert {r.trial: r for r in read_records(folder)}[2].value("compute_ceiling") == 2000.0
    assert len(reads) == 2
