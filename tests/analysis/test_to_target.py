"""Time to target read as one set of figures and at a stated resolution (issue 51): the verdict counts a run that
never reached the target as the export does, leaves out the search's selected reading, reads the crossing between
two evaluations, and calls a difference within one evaluation step what it is."""

from __future__ import annotations

import pytest

from tuner.analysis import Study, decide
from tests.helpers.records import write_record, write_rerun
from tuner.config import Budget, Params, Target, TrialConfig, dump_config
from tuner.study import Objective, Rerun, StudyFolder, StudyMeta, TrialRecord
from tuner.target import CurvePoint, target_metrics

TARGET = {"metric": "val_loss", "direction": "minimize", "value": 2.2, "eval_every_samples": 4096,
          "source": "baseline", "evaluations": [], "cap_seconds": 60.0}


def _curve(hit: float | None, step: float) -> list[list[float]]:
    """Evaluations `step` seconds apart up to `hit` (the first that meets the target) or to the 60 s cap."""
    end = hit if hit is not None else 60.0
    n = max(1, round(end / step))
    return [[4096.0 * (i + 1), end * (i + 1) / n, 3.0 if i + 1 < n or hit is None else 2.1] for i in range(n)]


def _study(tmp_path, runs: dict[int, tuple[float, list[float | None]]], step: float = 1.0) -> Study:
    """Trial 0 the baseline and trial 2 the pick, each: (the search's reading, its re-runs' times to target; None:
    not reached); throughput alike everywhere, so time to target decides."""
    folder = StudyFolder(tmp_path / "tt")
    folder.write_meta(StudyMeta(name="tt", target=TARGET, baseline={"trial": 0, "params": {}},
                                objectives=[Objective(metric="throughput", direction="max"),
                                            Objective(metric="time_to_target", direction="min")]))
    for n, (first, reruns) in runs.items():
        cfg = TrialConfig(workload="cnn", budget=Budget(seconds=60), params=Params(batch_size=16 * (n + 1)))
        write_record(folder, TrialRecord(trial=n, state="complete", config=dump_config(cfg), windows=[100.0] * 5,
                                         quality_curve=_curve(first, step),
                                         metrics={"throughput": 100.0, "time_to_target": first,
                                                  "samples_to_target": 4096 * round(first / step)}))
        for k, t in enumerate(reruns):
            write_rerun(folder, n, Rerun(repeat=k, seed=1 + k, state="complete" if t else "not reached",
                                         windows=[100.0] * 5, quality_curve=_curve(t, step),
                                         metrics={"throughput": 100.0 + 0.1 * k,
                                                  **({"time_to_target": t} if t else {})}))
    return Study.load(folder)


def _target_part(text: str) -> str:
    """The verdict's clause on time to target."""
    return next(part.strip() for part in text.split("; ") if part.strip().startswith("reaches the target"))


def test_a_run_that_missed_counts_in_the_verdict_as_in_the_export(tmp_path):
    """Planted (issue 51): the pick's re-runs reached the target in 10 and 11 s and one missed; the verdict read
    "2.86x sooner ... beyond the noise" from the two that reached it while the pick's own figure read "at least".
    Counted at the 60 s cap, as the export counts it: at least 18.8 s, so at most 1.6x sooner, within the noise."""
    s = _study(tmp_path, {0: (30.0, [29.0, 30.0, 31.0]), 2: (9.0, [10.0, 11.0, None])})
    fig = s.trial(2).confirmed.figures["time_to_target"]
    assert fig.centre == pytest.approx((10 * 11 * 60) ** (1 / 3)) and fig.at_least
    v = decide(s)
    assert v.pick.trial == 2
    line = _target_part(v.text)
    assert "2.86x sooner" not in line and "beyond the noise" not in line
    assert line.startswith("reaches the target at most 1.60x sooner than the baseline: time_to_target at least 18.8 "
                           "vs 30") and line.endswith("within the noise")


def test_the_confirmed_time_to_target_leaves_out_the_searchs_selected_reading(tmp_path):
    """The search's reading was selected for being good (4-9% sooner for equal configs): the confirmed figure is
    over the re-runs, as throughput's is."""
    s = _study(tmp_path, {0: (30.0, [29.0, 30.0, 31.0]), 2: (5.0, [10.0, 10.0, 10.0])})
    assert s.trial(2).confirmed.figures["time_to_target"].centre == pytest.approx(10.0)
    assert s.trial(2).confirmed.figures["time_to_target"].values == [10.0, 10.0, 10.0]


def test_a_difference_within_one_evaluation_step_cannot_be_told_apart_at_this_k(tmp_path):
    """Issue 51: every run of the pick met the target at its 2nd evaluation, the baseline's at its 3rd, and the
    verdict said "1.44x sooner, beyond the noise" with an interval narrower than the step. Within one evaluation
    step (2.35 s here) it cannot tell them apart, and each figure's interval spans the step."""
    s = _study(tmp_path, {0: (7.05, [7.05, 7.0, 7.1]), 2: (4.7, [4.7, 4.68, 4.72])}, step=2.35)
    v = decide(s)
    line = _target_part(v.text)
    assert line.endswith("cannot tell apart at this K") and "beyond the noise" not in line and "sooner" not in line
    fig = s.trial(2).confirmed.figures["time_to_target"]
    assert fig.step == pytest.approx(2.35) and fig.high - fig.low >= 2.35 - 1e-9


def test_time_to_target_is_read_between_the_two_evaluations_around_the_crossing():
    """A curve that crosses the target between two evaluations: 3.0 at 1,000 samples (1 s), 2.0 at 2,000 (2 s),
    target 2.5: the crossing is read halfway, 1.5 s and 1,500 samples, not rounded up to the evaluation that met
    it; a first evaluation that meets it has no bracket and reads as it is."""
    target = Target(metric="val_loss", direction="minimize", value=2.5, eval_every_samples=1000)
    curve = [CurvePoint(1000, 1.0, 3.0), CurvePoint(2000, 2.0, 2.0), CurvePoint(3000, 3.0, 1.0)]
    m = target_metrics(curve, target, 0.5, throughput=1000.0)
    assert m["time_to_target"] == pytest.approx(1.5) and m["samples_to_target"] == 1500
    assert m["estimated_time_to_target"] == pytest.approx(1.5)
    first = target_metrics([CurvePoint(1000, 1.0, 2.0)], target, 0.5)
    assert first["time_to_target"] == pytest.approx(1.0) and first["samples_to_target"] == 1000
    maximized = Target(metric="acc", direction="maximize", value=0.8, eval_every_samples=1000)
    up = target_metrics([CurvePoint(1000, 1.0, 0.6), CurvePoint(2000, 2.0, 0.9)], maximized, 0.5)
    assert up["samples_to_target"] == 1667


def test_a_study_scored_on_time_to_target_ties_on_it_not_on_throughput(tmp_path):
    """Seen in the horizon benchmark's study: trial 2 reached the target about 2.8x sooner than the baseline on
    every run, at the same throughput (its lr differed), and the knee's tie rule, judging throughput alone, read
    "no difference beyond the noise between trials 0 and 2: picked 0 for less memory" while `tuner export --trial 2`
    said "2.80x sooner ... beyond the noise". Ties in such a study are judged on time to target."""
    s = _study(tmp_path, {0: (28.0, [27.0, 28.0, 29.0]), 2: (10.0, [9.5, 10.0, 10.5])})
    v = decide(s)
    assert v.pick.trial == 2 and v.tied == []
    assert "beyond the noise" in _target_part(v.text) and "less memory" not in v.text


def test_time_to_target_within_one_evaluation_step_is_still_a_tie(tmp_path):
    """The other side: two configs whose times to target lie within one evaluation step, at one throughput, are
    tied, and the tie is settled (here by memory), not called a speed-up."""
    s = _study(tmp_path, {0: (7.05, [7.05, 7.0, 7.1]), 2: (4.7, [4.7, 4.68, 4.72])}, step=2.35)
    v = decide(s)
    assert v.tied == [0, 2]
