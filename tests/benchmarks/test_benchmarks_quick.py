"""The benchmark harness's arithmetic and output, on fixed inputs (milliseconds; no training, no Ray).

The benchmarks themselves run with `python benchmarks/run.py --quick`, not under pytest.
"""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.common import (BenchResult, error_result, make_settings, phase_times, write_results)
from benchmarks.metrics import Normalizer, hv_fraction, hypervolume_2d, pareto_front_2d, trials_to_reach
from benchmarks.overhead import overhead_parts, per_trial, trial_work, turnover
from benchmarks.stability import judge, params_key, top_configs
from tuner.analysis import read_records
from tests.helpers.records import write_record, write_rerun


def test_hypervolume_of_a_staircase_is_the_area_under_it() -> None:
    # (3,1), (2,2), (1,3) over ref (0,0): 3*1 + 2*1 + 1*1 = 6
    assert hypervolume_2d([(1, 3), (3, 1), (2, 2)], (0, 0)) == pytest.approx(6.0)


def test_dominated_and_out_of_range_points_add_no_volume() -> None:
    base = hypervolume_2d([(2, 2)], (0, 0))
    assert base == pytest.approx(4.0)
    assert hypervolume_2d([(2, 2), (1, 1), (2, 2), (-1, 5), (5, -1)], (0, 0)) == pytest.approx(base)
    assert hypervolume_2d([], (0, 0)) == 0.0


def test_hypervolume_agrees_with_optuna_on_random_points() -> None:
    optuna_hv = pytest.importorskip("optuna._hypervolume")
    import numpy as np

    rng = np.random.default_rng(0)
    pts = rng.random((30, 2))
    ours = hypervolume_2d([tuple(p) for p in pts], (-0.1, -0.1))
    # optuna minimizes: negate both objectives and the reference point.
    theirs = optuna_hv.compute_hypervolume(-pts, np.array([0.1, 0.1]))
    assert ours == pytest.approx(theirs)


def test_pareto_front_keeps_only_non_dominated_points() -> None:
    assert pareto_front_2d([(1, 1), (3, 1), (2, 2), (1, 3), (2, 1)]) == [(3, 1), (2, 2), (1, 3)]


def test_normalizer_flips_a_loss_and_the_whole_grid_has_fraction_one() -> None:
    grid = [(100.0, 2.0), (300.0, 2.5), (200.0, 1.0)]  # throughput up, loss down
    norm = Normalizer(grid, minimize_second=True)
    assert norm((300.0, 1.0)) == (1.0, 1.0)
    assert norm((100.0, 2.5)) == (0.0, 0.0)
    assert hv_fraction(grid, norm, grid) == pytest.approx(1.0)
    assert 0 < hv_fraction(grid[:1], norm, grid) < hv_fraction(grid[:2], norm, grid) < 1


def test_trials_to_reach_counts_from_one_and_skips_failures() -> None:
    assert trials_to_reach([None, 10.0, 96.0, 100.0], 95.0) == 3
    assert trials_to_reach([1.0, 2.0], 95.0) is None


def test_per_trial_overhead_subtracts_start_up_and_work() -> None:
    stamps = [{"start": 105.0, "end": 107.0}, {"start": 108.0, "end": 110.0}]
    out = per_trial(100.0, 111.0, stamps, work=4.0, n=2)
    # wall 11 - start-up 5 - work 4 = 2 s over 2 trials
    assert out["per_trial_s"] == pytest.approx(1.0)
    assert out["startup_s"] == pytest.approx(5.0)
    # the first trial's one-time set-up (1 s before its training) moves from the per-trial figure to start-up
    moved = per_trial(100.0, 111.0, stamps, work=4.0, n=2, first_setup_s=1.0)
    assert moved["startup_s"] == pytest.approx(6.0) and moved["per_trial_s"] == pytest.approx(0.5)
    assert moved["per_trial_s_counting_first_setup"] == pytest.approx(1.0)


def test_the_scale_rows_turnover_is_the_span_beyond_the_work_and_a_dearer_second_half_shows() -> None:
    """Row 1b (issue 55): 8 trials of 1 s, two at a time; the first four turn over in 0.1 s each, the last four in
    0.5 s: the span, and each half's time beyond its work over the concurrency, per trial."""
    stamps, t = [], 0.0
    for i in range(0, 8, 2):
        for _ in range(2):
            stamps.append({"start": t, "end": t + 1.0})
        t += 1.0 + (0.1 if i < 4 else 0.5)
    out = turnover(stamps, 2)
    assert out["n"] == 8 and out["work_s"] == pytest.approx(8.0)
    assert out["span_s"] == pytest.approx(4.0 + 0.1 + 0.1 + 0.5)
    assert out["first_half_per_trial_s"] == pytest.approx(0.1 / 4)  # 2.1 s for 2 s of work over 2 lanes
    assert out["second_half_per_trial_s"] == pytest.approx(0.5 / 4)
    assert out["second_half_per_trial_s"] > out["first_half_per_trial_s"]


def test_overhead_parts_name_the_probes_and_the_ceilings_of_trials_and_reruns(make_study) -> None:
    from tuner.study import StudyFolder, TrialRecord
    from tuner.study import Rerun

    folder = StudyFolder(make_study() / "gan-demo")
    (folder.path / "probes.json").write_text(json.dumps({"knobs": ["num_workers"], "choices": [], "seconds": 6.5}))
    two = next(r for r in read_records(folder) if r.trial == 2)
    two.metrics["ceiling_seconds"] = 1.5
    write_record(folder, TrialRecord.model_validate(two.to_json()))
    rerun = Rerun.model_validate({"state": "complete", "throughput": 700.0, "fid": 22.0, "repeat": 0,
                                  "ceiling_seconds": 0.75})
    write_rerun(folder, 2, rerun)
    parts = overhead_parts(folder.path)
    assert parts["probes_s"] == 6.5 and parts["ceilings_search_s"] == 1.5 and parts["ceilings_confirm_s"] == 0.75
    assert parts["trials_measuring_ceilings"] == 1 and parts["reruns_measuring_ceilings"] == 1


def test_trial_work_adds_training_and_scoring_time_and_ignores_missing() -> None:
    records = [{"train_seconds": 2.0, "quality_seconds": 0.5}, {"train_seconds": 1.0}, {"state": "error"}]
    assert trial_work(records) == pytest.approx(3.5)


def test_results_json_has_one_entry_per_figure_with_the_schema(tmp_path) -> None:
    results = [
        BenchResult("per-trial overhead", "overhead", 0.4, "s", 0.3, 4 / 3, "figure <= baseline + 0.1 s", False,
                    note="Missed: set-up per trial."),
        BenchResult("fidelity", "fidelity", 2.0, "%", None, 1.01, "median |ratio - 1| <= 5%", True,
                    details={"x": float("nan")}),
        error_result("speedup", "exported vs textbook", RuntimeError("no study\nmore"), "ratio > 1"),
    ]
    meta = {"mode": "quick", "date": "2026-01-01T00:00:00+00:00", "seconds": 12.0,
            "machine": {"cpu": "Test CPU", "cores": 2, "gpu": None}, "versions": {"torch": "x"}}
    json_path, md_path = write_results(results, meta, tmp_path)
    data = json.loads(json_path.read_text())
    assert [d["benchmark"] for d in data] == ["overhead", "fidelity", "speedup"]
    for d in data:
        assert {"name", "figure", "unit", "baseline", "ratio", "target", "pass", "note"} <= set(d)
    assert data[0]["pass"] is False and data[1]["pass"] is True and data[2]["pass"] is None
    assert data[1]["details"]["x"] is None  # NaN is not JSON
    assert data[2]["note"] == "not measured: RuntimeError: no study"
    md = md_path.read_text()
    assert "Test CPU (2 cores, no GPU)" in md and "Mode **quick**" in md
    assert "**MISSED**" in md and "**pass**" in md and "not measured" in md
    assert "1. Missed: set-up per trial." in md
    rows = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert len(rows) == 1 + 3  # header + one row per figure
    assert all(ln.replace("\\|", "").count("|") == 8 for ln in rows)  # a "|" in a target is escaped


@pytest.mark.parametrize("quick", [True, False])
@pytest.mark.parametrize("cuda", [False, True])
def test_every_mode_meets_the_issue_minimums(quick: bool, cuda: bool) -> None:
    s = make_settings(quick, cuda)
    assert len(s.fidelity_configs) >= 4
    assert {p.get("precision", "fp32") for _, p, _ in s.fidelity_configs} >= {"fp32", "bf16"}
    assert {p.get("num_workers", 0) > 0 for _, p, _ in s.fidelity_configs} == {True, False}
    assert s.search_seeds >= 3 and s.search_trials < s.grid_size
    assert s.speedup_repeats >= 2 and not math.isnan(s.grid_budget_s)
    assert s.stability_seeds >= (2 if quick else 3) and s.stability_remeasure >= 2 and s.stability_top >= 2
    # the study with confirmation keeps at least two trials of its own and the same number of training runs
    assert s.stability_trials - (s.stability_confirm + 1) * s.stability_repeats >= 2
    if not quick:
        assert s.default_study_args == ()  # the full run times the true default study


def _study(tmp_path, figures: dict[int, tuple[float, float]], reruns: dict[int, list[float]] | None = None):
    """A study on disk: trial -> (throughput, loss) measured in the search; reruns: trial -> re-run throughputs."""
    from tuner.study import Objective, StudyFolder, StudyMeta, TrialRecord
    from tuner.analysis import Study
    from tuner.study import Rerun

    folder = StudyFolder(tmp_path / "s")
    folder.path.mkdir()
    folder.write_meta(StudyMeta(name="s", workload="cnn", created="2026-11-22T10:00:00+00:00",
                                objectives=[Objective(metric="throughput", direction="maximize"),
                                            Objective(metric="loss", direction="minimize")],
                                baseline={"trial": 0, "params": {"batch_size": 0}}, confirm={"trials": 1, "repeats": 2}))
    for n, (thr, loss) in figures.items():
        write_record(folder, TrialRecord(trial=n, state="complete", params={"batch_size": n},
                                        started=f"2026-11-22T10:00:{10 * n:02d}+00:00",
                                        ended=f"2026-11-22T10:00:{10 * n + 10:02d}+00:00",
                                        metrics={"throughput": thr, "loss": loss, "train_seconds": 5.0,
                                                 "quality_seconds": 1.0}))
    for n, values in (reruns or {}).items():
        for i, v in enumerate(values):
            write_rerun(folder, n, Rerun(repeat=i, state="complete", ended=f"2026-11-22T10:01:{10 * i + 10:02d}+00:00",
                                        metrics={"throughput": v, "loss": figures[n][1], "train_seconds": 4.0}))
    return Study.load(folder)


def test_phase_times_split_the_study_at_its_last_trial(tmp_path) -> None:
    study = _study(tmp_path, {0: (100.0, 1.0), 1: (200.0, 1.5), 2: (150.0, 1.2)}, reruns={1: [190.0, 180.0]})
    p = phase_times(study.dir)
    # created 10:00:00, last trial ended 10:00:30, last re-run ended 10:01:20
    assert p["search_s"] == pytest.approx(30.0) and p["confirm_s"] == pytest.approx(50.0)
    assert (p["trials"], p["reruns"]) == (3, 2)
    assert p["search_work_s"] == pytest.approx(18.0) and p["confirm_work_s"] == pytest.approx(8.0)
    assert p["confirm"] == {"trials": 1, "repeats": 2}


def test_phase_times_say_which_re_runs_the_plan_asked_for_and_which_a_tie_or_a_moved_knee_added(tmp_path) -> None:
    """Row 3's miss is read on them: K or R is the lever only where every re-run was planned."""
    from tuner.study import Rerun, StudyFolder

    study = _study(tmp_path, {0: (100.0, 1.0), 1: (200.0, 1.5), 2: (150.0, 1.2)},
                   reruns={0: [100.0, 101.0, 99.0], 1: [190.0, 180.0, 185.0]})  # R=2: repeat 2 is the tie pass
    assert phase_times(study.dir)["reruns_by_why"] == {"planned": 4, "tie_pass": 2, "moved_knee": 0}
    folder = StudyFolder(study.dir)
    for trial, repeat in [(2, 0), (0, 3), (2, 1)]:  # the moved knee's round 1: M B M
        write_rerun(folder, trial, Rerun(repeat=repeat, round=1, state="complete",
                                        ended="2026-11-22T10:02:00+00:00", metrics={"throughput": 150.0}))
    assert phase_times(study.dir)["reruns_by_why"] == {"planned": 4, "tie_pass": 2, "moved_knee": 3}


def test_the_winner_holds_when_its_remeasurement_keeps_it_the_knee(tmp_path) -> None:
    from tuner.analysis import decide

    # front: 1 (fast, worse loss), 2 (balanced: the knee), 3 (slow, best loss)
    study = _study(tmp_path, {0: (90.0, 1.6), 1: (300.0, 1.5), 2: (250.0, 1.1), 3: (100.0, 1.0)})
    winner = decide(study, "knee").pick
    assert winner.trial == 2
    top = top_configs(study, winner, 3)
    assert top[0].trial == 2 and len(top) == 3 and {r.trial for r in top} <= {1, 2, 3}

    def runs(thr: dict[int, list[float]]) -> dict[str, dict[str, list[float]]]:
        loss = {1: 1.5, 2: 1.1, 3: 1.0}
        return {params_key({"batch_size": n}): {"throughput": v, "loss": [loss[n]] * len(v)} for n, v in thr.items()}

    same = judge(study, winner, top, runs({1: [290.0, 310.0], 2: [200.0, 200.0], 3: [95.0, 105.0]}))
    assert same["holds"] and same["holds_within_noise"] and same["remeasured_winner"] == 2
    assert same["error"] == pytest.approx(250.0 / 200.0 - 1)
    # re-measured, the winner is slower than trial 3 at a worse loss: 3 dominates it and is the knee
    lost = judge(study, winner, top, runs({1: [290.0, 310.0], 2: [60.0, 62.0], 3: [95.0, 105.0]}))
    assert not lost["holds"] and not lost["holds_within_noise"] and lost["remeasured_winner"] != 2
    # a config without a complete re-measurement is left out; a winner without one cannot be judged
    unknown = judge(study, winner, top, runs({1: [290.0], 3: [100.0]}))
    assert unknown["holds"] is None and unknown["error"] is None


# --- the multi-fidelity tabular benchmark (benchmarks/multifidelity.py), on a planted grid ---------------------


def _planted_grid() -> dict:
    """12 configs, 3 rungs (eta 3): throughput grows with batch size; the loss falls with training and is lowest
    near lr_scale 1; batch 64 with lr_scale 10 fails at its top rung. Trials cost 2 s of set-up plus training."""
    axes = {"batch_size": [16, 32, 64], "lr_scale": [0.3, 1.0, 3.0, 10.0]}
    rungs = [32, 96, 288]
    rows = []
    for b in axes["batch_size"]:
        for lr in axes["lr_scale"]:
            thr = 10.0 * math.log2(b)
            runs = []
            for i, n in enumerate(rungs):
                loss = 2.3 * math.exp(-(n / b) * 0.1 / (1 + 2 * abs(math.log10(lr))))
                failed = b == 64 and lr == 10.0 and i == 2
                runs.append({"budget": n, "state": "diverged" if failed else "complete", "throughput": thr,
                             "quality": None if failed else loss, "train_seconds": n / thr, "quality_seconds": 0.5,
                             "wall_seconds": n / thr + 2.5})
            rows.append({"params": {"batch_size": b, "lr_scale": lr}, "rungs": runs})
    return {"workload": "cnn", "quality": "loss", "axes": axes, "rungs": rungs, "eta": 3.0, "rows": rows}


def test_a_trial_that_goes_on_pays_one_set_up_and_a_scoring_per_rung() -> None:
    from benchmarks.multifidelity import Grid

    grid = Grid.of(_planted_grid())
    assert grid.setup_s == pytest.approx(2.0)
    key = (16, 1.0)
    full = grid.cost(key, 2, scored=1)  # FIFO: the top rung's training, scored once
    assert full == pytest.approx(2.0 + 288 / 40.0 + 0.5)
    assert grid.cost(key, 2, scored=3) == pytest.approx(full + 1.0)  # ASHA scores at every rung on the way
    assert grid.cost(key, 0, scored=1) == pytest.approx(2.0 + 32 / 40.0 + 0.5)  # stopped at the first rung
    assert len(grid.top_points()) == 11  # the failed config adds no point to the grid's front
    front = grid.front_keys()
    assert front and (64, 10.0) not in front
    for k in front:  # no config of the grid beats a front config on both throughput and loss
        t, q = grid.rows[k][2].values
        assert not any(t2 >= t and q2 <= q and (t2, q2) != (t, q) for t2, q2 in grid.top_points())


@pytest.mark.parametrize("mode", ["asha-pruned", "asha-values"])
def test_the_replay_stops_trials_under_asha_and_only_top_rung_figures_reach_the_front(mode) -> None:
    from benchmarks.multifidelity import Grid, replay

    grid = Grid.of(_planted_grid())
    cap = 12 * grid.cost((16, 1.0), 2, scored=1)
    fifo, asha = replay(grid, "fifo", 0, 4, cap), replay(grid, mode, 0, 4, cap)
    assert fifo.stopped == 0 and asha.stopped > 0
    assert all(p is not None for p in fifo.points[:3])  # every FIFO trial that completes adds its top-rung point
    assert sum(p is None for p in asha.points) >= asha.stopped  # a stopped trial adds none
    top = {r[2].values for r in grid.rows.values() if r[2].ok}
    assert {p for p in asha.points if p is not None} <= top
    assert len(asha.ends) > len(fifo.ends)  # the same wall time holds more trials when some stop early
    assert asha.ends == sorted(asha.ends) and asha.ends[-1] >= cap


def test_the_replay_figures_compare_both_variants_with_fifo(tmp_path) -> None:
    from benchmarks.multifidelity import replay_main

    path = tmp_path / "grid.json"
    path.write_text(json.dumps(_planted_grid()))
    assert replay_main({"cnn": path}, tmp_path, quick=True, seeds=2, trials=4, cap_trials=8) == 0
    out = json.loads((tmp_path / "multifidelity-cnn-quick.json").read_text())
    # both variants on the measured ladder, then on the ladder without its first rung
    assert [(s["rungs"], s["asha"]) for s in out["summary"]] == [
        ([32, 96, 288], "asha-pruned"), ([32, 96, 288], "asha-values"),
        ([96, 288], "asha-pruned"), ([96, 288], "asha-values")]
    for s in out["summary"]:
        assert s["seeds"] == 2 and 0 <= s["hv_wins"] <= 2 and s["t90_fifo_s"] > 0
        assert s["t90_pass"] == (s["t90_asha_s"] <= 0.5 * s["t90_fifo_s"])
        assert 1 <= s["trials_to_t90"] and 0 <= s["stopped_to_t90"] <= s["trials_to_t90"]
        assert s["survivor_s"] > s["fifo_trial_s"] > s["stopped_first_s"]  # scored at every rung; stopped early
    assert "| cnn | 32/96/288 | asha-pruned |" in (tmp_path / "multifidelity-cnn-quick.md").read_text()


def test_levers_rounds_run_every_arm_once_each_and_rotate_which_runs_first() -> None:
    from benchmarks.levers import schedule

    order = schedule(3, ("cnn", "gan"), ("eager", "compiled", "channels_last"))
    assert len(order) == 3 * 2 * 3
    for r in range(3):
        for w in ("cnn", "gan"):
            assert sorted(a for rr, ww, a in order if (rr, ww) == (r, w)) == ["channels_last", "compiled", "eager"]
    firsts = [next(a for rr, ww, a in order if rr == r) for r in range(3)]
    assert firsts == ["eager", "compiled", "channels_last"]
    assert make_settings(True, False).levers_rounds >= 2 and make_settings(False, False).levers_rounds >= 3


def test_levers_figures_compare_each_lever_with_eager_and_say_what_compiling_cost() -> None:
    from benchmarks.levers import summarize

    def run(rnd, arm, thr, compile_s=None, of_peak=0.05, state="complete", error=None):
        return {"round": rnd, "workload": "cnn", "arm": arm, "state": state, "error": error, "throughput": thr,
                "compile_seconds": compile_s, "of_peak": of_peak, "of_peak_skipped": None}

    runs = [run(0, "eager", 100.0), run(0, "compiled", 150.0, 40.0, 0.075), run(0, "channels_last", 90.0),
            run(1, "compiled", 130.0, 0.5, 0.065), run(1, "channels_last", None, state="error", error="boom"),
            run(1, "eager", 100.0)]
    compiled, channels_last = summarize(runs, 2)
    assert compiled.name == "cnn: compiled vs eager" and compiled.baseline == 100.0
    assert compiled.figure == pytest.approx(140.0) and compiled.ratio == pytest.approx(1.4)
    arm = compiled.details["arms"]["compiled"]
    # the first round's compile time (later rounds reuse the process's graphs): 40 / (1 - 100/140) = 140 s
    assert arm["compile_seconds_first"] == 40.0 and arm["break_even_s"] == pytest.approx(140.0)
    assert "40.0 s in its first round" in compiled.note and "pays back after 2.3 min" in compiled.note
    assert "compiled 7.0%" in compiled.note and "eager 5.0%" in compiled.note
    assert channels_last.figure == pytest.approx(90.0) and channels_last.ratio == pytest.approx(0.9)
    assert "1 of 2 interleaved rounds" in channels_last.note and "error: boom" in channels_last.note
    slower = summarize([run(0, "eager", 100.0), run(0, "compiled", 80.0, 30.0), run(0, "channels_last", 100.0)], 1)
    assert "never pays back" in slower[0].note


def test_overhead_parts_split_a_trials_own_set_up_and_time_before_the_first_and_after_the_last_run(
        make_study) -> None:
    from datetime import datetime

    from tuner.study import StudyFolder, TrialRecord

    folder = StudyFolder(make_study() / "gan-demo")
    records = read_records(folder)
    for i, r in enumerate(records):  # 20 s in the process: 15 training, 1 scoring, 1 of_peak, 3 set-up
        r.run_seconds = 20.0
        r.started, r.ended = f"2026-11-22T10:0{i}:00+00:00", f"2026-11-22T10:0{i}:20+00:00"
        r.metrics.update(train_seconds=15.0, quality_seconds=1.0, of_peak_seconds=1.0)
        r.metrics.pop("ceiling_seconds", None)
        write_record(folder, TrialRecord.model_validate(r.to_json()))
    launched = datetime.fromisoformat("2026-11-22T09:59:30+00:00").timestamp()
    last_end = datetime.fromisoformat(records[-1].ended).timestamp()
    parts = overhead_parts(folder.path, launched, last_end + 4.0 - launched)
    assert parts["trial_setup_s"] == pytest.approx(3.0 * len(records))
    assert parts["of_peak_s"] == pytest.approx(1.0 * len(records))
    assert parts["before_first_trial_s"] == pytest.approx(30.0) and parts["after_last_run_s"] == pytest.approx(4.0)
    assert "before_first_trial_s" not in overhead_parts(folder.path)  # without the process's start: not known
