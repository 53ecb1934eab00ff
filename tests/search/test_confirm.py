"""The confirmation phase: which trials, in which order, recorded where, and resumed after a kill."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from tests.helpers.fakeengine import engine_user, fake_engine_study
from tuner.config import Budget, Params, TrialConfig, dump_config
from tuner.report.export import build_export
from tuner.search._confirm import MAX_EXTRA, OUTLIER_PASSES, Run, moved_round, next_knee, outlier, pending, \
    plan_reruns, rerun_configs, schedule, tie_reads
from tuner.study import Objective, Rerun, StudyFolder, StudyMeta, TrialRecord, TrialResult
from tuner.analysis import Study, against_baseline, decide, is_confirmed, next_to_confirm
from tests.helpers.records import write_record, write_rerun

OBJ = [Objective(metric="throughput", direction="max"), Objective(metric="fid", direction="min")]


def engine_logged(cfg, *, cache_dir, out_dir=None, device=None, wall_limit_s=None, on_window=None, setup=None, **_):
    """Fast and fake: throughput from the batch size, loss from beta1; every call appended to calls.log."""
    with open(Path(out_dir).parents[3 if Path(out_dir).parent.name == "confirm" else 1] / "calls.log", "a") as f:
        f.write(f"{out_dir}\n")
    p = cfg.params
    return TrialResult(state="complete", throughput=float(p.batch_size) * 10, loss=1.0 - p.beta1, train_seconds=0.01)


def test_which_trials_are_confirmed(tmp_path):
    folder = StudyFolder(tmp_path / "s")
    folder.write_meta(StudyMeta(name="s", objectives=OBJ, baseline={"trial": 0}))
    for n, (thr, fid) in enumerate([(100, 50), (300, 40), (220, 20), (150, 10), (250, 30), (120, 60)]):
        write_record(folder, TrialRecord(trial=n, state="complete", metrics={"throughput": thr, "fid": fid}))
    s = Study.load(folder)
    # front: 1 (fastest), 4, 2 (knee), 3 (best fid); the knee first, then fastest, then best quality; + baseline
    assert plan_reruns(s, 3) == [2, 1, 3, 0]
    assert plan_reruns(s, 1) == [2, 0]
    assert plan_reruns(s, 0) == []


def test_a_baseline_at_the_knee_takes_none_of_the_k_front_trials_to_confirm(tmp_path):
    """A default study under --study-seconds 200: its 4 trials' front was trial 2 (1129.7 samples/s, fid 470) and
    the baseline (trial 0: 822, fid 176), the knee. K=1 confirmed the baseline alone, and the verdict kept it as the
    pick beside a 1.37x faster trial it had no re-runs of. Now the next front trial is confirmed beside it."""
    folder = StudyFolder(tmp_path / "s")
    folder.write_meta(StudyMeta(name="s", objectives=OBJ, baseline={"trial": 0}))
    for n, (thr, fid) in enumerate([(822.0, 176.0), (700.0, 500.0), (1129.7, 470.0), (600.0, 679.0)]):
        write_record(folder, TrialRecord(trial=n, state="complete", metrics={"throughput": thr, "fid": fid}))
    s = Study.load(folder)
    assert {r.trial for r in s.front()} == {0, 2}
    assert plan_reruns(s, 1) == [0, 2]  # the knee (the baseline), then the fastest
    assert plan_reruns(s, 2) == [0, 2]  # the front has no third trial


def pairs(runs):
    return [(r.trial, r.repeat) for r in runs]


def test_rounds_are_interleaved_and_rotate_and_skip_what_is_recorded():
    assert pairs(schedule([5, 7, 0], 3, {})) == [(5, 0), (7, 0), (0, 0), (7, 1), (0, 1), (5, 1), (0, 2), (5, 2),
                                                 (7, 2)]
    assert pairs(schedule([5, 7, 0], 2, {7: {0}, 5: {0, 1}})) == [(0, 0), (7, 1), (0, 1)]
    # a moved pick's round re-reads the baseline between its re-runs (M B M), the baseline's repeats going on
    # from the earlier rounds'
    assert moved_round(3, 2, 2, 0, {0: {0, 1, 2}}) == [(3, 0, 2), (0, 4, 2), (3, 1, 2)]
    assert moved_round(3, 1, 3, 0, {3: {0}}) == [(0, 3, 1), (3, 1, 1), (0, 4, 1), (3, 2, 1)]
    assert moved_round(3, 1, 2, None, {}) == [(3, 0, 1), (3, 1, 1)]  # a study without a baseline


@pytest.mark.ray
def test_a_study_confirms_its_front_interleaved_and_records_every_rerun(ray_session, tmp_path, trial_engine):
    summary = fake_engine_study(tmp_path, trial_engine, engine_logged, confirm=2, repeats=2, seed=1)
    study = summary.study
    confirmed = [r.trial for r in study.records if r.confirmed is not None]
    planned = plan_reruns(study, 2)
    assert sorted(confirmed) == sorted(planned) and 0 in planned
    calls = (tmp_path / "fake" / "calls.log").read_text().split()
    reruns = [(int(Path(c).parent.parent.name), int(Path(c).name)) for c in calls if "/confirm/" in c]
    assert reruns == pairs(schedule(planned, 2, {}))  # the order the trials were re-run in: round-robin, rotated
    for n in planned:
        assert [r.repeat for r in study.folder.reruns(n)] == [0, 1]
        assert [r.seed for r in study.folder.reruns(n)] == [1, 2]  # each repeat another seed, the trials' 0 + 1 + r
    ostudy = optuna.load_study(study_name="fake", storage=f"sqlite:///{tmp_path / 'fake' / 'study.db'}")
    assert all(len(ostudy.user_attrs[f"confirm:{n}"]) == 2 for n in planned)  # in the Optuna study too
    assert study.meta.noise is not None and study.meta.confirm == {"trials": 2, "repeats": 2}
    assert summary.verdict is not None and summary.verdict.text.startswith(f"trial {summary.verdict.pick.trial}")
    # the search's own records are untouched: re-runs live beside them
    assert all(rec.get("confirmed") is None for rec in
               (__import__("json").loads(p.read_text()) for p in (tmp_path / "fake" / "trials").glob("*/result.json")))


def _planted(tmp_path, reads, reruns, baseline=True):
    """reads: {trial: (throughput, fid)} single readings; reruns: {trial: [(throughput, fid), ...]}; baseline:
    trial 0 ran tuner's default knobs (False: the study has no baseline trial)."""
    folder = StudyFolder(tmp_path / "m")
    folder.write_meta(StudyMeta(name="m", objectives=OBJ, baseline={"trial": 0} if baseline else None))
    for n, (thr, fid) in reads.items():
        cfg = TrialConfig(workload="cnn", budget=Budget(samples=64), params=Params(batch_size=16 * (n + 1)))
        write_record(folder, TrialRecord(trial=n, state="complete", params={"batch_size": 16 * (n + 1)},
                                        config=dump_config(cfg),
                                        metrics={"throughput": thr, "fid": fid, "throughput_spread": 0.05}))
    for n, runs in reruns.items():
        for k, (thr, fid) in enumerate(runs):
            write_rerun(folder, n, Rerun(repeat=k, state="complete",
                                        metrics={"throughput": thr, "fid": fid, "throughput_spread": 0.05}))
    return Study.load(folder)


def test_a_knee_that_moves_after_confirmation_is_confirmed_next(tmp_path):
    # the search read 2 as the knee; its re-runs say half that, so the knee moves to 3 (never re-run)
    reads = {0: (100.0, 50.0), 1: (150.0, 45.0), 2: (300.0, 20.0), 3: (260.0, 22.0)}
    s = _planted(tmp_path, reads, {2: [(150.0, 20.0), (152.0, 20.0)], 0: [(99.0, 50.0), (101.0, 50.0)]})
    assert plan_reruns(s, 1) == [2, 0] and pending(s, 1, 2) == []
    assert next_knee(s, 1) == 3
    v = decide(s)  # before 3 is confirmed, the export is still a confirmed trial, and says what it left out
    assert v.pick.confirmed is not None and v.pick.trial == 2
    assert "trial 3 ranks higher on a single, unconfirmed reading" in v.text


def test_the_moved_knee_once_confirmed_is_the_export(tmp_path):
    reads = {0: (100.0, 50.0), 1: (150.0, 45.0), 2: (300.0, 20.0), 3: (260.0, 22.0)}
    s = _planted(tmp_path, reads, {2: [(150.0, 20.0), (152.0, 20.0)], 0: [(99.0, 50.0), (101.0, 50.0)],
                                   3: [(255.0, 22.0), (258.0, 22.0)]})
    assert next_knee(s, 1) is None and pending(s, 1, 2) == []
    exp = build_export(s)
    assert exp.record.trial == 3 and exp.record.confirmed is not None
    assert exp.document["provenance"]["confirmed"]["throughput"]["values"] == [255.0, 258.0]
    assert "unconfirmed" not in exp.verdict.text


def test_the_knee_chase_stops_at_its_bound_and_exports_the_best_confirmed_trial(tmp_path):
    # every re-run reads a third of the search's figure: each confirmed knee drops behind the next single reading
    reads = {0: (100.0, 50.0), 1: (500.0, 21.0), 2: (600.0, 20.0), 3: (450.0, 22.0), 4: (420.0, 23.0),
             5: (400.0, 24.0), 6: (380.0, 25.0)}
    reruns = {0: [(99.0, 50.0), (101.0, 50.0)]}
    chased: list[int] = []
    s = None
    for _ in range(MAX_EXTRA + 2):
        knee = 2 if s is None else next_knee(s, 1)
        if knee is None:
            break
        chased.append(knee)
        t, f = reads[knee]
        reruns[knee] = [(t / 3, f), (t / 3 * 1.01, f)]
        s = _planted(tmp_path / str(len(chased)), reads, reruns)
    assert chased[0] == 2 and len(chased) == 1 + MAX_EXTRA  # the planned knee, then at most MAX_EXTRA more
    assert next_knee(s, 1) is None and pending(s, 1, 2) == []
    v = decide(s)
    assert is_confirmed(v.pick) and "ranks higher on a single, unconfirmed reading" in v.text


def engine_first_round_slower_pid(cfg, *, cache_dir, out_dir=None, **_):
    """Throughput from the batch size and beta1, one loss for every config (the pick goes by throughput). The
    planned front trial's re-runs read a third of its search throughput (its search reading was luck; the baseline
    reads what it read), so the knee moves to a trial whose search reading beats the baseline's; a moved pick's
    re-runs read the search's figures, so its first re-run holds it. Each trial logs the process it ran in and that
    process's parent (reruns.log for a re-run, search.log for a search trial)."""
    import os

    rerun = Path(out_dir).parent.name == "confirm"
    study_dir = Path(out_dir).parents[3 if rerun else 1]
    with open(study_dir / ("reruns.log" if rerun else "search.log"), "a") as f:
        f.write(f"{os.getpid()} {os.getppid()} {out_dir}\n")
    p = cfg.params
    trial = int(Path(out_dir).parent.parent.name) if rerun else None
    study = Study.load(StudyFolder(study_dir)) if rerun else None
    slower = study is not None and trial != study.baseline_trial and trial in plan_reruns(study, 1)
    throughput = float(p.batch_size) * 10 * (2.0 - p.beta1) * (0.3 if slower else 1.0)
    return TrialResult(state="complete", throughput=throughput, loss=0.5, train_seconds=0.01)


@pytest.fixture(scope="module")
def moved_knee(ray_session, tmp_path_factory):
    """One study whose planned front trial's re-runs read a third of its search throughput (the knee moves) and
    whose later ones read the search's figures (the moved pick holds), each re-run logging its process, read by
    the two tests below (read-only): (study folder, summary)."""
    reports = tmp_path_factory.mktemp("moved-knee")
    with pytest.MonkeyPatch.context() as m:
        summary = fake_engine_study(reports, engine_user(m), engine_first_round_slower_pid, confirm=1, repeats=2,
                                    seed=1, concurrency=1)
    return reports / "fake", summary


@pytest.mark.ray
def test_a_study_whose_knee_moves_after_confirmation_exports_a_confirmed_trial(moved_knee):
    _, summary = moved_knee
    study = summary.study
    confirmed = [r.trial for r in study.records if r.confirmed is not None]
    assert len(plan_reruns(study, 1)) < len(confirmed) <= len(plan_reruns(study, 1)) + MAX_EXTRA  # the knee moved
    assert next_knee(study, 1) is None and pending(study, 1, 2) == []
    exp = build_export(study)
    assert is_confirmed(exp.record) and "confirmed" in exp.document["provenance"]


@pytest.mark.ray
def test_every_round_of_the_confirmation_runs_in_one_tune_run_each_rerun_in_a_fresh_process(moved_knee):
    """The rounds a moving knee adds run in the same Tune run as the planned re-runs, in the order the rounds ask
    for; each re-run gets a fresh process, as `tuner train` on the export does (re-runs sharing a process
    agreed far more closely than fresh processes do, so their interval did not hold for a re-training): a child
    of the phase's one trial process, never a search trial's process."""
    study_dir, summary = moved_knee
    study = summary.study
    assert not summary.interrupted
    planned = plan_reruns(study, 1)
    confirmed = [r.trial for r in study.records if r.confirmed is not None]
    assert len(confirmed) > len(planned)  # the knee moved: more than one round
    lines = [line.split() for line in (study_dir / "reruns.log").read_text().splitlines()]
    search = [line.split() for line in (study_dir / "search.log").read_text().splitlines()]
    assert len({pid for pid, _, _ in lines}) == len(lines)  # a fresh process for every re-run
    assert not {pid for pid, _, _ in lines} & {pid for pid, _, _ in search}  # none of them a search trial's
    # each a child of the phase's one (reused) trial process, which trains nothing itself
    assert len({parent for _, parent, _ in lines}) == 1 and not {parent for _, parent, _ in lines} & {
        pid for pid, _, _ in lines + search}
    order = [(int(Path(d).parent.parent.name), int(Path(d).name)) for _, _, d in lines]
    moved = [t for t in confirmed if t not in planned]
    assert order[: 2 * len(planned)] == pairs(schedule(planned, 2, {}))  # the planned round first, interleaved
    # then the moved pick's round: one re-run of it and the baseline read beside it (the screen), which held it as
    # the pick, then its second re-run (M B M)
    later = order[2 * len(planned):]
    assert len(moved) == 1 and later == [(moved[0], 0), (0, 2), (moved[0], 1)]
    assert [r.round for r in study.folder.reruns(moved[0])] == [1, 1]
    assert [r.repeat for r in study.folder.reruns(0)] == [0, 1, 2]
    assert decide(study).pick.trial == moved[0]


def test_with_study_seconds_a_moved_knee_is_confirmed_only_while_the_time_left_holds_its_reruns(tmp_path):
    """The one-Tune-run confirmation (RerunSearcher) chases a moved knee only if --study-seconds leaves time for
    its re-runs; otherwise the phase ends and the verdict names the unconfirmed rival."""
    from ray.tune.search import Searcher

    from tuner.search._allowance import Allowance
    from tuner.search._reruns import RerunSearcher
    from tuner.search._protocol import TrialOrder

    reads = {0: (100.0, 50.0), 1: (150.0, 45.0), 2: (300.0, 20.0), 3: (260.0, 22.0)}
    _planted(tmp_path, reads, {2: [(150.0, 20.0), (152.0, 20.0)], 0: [(99.0, 50.0), (101.0, 50.0)]})
    now = [0.0]
    allowance = Allowance(seconds=100.0, started=0.0, confirm_runs=4, trial_s=10.0, clock=lambda: now[0])
    roomy = RerunSearcher(tmp_path / "m", 1, 2, 30.0, allowance=allowance)
    first = roomy.suggest("a")  # 100 s left: trial 3's two re-runs (10 s each) fit
    assert first is not None and first != Searcher.FINISHED and TrialOrder.from_config(first).trial == 3
    now[0] = 85.0  # 15 s left: not enough for two 10 s re-runs
    late = RerunSearcher(tmp_path / "m", 1, 2, 30.0, allowance=allowance)
    assert late.suggest("b") == Searcher.FINISHED
    assert "trial 3 ranks higher on a single, unconfirmed reading" in decide(Study.load(StudyFolder(tmp_path / "m"))).text


def _two_rounds(tmp_path, moved: tuple[float, float]):
    """Trial 2 and the baseline confirmed in round 0 (150-152 and 99-101 samples/s: 1.5x); the knee moved to
    trial 3, read in round 1 as scheduled (M B M): `moved` for its two re-runs, the baseline 201 between them
    (the machine twice as fast as in round 0)."""
    reads = {0: (100.0, 50.0), 1: (150.0, 45.0), 2: (300.0, 20.0), 3: (260.0, 22.0)}
    s = _planted(tmp_path, reads, {2: [(150.0, 20.0), (152.0, 20.0)], 0: [(99.0, 50.0), (101.0, 50.0)]})
    for n, rerun in [(2, 0), (2, 1), (0, 0), (0, 1)]:  # the planned round
        write_rerun(s.folder, n, s.folder.reruns(n)[rerun].model_copy(update={"round": 0}))
    assert next_knee(s, 1) == 3
    assert [(r.trial, r.repeat, r.round) for r in pending(s, 1, 2)] == []
    for n, repeat, thr in [(3, 0, moved[0]), (0, 2, 201.0), (3, 1, moved[1])]:  # round 1, as scheduled: M B M
        write_rerun(s.folder, n, Rerun(repeat=repeat, round=1, state="complete",
                                      metrics={"throughput": thr, "fid": reads[n][1], "throughput_spread": 0.05}))
    s = Study.load(s.folder)
    assert pending(s, 1, 2) == [] and [r.repeat for r in s.folder.reruns(0)] == [0, 1, 2]
    return s


def test_the_pick_compares_trials_read_in_different_rounds_by_their_ratio_to_the_baseline_beside_each(tmp_path):
    """The machine sped up 2x between rounds: trial 3 reads 200-202 samples/s in round 1, beside a baseline read
    201 (1.0x), while trial 2 read 150-152 in round 0 beside a baseline of 99-101 (1.5x). Across rounds trial 3
    looks faster (201 vs 151); side by side trial 2 is 1.5x the baseline and trial 3 1.0x, so trial 2 is the
    pick, and the verdict compares it with the baseline read in its own round."""
    s = _two_rounds(tmp_path, (200.0, 202.0))
    v = decide(s, pick="throughput")
    assert v.pick.trial == 2 and v.ratio is not None and 1.4 < v.ratio.low < v.ratio.centre < 1.55
    assert "faster than the baseline (trial 0)" in v.text and v.tied == []
    # a kill in the middle of that round: resume re-runs exactly what is missing, in the round's own numbering
    (s.folder.path / "trials" / "0000" / "confirm" / "02.json").unlink()
    assert [(r.trial, r.repeat, r.round) for r in pending(Study.load(s.folder), 1, 2)] == [(0, 2, 1)]


def test_trials_read_in_different_rounds_tie_on_their_ratios_to_the_baseline_beside_each(tmp_path):
    """Trial 3 reads 300-304 beside the baseline's 201 (1.5x), as trial 2 read 150-152 beside 99-101 (1.5x): the
    same speed side by side, though 2x apart across rounds; the tie goes to the better quality (trial 2)."""
    s = _two_rounds(tmp_path, (300.0, 304.0))
    v = decide(s, pick="throughput")
    assert v.tied == [2, 3] and v.pick.trial == 2 and v.tie_reason == "quality"


def test_a_moved_pick_is_compared_with_the_baseline_read_beside_it_not_across_rounds(tmp_path):
    """Trial 3 reads 330-334 beside the baseline's 201 (1.65x; trial 2 is 1.5x in its round): it is the pick, and
    its ratio to the baseline is 1.65x from the round it was read in, not 2.6x against the baseline's round 0."""
    s = _two_rounds(tmp_path, (330.0, 334.0))
    v = decide(s, pick="throughput")
    assert v.pick.trial == 3 and v.ratio is not None and 1.6 < v.ratio.centre < 1.7 and v.ratio.low > 1
    assert "read side by side in the same round" in v.text and v.tied == []


def test_a_rival_whose_single_reading_is_within_one_more_run_of_the_pick_is_not_chased(tmp_path):
    """On a noisy machine the knee's re-runs spread wide; a never re-run trial whose single reading lies within
    where one more run of the pick would read is no evidence against it, so no round is spent on it (and the
    verdict says why it was left); a reading beyond that still moves the knee."""
    reruns = {2: [(140.0, 18.0), (180.0, 23.0)], 0: [(90.0, 45.0), (115.0, 55.0)]}
    near = _planted(tmp_path / "near", {0: (100.0, 50.0), 1: (150.0, 45.0), 2: (300.0, 17.0), 3: (200.0, 19.5)},
                    reruns)
    assert pending(near, 1, 2) == [] and next_knee(near, 1) is None
    v = decide(near)
    assert is_confirmed(v.pick) and "trial 3 ranks higher on a single, unconfirmed reading, within what one more " \
                                  "run of the pick reads" in v.text
    far = _planted(tmp_path / "far", {0: (100.0, 50.0), 1: (150.0, 45.0), 2: (300.0, 17.0), 3: (900.0, 19.5)},
                   reruns)
    assert next_knee(far, 1) == 3


def test_a_rival_is_re_run_where_the_pick_s_spread_has_one_degree_of_freedom(tmp_path):
    """Only the knee was re-run (no baseline trial): its two re-runs give the spread one degree of freedom, and
    t = 12.7 would put trial 2's single reading (130 samples/s against the pick's 95-105, a better FID) within
    "one more run" of it, so the rival was never re-run. Too little spread to call it noise: it is re-run; once
    a second config's re-runs pool in (two degrees of freedom), the same reading is within the noise again."""
    def study(path, reruns):
        return _planted(path, {1: (150.0, 20.0), 2: (130.0, 20.2), 3: (90.0, 30.0)}, reruns, baseline=False)

    one = study(tmp_path / "one", {1: [(95.0, 20.0), (105.0, 21.0)]})
    assert one.pooled("throughput").df == 1 and next_knee(one, 1) == 2
    assert "trial 2 ranks higher on a single, unconfirmed reading (the confirmation stopped" in decide(one).text
    two = study(tmp_path / "two", {1: [(95.0, 20.0), (105.0, 21.0)], 3: [(86.0, 29.0), (94.0, 31.0)]})
    assert two.pooled("throughput").df == 2 and next_knee(two, 1) is None
    assert "trial 2 ranks higher on a single, unconfirmed reading, within what one more run" in decide(two).text


def test_a_rival_is_judged_against_the_pick_as_ratios_to_the_baseline_read_in_the_same_phase(tmp_path):
    """The search ran on a machine twice as fast as the confirmation: the baseline read 200 in the search and
    99-101 in its re-runs. Trial 3's single reading of 310 is 1.55x the baseline's beside it, as the pick (trial
    2, 150-152 beside 99-101) is 1.5x: no evidence against the pick, so not chased, though 310 is twice where
    one more run of the pick reads. A reading of 600 (3x the baseline's) still is."""
    def study(path, rival):
        reads = {0: (200.0, 50.0), 1: (300.0, 45.0), 2: (300.0, 20.0), 3: (rival, 20.0)}
        s = _planted(path, reads, {2: [(150.0, 20.0), (152.0, 20.0)], 0: [(99.0, 50.0), (101.0, 50.0)]})
        for n in (0, 2):
            for rerun in s.folder.reruns(n):
                write_rerun(s.folder, n, rerun.model_copy(update={"round": 0}))
        return Study.load(s.folder)

    near = study(tmp_path / "near", 310.0)
    assert near.trial(2).confirmed.figures["throughput"].rerun_high < 310.0 / 1.9
    assert next_knee(near, 1) is None
    said = decide(near).text
    assert "trial 3 ranks higher on a single, unconfirmed reading, within what one more run of the pick reads" in said
    # 310 lies above the pick's printed one-run range: the verdict says which comparison let it stand
    assert "as ratios to the baseline read beside each (its search reading 1.55x the baseline's; so not re-run)" in said
    assert next_knee(study(tmp_path / "far", 600.0), 1) == 3


def test_a_rival_no_better_than_the_pick_is_chased_about_2_5_percent_of_the_time_across_a_drift():
    """The like-with-like rule (tuner.analysis.rounds.beyond_one_more_run) on simulated studies: the rival and the
    pick are one speed, the search phase ran 1.4x faster than the confirmation, every reading is off by a
    lognormal 5%; the pick and the baseline have 2 re-runs each (the spread pooled from them, 2 df). One side of
    a 95% interval: 2.5% false alarms (4000 cases, standard error 0.25%: 1.5-3.5%). The rule it replaces, the
    rival's reading against the pick's one-more-run interval, chased nearly every one."""
    import random

    from tuner.analysis import beyond_one_more_run
    from tuner.analysis import pool

    rng = random.Random(39)
    read = lambda true, drift: true * drift * rng.lognormvariate(0.0, 0.05)  # noqa: E731
    new = old = 0
    for _ in range(4000):
        pick, base = [read(150.0, 1.0) for _ in range(2)], [read(100.0, 1.0) for _ in range(2)]
        rival, rival_base = read(150.0, 1.4), read(100.0, 1.4)
        p = pool([pick, base])
        new += beyond_one_more_run(rival, rival_base, pick, base, p) is True
        old += rival > p.prediction(pick).high
    assert 0.015 <= new / 4000 <= 0.035, new / 4000
    assert old / 4000 > 0.5


def _searcher_round(tmp_path, screen, repeats=2, extra=None, base=(100.0, 50.0)):
    """A RerunSearcher (no Ray) over a study whose knee moved to trial 3 after the planned round: what it hands
    out first, then, once the screen (trial 3's first re-run, reading `screen`, and the baseline's beside it,
    reading `base`; round 0 read it at 99 and 101) is recorded, what comes next; the study, and the lines its live
    view printed."""
    import io

    from rich.console import Console

    from tuner.cli.progress import SearchView
    from tuner.search._reruns import RerunSearcher
    from tuner.search._protocol import TrialOrder

    reads = {0: (100.0, 50.0), 1: (150.0, 45.0), 2: (300.0, 20.0), 3: (260.0, 22.0), 4: (240.0, 23.0)}
    s = _planted(tmp_path, reads, {2: [(150.0, 20.0), (152.0, 20.0)], 0: [(99.0, 50.0), (101.0, 50.0)]})
    for n in (0, 2):
        for rerun in s.folder.reruns(n):
            write_rerun(s.folder, n, rerun.model_copy(update={"round": 0}))
    buf = io.StringIO()
    view = SearchView(Console(file=buf, width=300, force_terminal=False), total=5, done=5, objectives=OBJ, params=[])
    searcher = RerunSearcher(tmp_path / "m", 1, repeats, 30.0, view=view)

    def handed(trial_id):
        got = searcher.suggest(trial_id)
        if not isinstance(got, dict):
            return got
        order = TrialOrder.from_config(got)
        return order.trial, order.repeat, order.round

    first = [handed("a"), handed("b"), handed("x")]  # the screen alone: nothing more until its figures are in
    write_rerun(s.folder, 3, Rerun(repeat=0, round=1, state="complete",
                                  metrics={"throughput": screen[0], "fid": screen[1], "throughput_spread": 0.05,
                                           **(extra or {})}))
    searcher.on_trial_complete("a")
    if first[1] is not None and first[1][0] == 0:  # the baseline, read beside it in the same round
        write_rerun(s.folder, 0, Rerun(repeat=first[1][1], round=1, state="complete",
                                      metrics={"throughput": base[0], "fid": base[1], "throughput_spread": 0.05}))
        searcher.on_trial_complete("b")
    after = handed("c")
    return first, after, Study.load(s.folder), buf.getvalue().splitlines()


def test_a_moved_pick_is_re_run_once_first_and_its_round_goes_on_only_if_that_re_run_holds_it(tmp_path):
    """The knee moved to trial 3 on a single reading; one re-run of it comes first, with the baseline read beside
    it in the same round (the screen). It read what the search did: it holds, so trial 3's second re-run follows
    (M B M)."""
    first, after, study, lines = _searcher_round(tmp_path / "holds", (258.0, 22.0))
    assert first == [(3, 0, 1), (0, 2, 1), None]
    assert any("moved the pick to trial 3, which has one reading: re-running it once, beside the baseline (trial 0) "
               "read in the same round, to see whether it holds" in line for line in lines)
    assert any(line.endswith("trial 3's re-run holds it as the pick: confirming it") for line in lines)
    assert after == (3, 1, 1)  # the moved pick's second re-run, the baseline read in its round already
    assert [(r.trial, r.repeat, r.round) for r in pending(study, 1, 2)] == [(3, 1, 1)]


def test_a_moved_pick_s_screen_is_its_first_re_run_and_the_baseline_s_beside_it():
    from tuner.search._confirm import screen

    assert screen(moved_round(3, 1, 3, 0, {}), 3) == [(3, 0, 1), (0, 3, 1)]  # then M B M: the baseline again
    assert screen(moved_round(3, 2, 1, 0, {}), 3) == [(3, 0, 2), (0, 2, 2)]  # --repeats 1: the round is the screen
    assert screen(moved_round(3, 1, 2, None, {}), 3) == [(3, 0, 1)]  # a study without a baseline: M alone


@pytest.mark.parametrize("case, screen, base, holds_it", [
    # trial 3 no faster than the baseline (1.0x; trial 2 is 1.5x), screened in a round the machine ran 2x faster:
    # against round 0's baseline its 200 read 2x and it held; beside its own round's baseline it is 1.0x
    ("a 2x faster round", (200.0, 22.0), (200.0, 50.0), False),
    # trial 3 truly 2.6x, screened in a round the machine ran 2x slower: its 130 read below trial 2's 151 and the
    # screen dropped it; beside its own round's baseline (50) it is 2.6x and holds
    ("a 2x slower round", (130.0, 22.0), (50.0, 50.0), True),
])
def test_a_moved_pick_s_screen_compares_inside_its_round(tmp_path, case, screen, base, holds_it):
    """Issue 51: a moved pick's one-re-run check compares inside one round, the baseline read beside it: the
    machine drifting 2x between the rounds neither makes a 1.0x trial the pick nor drops a 2.6x one."""
    from tuner.search._confirm import holds

    first, after, study, lines = _searcher_round(tmp_path, screen, base=base)
    assert first == [(3, 0, 1), (0, 2, 1), None]
    assert holds(study, 3) is holds_it
    assert (after == (3, 1, 1)) is holds_it  # its round goes on only if it held
    # the same readings without the baseline's of its round (the screen as it was: M alone) judged it the other way
    only = Study.load(study.folder)
    for rerun in only.folder.reruns(0):
        if rerun.round == 1:
            only.folder.rerun_path(0, rerun.repeat).unlink()
    assert [r.round for r in Study.load(only.folder).folder.reruns(0)] == [0, 0]
    assert holds(Study.load(only.folder), 3) is not holds_it


def test_a_moved_pick_whose_first_re_run_does_not_hold_it_is_not_re_run_again(tmp_path):
    """The screen read like the planned knee's re-runs (half its search figure): trial 3 is not the pick on it, so
    its round ends there, the chase moves to the next single reading (trial 4), and the verdict says why 3 has one
    re-run."""
    from ray.tune.search import Searcher

    first, after, study, lines = _searcher_round(tmp_path / "fails", (130.0, 22.0))
    assert first == [(3, 0, 1), (0, 2, 1), None]
    assert any("trial 3's re-run did not hold it as the pick (throughput 130.0 (search 260.0), fid 22 (search 22)): "
               "not re-run again" in line for line in lines)
    assert any("moved the pick to trial 4" in line for line in lines)
    assert pending(study, 1, 2) == [] and next_knee(study, 1) == 4
    assert after == (4, 0, 2)  # the next moved pick's screen, in a round of its own
    assert after != Searcher.FINISHED
    for n in (4,):
        write_rerun(study.folder, n, Rerun(repeat=0, round=2, state="complete",
                                          metrics={"throughput": 120.0, "fid": 23.0, "throughput_spread": 0.05}))
    study = Study.load(study.folder)
    v = decide(study)
    # the baseline read once beside trial 3's screen, and no more (trial 4's screen reads it once again)
    assert v.pick.trial == 2 and [r.repeat for r in study.folder.reruns(0)] == [0, 1, 2]
    assert "the knee moved to trials 3 and 4 on a single reading; one re-run each did not hold them" in v.text


def test_with_one_re_run_per_trial_a_moved_pick_that_holds_is_confirmed_by_its_screen_alone(tmp_path):
    from ray.tune.search import Searcher

    first, after, study, lines = _searcher_round(tmp_path, (258.0, 22.0), repeats=1)
    # the study's round 0 read the baseline twice (repeats 0 and 1): its re-read beside the screen is repeat 2, not
    # 1 (which was written over round 0's reading of 101 before the tie passes numbered round 0's extra re-runs)
    assert first == [(3, 0, 1), (0, 2, 1), None] and after == Searcher.FINISHED
    assert [(r.repeat, r.round) for r in study.folder.reruns(0)] == [(0, 0), (1, 0), (2, 1)]
    assert lines[-1].endswith("trial 3's re-run holds it as the pick") and decide(study).pick.trial == 3


def test_with_one_re_run_per_trial_a_moved_pick_s_round_reads_the_baseline_beside_it(tmp_path):
    """--repeats 1: the moved pick's round read no baseline, so its re-run, in a round the machine ran 2x faster,
    was compared with the baseline read in round 0: a config as fast as the baseline read "2.00x the baseline" and
    was the pick. The baseline is read once after it (M B), and the pick goes back to trial 2 (1.5x)."""
    assert moved_round(3, 1, 1, 0, {}) == [(3, 0, 1), (0, 1, 1)]
    reads = {0: (100.0, 50.0), 2: (300.0, 20.0), 3: (260.0, 19.0)}
    s = _planted(tmp_path, reads, {2: [(150.0, 20.0)], 0: [(100.0, 50.0)]})
    for n in (0, 2):
        for rerun in s.folder.reruns(n):
            write_rerun(s.folder, n, rerun.model_copy(update={"round": 0}))
    assert next_knee(Study.load(s.folder), 1) == 3
    write_rerun(s.folder, 3, Rerun(repeat=0, round=1, state="complete",  # the screen: 1.0x, in a 2x faster round
                                  metrics={"throughput": 200.0, "fid": 19.0, "throughput_spread": 0.05}))
    s = Study.load(s.folder)
    assert decide(s).pick.trial == 3 and pending(s, 1, 1) == [(0, 1, 1)]  # it holds: the baseline beside it
    write_rerun(s.folder, 0, Rerun(repeat=1, round=1, state="complete",
                                  metrics={"throughput": 200.0, "fid": 50.0, "throughput_spread": 0.05}))
    s = Study.load(s.folder)
    assert pending(s, 1, 1) == []
    v = decide(s, "throughput")
    assert v.pick.trial == 2 and v.ratio.centre == pytest.approx(1.5)
    assert against_baseline(s, s.trial(3)).ratio.centre == pytest.approx(1.0)


def test_a_moved_pick_whose_re_run_is_suspect_is_not_re_run_again_and_the_view_says_why(tmp_path):
    """Its re-run reads as well as the search did, but from windows far apart at twice its compute ceiling: a
    suspect figure is never the pick, so the round ends there, and the view says it was the suspicion, not the
    figures, that ended it."""
    first, after, study, lines = _searcher_round(tmp_path, (258.0, 22.0),
                                                 extra={"throughput_spread": 2.5, "of_compute_ceiling": 1.9})
    assert first == [(3, 0, 1), (0, 2, 1), None] and study.trial(3).confirmed.suspect
    assert pending(study, 1, 2) == [] and after == (4, 0, 2)
    assert any(line.startswith(f"trial 3's re-run is suspect ({study.trial(3).confirmed.suspect}), so it cannot be "
                               "the pick: not re-run again") for line in lines)


def test_reruns_of_one_trial_train_with_distinct_seeds_that_are_recorded_and_deterministic(tmp_path):
    """One seed re-run back to back read 5-8x narrower than across seeds (issue 34): repeat r of a trial trains
    with seed + 1 + r (the trial keeps its own), the same on every call, and its Rerun record says which."""
    from types import SimpleNamespace

    from tuner.search._protocol import order_of
    from tuner.search._recorder import RerunRecorder
    from tuner.search._trial import TrialSetup, run_one
    from tuner.search._protocol import record_of
    from tuner.space import Space

    s = _planted(tmp_path, {0: (100.0, 50.0), 2: (300.0, 20.0)}, {})
    rec = next(r for r in s.records if r.trial == 2)
    rec.config["params"]["seed"] = 5
    write_record(s.folder, rec)
    s = Study.load(s.folder)
    runs = schedule([2, 0], 3, {})
    orders = [order_of(c) for c in rerun_configs(s, runs, 30.0)]
    assert [o.seed for o in orders if o.trial == 2] == [6, 7, 8]  # distinct, none the trial's own 5
    assert [o.seed for o in orders if o.trial == 0] == [1, 2, 3]  # the baseline's seed 0: repeat r shares a draw
    assert [order_of(c) for c in rerun_configs(s, runs, 30.0)] == orders  # deterministic

    seen = []

    def engine(cfg, **_):
        seen.append(cfg.params.seed)
        return TrialResult(state="complete", throughput=100.0, fid=20.0)

    space = Space.model_validate({"objectives": [], "params": {"batch_size": 8}})
    setup = TrialSetup(space=space, base={"workload": "cnn", "dataset": "synthetic", "budget": {"samples": 64},
                                          "params": {"device": "cpu", "seed": 5}},
                       objectives=[], study_dir=str(s.folder.path), cache_dir=str(tmp_path / "c"))
    recorder = RerunRecorder(s.folder.path, f"sqlite:///{tmp_path / 'optuna.db'}", "m")  # none there: skipped
    for order in orders[:2]:
        config = order.to_config()
        recorder._record(SimpleNamespace(config=config), record_of(run_one(config, setup, engine=engine)))
    assert seen == [orders[0].seed, orders[1].seed]
    assert {(r.repeat, r.seed) for n in (0, 2) for r in s.folder.reruns(n)} == {(0, 6), (0, 1)}


def test_an_old_rerun_without_a_seed_still_reads(tmp_path):
    folder = StudyFolder(tmp_path / "s")
    path = folder.rerun_path(3, 0)
    path.parent.mkdir(parents=True)
    path.write_text('{"repeat": 0, "round": 0, "state": "complete", "throughput": 10.0}\n')
    assert [(r.repeat, r.seed, r.throughput) for r in folder.reruns(3)] == [(0, None, 10.0)]


def test_the_confirmed_quality_interval_spans_reruns_with_different_seeds(tmp_path):
    """Re-runs read with different seeds spread as seeds do; the confirmed interval is computed over them (not one
    seed's narrow spread), and each keeps the seed it ran with."""
    s = _planted(tmp_path, {0: (100.0, 50.0), 2: (300.0, 20.0)}, {})
    for n, fids in {2: [18.0, 26.0, 21.0], 0: [50.0, 44.0, 57.0]}.items():
        for k, fid in enumerate(fids):
            write_rerun(s.folder, n, Rerun(repeat=k, seed=1 + k, state="complete",
                                           metrics={"throughput": 300.0 - n, "fid": fid, "throughput_spread": 0.05}))
    s = Study.load(s.folder)
    c = next(r for r in s.records if r.trial == 2).confirmed
    assert c.figures["fid"].values == [18.0, 26.0, 21.0]
    assert c.figures["fid"].low < 18.0 * 1.1 and c.figures["fid"].high > 26.0 * 0.9  # the seeds' spread, not 0
    assert [r.seed for r in s.folder.reruns(2)] == [1, 2, 3]


def _tied_with_the_baseline(tmp_path):
    """A planted study whose knee (trial 2) and baseline (trial 0), two re-runs each in round 0, are tied within
    the noise on throughput and on FID, so only a cost rule tells them apart."""
    reads = {0: (100.0, 50.0), 1: (90.0, 60.0), 2: (130.0, 20.0), 3: (80.0, 40.0)}
    s = _planted(tmp_path, reads, {})
    for n, runs in {2: [(115.0, 30.0), (125.0, 36.0)], 0: [(100.0, 34.0), (112.0, 38.0)]}.items():
        for k, (thr, fid) in enumerate(runs):
            write_rerun(s.folder, n, Rerun(repeat=k, round=0, state="complete",
                                           metrics={"throughput": thr, "fid": fid, "throughput_spread": 0.05}))
    return s


def test_a_pick_tied_with_the_baseline_by_a_cost_rule_alone_gets_one_more_pass_and_wins_on_better_re_runs(tmp_path):
    """The knee (trial 2) and the baseline, two re-runs each, tied within the noise on throughput and on FID: a
    cost rule (no memory figure: the lower trial number) kept the baseline, the pick of 54% of simulated studies
    with confirmation against 64% without (benchmarks/stability_sim.py, issue 52's ss-holds). Both are re-run once
    more (round 0, repeat 2), and with trial 2's third re-run better the pick is trial 2; one pass only."""
    s = _tied_with_the_baseline(tmp_path)
    s = Study.load(s.folder)
    assert plan_reruns(s, 1) == [2, 0]
    v = decide(s)
    assert v.pick.trial == 0 and sorted(v.tied) == [0, 2] and v.tie_reason == "less memory"
    assert pending(s, 1, 2) == [Run(2, 2, 0), Run(0, 2, 0)]
    write_rerun(s.folder, 2, Rerun(repeat=2, round=0, state="complete",
                                   metrics={"throughput": 120.0, "fid": 32.0, "throughput_spread": 0.05}))
    half = Study.load(s.folder)  # a kill between the pass's two re-runs: the pass goes on whatever it reads now
    assert pending(half, 1, 2) == [Run(0, 2, 0)]
    write_rerun(s.folder, 0, Rerun(repeat=2, round=0, state="complete",
                                   metrics={"throughput": 106.0, "fid": 36.0, "throughput_spread": 0.05}))
    s = Study.load(s.folder)
    v = decide(s)
    assert v.pick.trial == 2 and v.tied == [] and v.ratio is not None and v.ratio.low > 1  # faster beyond the noise
    assert pending(s, 1, 2) == [] and tie_reads(s, 1, 2) == 1  # one pass: TIE_PASSES
    # a later round's baseline re-reads go on after the pass's
    assert moved_round(3, 1, 2, 0, {}, tie_reads(s, 1, 2)) == [(3, 0, 1), (0, 3, 1), (3, 1, 1)]


def test_a_pick_that_quality_tells_from_the_baseline_gets_no_extra_pass(tmp_path):
    reads = {0: (100.0, 50.0), 1: (90.0, 60.0), 2: (130.0, 20.0), 3: (80.0, 40.0)}
    s = _planted(tmp_path, reads, {2: [(100.0, 20.0), (130.0, 21.0)], 0: [(95.0, 44.0), (125.0, 45.0)]})
    v = decide(s)
    assert v.pick.trial == 2 and v.tie_reason == "quality" and pending(s, 1, 2) == []


def test_the_searcher_hands_out_the_tie_pass_and_says_why(tmp_path):
    import io

    from rich.console import Console

    from tuner.cli.progress import SearchView
    from tuner.search._protocol import TrialOrder
    from tuner.search._reruns import RerunSearcher

    s = _tied_with_the_baseline(tmp_path)
    buf = io.StringIO()
    view = SearchView(Console(file=buf, width=300, force_terminal=False), total=4, done=4, objectives=OBJ, params=[])
    searcher = RerunSearcher(tmp_path / "m", 1, 2, 30.0, view=view)
    got = [searcher.suggest(t) for t in ("a", "b")]
    assert [(o.trial, o.repeat, o.round) for o in map(TrialOrder.from_config, got)] == [(2, 2, 0), (0, 2, 0)]
    assert "trials 0, 2 are tied within the noise, and only a cost rule (fewer environment changes, fewer workers, " \
           "less memory) tells them apart: re-running each once more" in buf.getvalue()


# The default study of run-full.json's row 3 (the thirty-fifth session: a 15 s GAN, 12 trials): its search readings
# (throughput, FID) and the planned re-runs of the knee (trial 1) and the baseline. It then spent 6 re-runs beyond
# the planned 4 on a tie pass and two chases, and none of them moved the pick.
DEFAULT_READS = {0: (811.7, 191.0), 1: (1002.8, 71.7), 2: (1212.3, 458.0), 3: (790.1, 582.3), 4: (868.0, 81.4),
                 5: (818.4, 200.6), 6: (812.6, 125.2), 7: (770.3, 197.7), 8: (956.7, 75.45), 9: (630.1, 212.9),
                 10: (787.7, 142.7), 11: (945.1, 435.7)}
DEFAULT_RERUNS = {1: [(1038.6, 70.3), (915.1, 141.5)], 0: [(869.7, 191.4), (924.0, 153.7)]}


def test_a_tie_one_more_pass_could_not_break_gets_no_pass(tmp_path):
    """The knee and the baseline tied within the noise, a cost rule deciding, but their difference so far inside
    the noise that one more re-run each, reading their centres, would leave them tied: no pass (it cost the
    default study 2 re-runs and left the tie as it was). A tie the pass could break still gets it (the test
    above)."""
    s = _planted(tmp_path, DEFAULT_READS, DEFAULT_RERUNS)
    v = decide(s)
    assert sorted(v.tied) == [0, 1] and v.tie_reason == "less memory"
    assert pending(s, 1, 2) == []


def test_a_rival_whose_search_reading_would_not_move_the_pick_is_not_chased(tmp_path):
    """After the tie pass the knee moved to trial 2 (1.49x the baseline in the search, FID 458), beyond where one
    more run of the pick reads. Its search reading, read as a re-run beside the baseline's, would still leave the
    pick where it is, and a fresh reading of a trial selected for its high one is not expected to do better: it is
    not chased, and the verdict says why. A rival whose reading would move the pick is chased (the `far` case
    above)."""
    reruns = {1: [*DEFAULT_RERUNS[1], (852.8, 164.0)], 0: [*DEFAULT_RERUNS[0], (872.1, 165.5)]}
    s = _planted(tmp_path, DEFAULT_READS, reruns)
    assert next_to_confirm(s) == 2  # it ranks higher, beyond one more run of the pick
    assert next_knee(s, 1) is None and pending(s, 1, 2) == []
    assert "trial 2 ranks higher on a single, unconfirmed reading, but that reading as a re-run would still leave " \
           f"trial {decide(s).pick.trial} the pick (so not re-run)" in decide(s).text


def _busy_study(tmp_path, share):
    """The new user's LSTM beside a busy loop: the baseline (trial 0) read 20 samples/s, trial 2 (1 thread,
    PASSIVE: the load's knee) 80, trial 1 (the user's threading, malloc retain) 21 and trial 3 (the user's
    threading) 19; `share` is what other processes took of each trial's CPUs."""
    from tuner.study import RunEnvironment

    folder = StudyFolder(tmp_path / f"busy{share}")
    folder.write_meta(StudyMeta(name="b", objectives=[Objective(metric="throughput", direction="max"),
                                                       Objective(metric="loss", direction="min")],
                                baseline={"trial": 0, "params": {}}))
    load = {"params": {"threads": 1, "omp_wait_policy": "PASSIVE"}}
    for n, thr, loss, config in [(0, 20.0, 5.0, None), (1, 21.0, 4.9, {"params": {"malloc": "retain"}}),
                                 (2, 80.0, 5.1, load), (3, 19.0, 5.2, None)]:
        write_record(folder, TrialRecord(trial=n, state="complete", metrics={"throughput": thr, "loss": loss},
                                         config=config, environment=RunEnvironment(others_share=share)))
    return Study.load(folder), folder


def test_a_busy_study_confirms_the_knee_that_shares_the_users_threading_as_well(tmp_path):
    """Beside a busy loop the phase re-ran the load's pick (trial 2: 1 thread, PASSIVE) and the baseline, while the
    export's pick, held to the user's threading (tuner.analysis.held), stood on one reading. Now the knee of the
    configs sharing the baseline's threading (trial 1) is re-run too; a quiet study plans as before."""
    busy, _ = _busy_study(tmp_path, 0.6)
    assert plan_reruns(busy, 1) == [2, 1, 0]
    quiet, _ = _busy_study(tmp_path, 0.02)
    assert plan_reruns(quiet, 1) == [2, 0]
    assert pairs(pending(busy, 1, 2)) == [(2, 0), (1, 0), (0, 0), (1, 1), (0, 1), (2, 1)]


def test_a_busy_studys_held_pick_stands_on_its_re_runs(tmp_path):
    """Once trial 1's re-runs beat the baseline's, read in the same rounds, the held pick is trial 1 on confirmed
    means; its single reading (1.05x) alone would not have beaten the baseline beyond what the verdict calls noise
    in single readings."""
    s, folder = _busy_study(tmp_path, 0.6)
    v = decide(s)
    assert v.pick.trial == 0 and v.held is not None and v.held.own  # 21 vs 20 once each: the user's own settings
    for n, values in {0: [20.0, 20.4], 1: [26.0, 26.4], 2: [80.0, 81.0]}.items():
        for k, thr in enumerate(values):
            write_rerun(folder, n, Rerun(repeat=k, round=0, state="complete", metrics={"throughput": thr, "loss": 5.0}))
    v = decide(Study.load(folder))
    assert v.pick.trial == 1 and v.held is not None and not v.held.own and v.held.statistic == "confirmed"
    assert "sharing your threading" in v.text


def test_a_tie_a_pass_left_standing_gets_more_passes_only_while_a_speed_re_run_is_an_outlier(tmp_path):
    """After the tie pass the knee and the baseline are still tied by a cost rule. Their re-runs within the usual
    spread: no more passes (the default study's cost stays as it was). The baseline's pass read half its other
    re-runs (tt-gan's baseline read 11.43 s to its target against 5.49 and 5.97 s, and 3 runs a side kept it as
    the pick beside a 1.4x faster trial): passes go on, at most OUTLIER_PASSES more, while the tie stands."""
    import io

    from rich.console import Console

    from tuner.cli.progress import SearchView
    from tuner.search._reruns import RerunSearcher

    def add(study, n, rep, thr, fid=35.0):
        write_rerun(study.folder, n, Rerun(repeat=rep, round=0, state="complete",
                                           metrics={"throughput": thr, "fid": fid, "throughput_spread": 0.05}))

    usual = _tied_with_the_baseline(tmp_path / "usual")
    add(usual, 2, 2, 118.0)
    add(usual, 0, 2, 108.0)
    usual = Study.load(usual.folder)
    assert sorted(decide(usual).tied) == [0, 2] and not outlier(usual, [2, 0])
    assert pending(usual, 1, 2) == []

    odd = _tied_with_the_baseline(tmp_path / "odd")
    add(odd, 2, 2, 118.0)
    add(odd, 0, 2, 55.0)  # the baseline's pass: half its other re-runs
    odd = Study.load(odd.folder)
    assert sorted(decide(odd).tied) == [0, 2] and outlier(odd, [2, 0])
    assert sorted(pending(odd, 1, 2)) == [Run(0, 3, 0), Run(2, 3, 0)]  # rotated, as schedule() rotates
    buf = io.StringIO()
    view = SearchView(Console(file=buf, width=300, force_terminal=False), total=4, done=4, objectives=OBJ, params=[])
    RerunSearcher(odd.folder.path, 1, 2, 30.0, view=view).suggest("a")
    assert "tells them apart (one of their re-runs is an outlier): re-running each once more" in buf.getvalue()
    for rep in range(3, 3 + OUTLIER_PASSES):
        add(odd, 2, rep, 118.0)
        add(odd, 0, rep, 106.0)
        odd = Study.load(odd.folder)
    assert pending(odd, 1, 2) == []  # the bound, whatever the tie reads
    assert len(odd.folder.reruns(0)) == 3 + OUTLIER_PASSES
