"""The confirmation phase: after the search, re-run the Pareto front (at most K trials) and the baseline R times
each, interleaved, before naming a winner.

A single reading of a config on a shared machine is mostly luck at the 10-20% level, and the search keeps the
luckiest readings (the front is selected for being high). So the front is re-measured, on the same resources as the
search and with quality too, in rounds: every round runs each config once, starting one further along the list each
round, so drift during the phase reaches every config alike. A later round (the confirmed figures moved the knee to
a trial never re-run) re-runs the new pick once with the baseline read beside it (the screen, judged on those two
readings of one round); only if that re-run holds it as the pick does the round go on, re-reading the baseline
between the new pick's re-runs, and the verdict compares the two on the readings of that round: across rounds the
machine's drift alone (re-runs of one config read 21-22 and then 29-33 samples/s, minutes apart) made identical
configs look 1.4x apart. The re-runs' figures (their mean and interval, tuner.analysis.stats)
then stand for those trials in the front, the knee, the export and the verdict; the search's own readings are left
out of them (selection bias). Repeat r of every config trains with its own seed (rerun_seed: the trial's + 1 + r),
so seed-to-seed variation is in the intervals too: one seed re-run back to back read 5-8x narrower (issue 34).
Each re-run is recorded the moment it ends, beside its trial
(trials/NNNN/confirm/KK.json) and in the Optuna study (user attribute `confirm`), so a kill during the phase
resumes with the re-runs still missing.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tuner.study import THROUGHPUT, TrialRecord, quality_objective
from tuner.analysis import Study, knee_distances, measured, pareto_ranks, pass_could_tell

# Sized so the phase adds at most about a third to the default study: (K + 1) x R = 4 re-runs after 12 trials
# (K=2 made 6, about half of the search's training again). Larger studies or K, R given on the command line
# confirm more of the front.
DEFAULT_TRIALS = 1  # K: front trials confirmed (the knee; plus the baseline)
DEFAULT_TARGET_REPEATS = 3  # R where the study has a target: a confirmed time to target stands on its re-runs
# alone (the search's reading was selected), and 2 gave its interval one degree of freedom (0.34-204 s); 3 give two
DEFAULT_REPEATS = 2  # R: re-runs of each
# When the confirmed figures move the knee to a trial that was never re-run, that trial is confirmed too, and so
# on: at most this many trials beyond the K planned ones (K + 3 knees). Past the bound the export takes the best
# confirmed trial and its verdict says a higher-ranked single reading was left unconfirmed.
MAX_EXTRA = 3


class Run(NamedTuple):
    """One re-run to do: the trial, its repeat number and the round it belongs to (0: the planned trials; 1, 2,
    ...: each moved pick's, with the baseline read again beside it)."""

    trial: int
    repeat: int
    round: int = 0


def plan_reruns(study: Study, k: int) -> list[int]:
    """The trials to confirm, chosen on the search's own readings: up to k front trials (the knee first, then the
    fastest, then the best quality, then the rest nearest the knee), and the baseline. The baseline on the front
    takes none of the k: a study under --study-seconds 200 whose knee was the baseline confirmed it alone, and its
    verdict kept it as the pick beside a 1.37x faster trial it could not weigh (one config's two re-runs: a
    1-degree-of-freedom spread, an interval of 0.76-1.32x of the mean). On a busy study the knee of the configs that
    share the user's threading comes too, beyond the k (sharing_knee): the export's pick is held to those
    (tuner.analysis.held), and beside a busy loop the phase re-ran only the load's pick (1 thread, PASSIVE) while the
    held pick stood on one reading."""
    if k <= 0:
        return []
    baseline = study.baseline_trial
    objectives = study.objectives
    ranks = pareto_ranks(study.records, objectives, measured)
    front = [r for r in study.records if ranks.get(r.trial) == 0]
    chosen: list[int] = []
    if front:
        ranked = [r for r in study.records if r.trial in ranks]
        dist = knee_distances(front, objectives, measured, scale=ranked)
        by_knee = sorted(front, key=lambda r: (round(dist[r.trial], 12), -(r.throughput or 0.0), r.trial))
        fastest = max(front, key=lambda r: (r.throughput or 0.0, -r.trial))
        order = [by_knee[0], fastest]
        quality = quality_objective(objectives)
        if quality is not None:
            order.append(max(front, key=lambda r: (quality.goodness(r.value(quality.metric) or float("-inf")),
                                                   -r.trial)))
        order += by_knee[1:]
        for r in order:
            if r.trial not in chosen and len([c for c in chosen if c != baseline]) < k:
                chosen.append(r.trial)
    if (held := sharing_knee(study)) is not None and held not in chosen:
        chosen.append(held)
    if baseline is not None and baseline not in chosen and any(r.trial == baseline and r.complete
                                                               for r in study.records):
        chosen.append(baseline)
    return chosen


def sharing_knee(study: Study) -> int | None:
    """On a study whose search readings say the machine was busy (tuner.analysis.busy; the trials' own readings, so
    the plan stays what it was once re-runs are recorded): the knee, on the search's readings, of the trials other
    than the baseline that share its threads and wait policy (tuner.analysis.held.load_knobs_of). None: not busy,
    no baseline, or no such trial measured."""
    from tuner.analysis import busy_runs, load_knobs_of

    baseline = next((r for r in study.records if r.trial == study.baseline_trial and r.complete), None)
    if baseline is None or not busy_runs(study.records):
        return None
    own = load_knobs_of(baseline)
    same = [r for r in study.records if r.trial != baseline.trial and load_knobs_of(r) == own]
    ranks = pareto_ranks(same, study.objectives, measured)
    front = [r for r in same if ranks.get(r.trial) == 0]
    if not front:
        return None
    dist = knee_distances(front, study.objectives, measured, scale=[r for r in same if r.trial in ranks])
    return min(front, key=lambda r: (round(dist[r.trial], 12), -(r.throughput or 0.0), r.trial)).trial


def schedule(trials: list[int], repeats: int, done: dict[int, set[int]], round_: int = 0,
             first: dict[int, int] | None = None) -> list[Run]:
    """Re-runs in run order: each pass runs every trial once, the list rotated by one each pass; repeats already
    recorded (a resumed phase) are left out. `first`: a trial's first repeat number in this round (the baseline's
    re-reads in a later round go on from its earlier ones)."""
    out: list[Run] = []
    n = len(trials)
    for r in range(repeats):
        for t in (trials[r % n:] + trials[: r % n]) if n else []:
            rep = (first or {}).get(t, 0) + r
            if rep not in done.get(t, set()):
                out.append(Run(t, rep, round_))
    return out


def moved_round(moved: int, round_: int, repeats: int, baseline: int | None,
                done: dict[int, set[int]], extra: int = 0) -> list[Run]:
    """A moved pick's round: its R re-runs with the baseline read again between each two of them (R - 1 times,
    repeats round_ x R on), M B M: a drift that is linear over the round weighs on both alike, so the verdict can
    compare the two on readings taken side by side, for R - 1 more re-runs rather than R. With one re-run each
    (--repeats 1) the baseline is read once after it, M B: without it no baseline was read in the round, and a
    1.0x trial re-run in a round 2x faster than the baseline's read "2.00x the baseline". `extra`: the baseline's
    re-runs in round 0 beyond the planned `repeats` (the tie passes, tie_pass(); tie_reads()), which the
    baseline's numbers in later rounds go on from."""
    out: list[Run] = []
    for i in range(repeats):
        out.append(Run(moved, i, round_))
        if baseline is not None and baseline != moved and (i < repeats - 1 or repeats == 1):
            out.append(Run(baseline, round_ * repeats + i + extra, round_))
    return [run for run in out if run.repeat not in done.get(run.trial, set())]


def screen(runs: list[Run], moved: int) -> list[Run]:
    """The first runs of a moved pick's round (moved_round, nothing left out): its first re-run and the baseline's
    reading beside it (M B), or M alone in a study without a baseline. The check whether the pick holds compares
    inside that round: judged against the baseline's earlier round, a 1.0x trial screened in a round the machine
    ran 2x faster held as "2x the baseline", and a real winner screened in a round 2x slower was dropped."""
    return runs[:2] if len(runs) > 1 and runs[1].trial != moved else runs[:1]


def recorded(study: Study, trials: list[int]) -> dict[int, set[int]]:
    return {t: {rr.repeat for rr in study.folder.reruns(t)} for t in trials}


def confirm_set(study: Study, k: int) -> list[int]:
    """The planned trials, then every trial re-run since because the knee moved to it (by number)."""
    if k <= 0:
        return []
    planned = plan_reruns(study, k)
    return planned + sorted(r.trial for r in study.records if r.confirmed is not None and r.trial not in planned)


def moved(study: Study, k: int) -> list[tuple[int, int | None]]:
    """The trials re-run because the knee moved to them, with their round (None: confirmed by an older tuner
    that did not record rounds), in round order."""
    planned = set(plan_reruns(study, k))
    extra = [(r.trial, rounds_of(study, r.trial)) for r in study.records
             if r.confirmed is not None and r.trial not in planned]
    return sorted(extra, key=lambda e: (e[1] is None, e[1] or 0, e[0]))


def rounds_of(study: Study, trial: int) -> int | None:
    rounds = [rr.round for rr in study.folder.reruns(trial) if rr.round is not None]
    return min(rounds) if rounds else None


def confirm_baseline(study: Study, k: int) -> int | None:
    """The baseline, when the confirmation re-runs it (a later round reads it again beside its pick)."""
    baseline = study.baseline_trial
    return baseline if baseline is not None and baseline in plan_reruns(study, k) else None


def next_round(study: Study, k: int) -> int:
    return 1 + max((r for _, r in moved(study, k) if r is not None), default=0)


def pending(study: Study, k: int, repeats: int) -> list[Run]:
    trials = confirm_set(study, k)
    done = recorded(study, trials)
    planned = plan_reruns(study, k)
    out = schedule(planned, repeats, done)
    if not out and repeats > 0:
        out = tie_pass(study, k, repeats, planned, done)
    baseline = confirm_baseline(study, k)
    for trial, round_ in moved(study, k):
        if round_ is None:
            out += schedule([trial], repeats, done)
            continue
        whole = moved_round(trial, round_, repeats, baseline, {}, tie_reads(study, k, repeats))
        first = screen(whole, trial)
        left = [run for run in first if run.repeat not in done.get(run.trial, set())]
        if left:  # the screen is read whole (a kill between its two runs) before it is judged
            out += left
            continue
        rest = [run for run in whole[len(first):] if run.repeat not in done.get(run.trial, set())]
        out += rest if rest and holds(study, trial) else []
    return out


# Ties the planned re-runs leave to the cost rules (fewer workers, less memory; none measured: the lower trial
# number, the baseline) get one more pass of the planned trials: at the default K=1, R=2 the pick and the baseline
# were tied on a 2-degree-of-freedom spread (t = 4.3) in 78% of simulated studies, and the cost rule then kept the
# baseline where the knee of the truths was another trial (benchmarks/stability_sim.py, issue 52's ss-holds).
TIE_PASSES = 1
# Beyond them, at most this many more passes while the tie stands and a planned trial's speed re-runs hold an
# outlier (one reading OUTLIER_RATIO or more from the median of its config's others): tt-gan's baseline read 11.43 s
# to its target against 5.49 and 5.97 s (its FID crossed the target on a plateau), so 3 runs a side could not tell
# a pick 1.4x faster from it, and the cost rule kept the baseline (lab notes, fifty-third session). Run-to-run
# noise is 8-20% here (tuner's notes on measurement), so a 1.5x excursion is the run, not the config.
OUTLIER_PASSES = 2
OUTLIER_RATIO = 1.5
_SPEED = (THROUGHPUT, "time_to_target")  # the figures a run's moment (load, a crossing on a plateau) moves


def tie_pass(study: Study, k: int, repeats: int, planned: list[int] | None = None,
             done: dict[int, set[int]] | None = None) -> list[Run]:
    """One more re-run of every planned trial (round 0, repeat `repeats` on, rotated as schedule() rotates), when
    their planned re-runs are all read and the verdict's pick is tied (tuner.analysis.ties) with other planned
    trials that neither throughput nor quality tells apart, so a cost rule settled it, not a measurement: the pass
    gives the ratio's interval and the quality test more degrees of freedom (2 to 4 at the default) before the
    pick is named. At most TIE_PASSES passes (OUTLIER_PASSES more while a planned trial's speed re-runs hold an
    outlier, outlier(): the what-if below reads the spread that the outlier widens, the reading in doubt), none
    once a moved pick's round has begun (its re-runs are read beside the baseline of its own round), and none
    where the observed difference would stay within the noise even with the pass's re-runs read at each trial's
    centre (tuner.analysis.whatif.pass_could_tell: a tie the pass could not be expected to break). Resumable: once
    any planned trial has a pass's repeat recorded, the pass's other re-runs are pending whatever the verdict reads
    now."""
    if planned is None:
        planned = plan_reruns(study, k)
    if done is None:
        done = recorded(study, planned)
    if len(planned) < 2 or repeats <= 0:
        return []
    first = {t: {rr.repeat for rr in study.folder.reruns(t) if (rr.round or 0) == 0} for t in planned}
    for p in range(TIE_PASSES + OUTLIER_PASSES):
        rep = repeats + p
        started = [t for t in planned if rep in first[t]]
        if len(started) == len(planned):
            continue  # this pass is read whole: the next one, if the tie still stands
        if not started and (moved(study, k) or not _tied_by_cost(study, planned)
                            or (not outlier(study, planned) if p >= TIE_PASSES else
                                not pass_could_tell(study, planned, rep, lambda s: _tied_by_cost(s, planned)))):
            return []
        return [run for run in schedule(planned, rep + 1, done) if run.repeat == rep]
    return []


def outlier(study: Study, planned: list[int]) -> bool:
    """Whether a planned trial's round-0 re-runs (3 or more) hold a speed reading (throughput, time to target: the
    study's objectives among them) OUTLIER_RATIO or more from the median of its config's other readings."""
    from statistics import median

    keys = [o.metric for o in study.objectives if o.metric in _SPEED]
    for trial in planned:
        runs = [rr for rr in study.folder.reruns(trial) if rr.complete and (rr.round or 0) == 0]
        for key in keys:
            values = [float(v) for rr in runs if isinstance(v := rr.metrics.get(key), (int, float)) and v > 0]
            for i, v in enumerate(values):
                others = values[:i] + values[i + 1:]
                if len(others) >= 2 and max(v / median(others), median(others) / v) >= OUTLIER_RATIO:
                    return True
    return False


def tie_reads(study: Study, k: int, repeats: int) -> int:
    """The confirmed baseline's round-0 re-runs numbered from `repeats` on (the tie pass's, tie_pass(); or a
    larger --repeats' before a resume with a smaller one): a moved pick's round numbers the baseline's re-reads
    after them (moved_round's `extra`), so none is written over a recorded one."""
    baseline = confirm_baseline(study, k)
    if baseline is None:
        return 0
    first = [rr.repeat for rr in study.folder.reruns(baseline) if (rr.round or 0) == 0]
    return max(0, max(first, default=-1) + 1 - repeats)


def _tied_by_cost(study: Study, planned: list[int]) -> bool:
    """Whether the verdict's pick (as the chase reads it, for_load=False) is tied with other planned trials and the
    tie was settled by a cost rule (fewer environment changes, fewer workers, less memory), neither throughput nor
    quality telling them apart."""
    from tuner.errors import StudyError
    from tuner.analysis import decide

    try:
        verdict = decide(study, for_load=False)
    except StudyError:
        return False
    return verdict.tie_reason in ("fewer changes to your environment", "fewer workers", "less memory") \
        and len(verdict.tied) > 1 \
        and set(verdict.tied) <= set(planned)


def holds(study: Study, trial: int) -> bool:
    """Whether a moved pick, on the re-runs it has (its first one: the screen), is still what the export picks. A
    round for a moved pick starts with one re-run of it and the baseline read beside it (screen()), so the verdict
    ranks that re-run by its ratio to the baseline of its own round (tuner.analysis.rounds.in_baseline_units); only
    if that holds it as the pick do its other re-runs (and the baseline's between them) follow. The search's single
    readings it was chased for are selected for being good, and most did not hold (a 15 s GAN's FID read 214 in the
    search, 416-476 again): one fresh reading (and the baseline's) ends such a chase for 2 re-runs instead of
    2R - 1."""
    from tuner.errors import StudyError
    from tuner.analysis import decide

    try:
        return decide(study, for_load=False).pick.trial == trial  # the chase measures the study's own ranking
    except StudyError:
        return False


def next_knee(study: Study, k: int) -> int | None:
    """After the planned re-runs: the trial the knee moved to, if it was never re-run, the bound (MAX_EXTRA
    trials beyond the K planned) leaves room and its search reading, read as a re-run beside the baseline's, would
    make it the pick (tuner.analysis.whatif.chase_could_move: the default study's 15 s GAN chased two trials that
    could not, 4 of its 10 re-runs); None when the knee stands on confirmed figures."""
    from tuner.analysis import chase_could_move, decide, next_to_confirm

    if k <= 0:
        return None
    extra = len(confirm_set(study, k)) - len(plan_reruns(study, k))
    rival = next_to_confirm(study) if extra < MAX_EXTRA else None
    if rival is None or not chase_could_move(study, study.trial(rival), decide):
        return None  # even its search reading as a re-run would not move the pick (tuner.analysis.whatif)
    return rival


def trial_seed(record: TrialRecord) -> int:
    """The training seed a trial ran with (its config's params.seed; 0, the default, where it kept none)."""
    seed = ((record.config or {}).get("params") or {}).get("seed")
    return int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else 0


def rerun_seed(seed: int, repeat: int) -> int:
    """Repeat r of a trial trains with seed + 1 + r (the trial itself keeps `seed`): each run another seed, so the
    confirmed interval holds seed-to-seed variation, not only the machine's (one seed read 5-8x narrower, issue 34);
    and every confirmed config's repeat r shares one seed, so configs are compared on the same draws."""
    return int(seed) + 1 + int(repeat)


def rerun_configs(study: Study, runs: list[Run], wall_limit_s: float,
                  limits: Any = None) -> list[dict[str, Any]]:
    """The Tune configs of the re-runs' trials: each a TrialOrder of the trial's own sampled params, its number,
    the repeat, the round and the repeat's own seed (rerun_seed), under the wall cap and the study's `limits`
    (tuner.search._trial.budget_limits)."""
    from dataclasses import replace

    from tuner.search._protocol import TrialLimits, TrialOrder

    by_number: dict[int, TrialRecord] = {r.trial: r for r in study.records}
    limits = replace(limits or TrialLimits(), wall_limit_s=wall_limit_s)
    return [TrialOrder(trial=run.trial, params=dict(by_number[run.trial].params), limits=limits, repeat=run.repeat,
                       round=run.round, seed=rerun_seed(trial_seed(by_number[run.trial]), run.repeat)).to_config()
            for run in runs]


__all__ = [
    "DEFAULT_REPEATS", "DEFAULT_TARGET_REPEATS", "DEFAULT_TRIALS", "MAX_EXTRA", "THROUGHPUT", "Run",
    "confirm_baseline", "confirm_set", "holds", "moved", "moved_round", "next_knee", "next_round", "pending",
    "plan_reruns", "recorded", "rerun_configs", "rerun_seed", "schedule", "screen", "sharing_knee", "TIE_PASSES",
    "OUTLIER_PASSES", "OUTLIER_RATIO", "outlier", "tie_pass", "tie_reads", "trial_seed",
]
