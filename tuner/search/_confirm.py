"""The confirmation phase: after the search, re-run the Pareto front (at most K trials) and the baseline R times
each, interleaved, before naming a winner.

A single reading of a config on a shared machine is mostly luck at the 10-20% level, and the search keeps the
luckiest readings (the front is selected for being high). So the front is re-measured, on the same resources as
the search and with quality too, in rounds: every round runs each config once, starting one further along the list
each round, so drift during the phase reaches every config alike. The re-runs' figures (their mean and interval,
tuner.study.stats) then stand for those trials in the front, the knee, the export and the verdict; the search's
own readings are left out of them (selection bias). Each re-run is recorded the moment it ends, beside its trial
(trials/NNNN/confirm/KK.json) and in the Optuna study (user attribute `confirm`), so a kill during the phase
resumes with the re-runs still missing.
"""

from __future__ import annotations

from typing import Any

from tuner.study import Study, TrialRecord
from tuner.study.objective import THROUGHPUT, quality_objective
from tuner.study.pareto import knee_distances, measured, pareto_ranks

# Sized so the phase adds at most about a third to the default study: (K + 1) x R = 4 re-runs after 12 trials
# (K=2 made 6, about half of the search's training again). Larger studies or K, R given on the command line
# confirm more of the front.
DEFAULT_TRIALS = 1  # K: front trials confirmed (the knee; plus the baseline)
DEFAULT_REPEATS = 2  # R: re-runs of each
# When the confirmed figures move the knee to a trial that was never re-run, that trial is confirmed too, and so
# on: at most this many trials beyond the K planned ones (K + 3 knees). Past the bound the export takes the best
# confirmed trial and its verdict says a higher-ranked single reading was left unconfirmed.
MAX_EXTRA = 3


def plan_reruns(study: Study, k: int) -> list[int]:
    """The trials to confirm, chosen on the search's own readings: up to k front trials (the knee first, then the
    fastest, then the best quality, then the rest nearest the knee), and the baseline."""
    if k <= 0:
        return []
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
            if r.trial not in chosen and len(chosen) < k:
                chosen.append(r.trial)
    baseline = study.baseline_trial
    if baseline is not None and baseline not in chosen and any(r.trial == baseline and r.complete
                                                               for r in study.records):
        chosen.append(baseline)
    return chosen


def schedule(trials: list[int], repeats: int, done: dict[int, set[int]]) -> list[tuple[int, int]]:
    """(trial, repeat) pairs in run order: round r runs every trial once, the list rotated by r; pairs already
    recorded (a resumed phase) are left out."""
    out: list[tuple[int, int]] = []
    n = len(trials)
    for r in range(repeats):
        for t in (trials[r % n:] + trials[: r % n]) if n else []:
            if r not in done.get(t, set()):
                out.append((t, r))
    return out


def recorded(study: Study, trials: list[int]) -> dict[int, set[int]]:
    return {t: {rr.repeat for rr in study.folder.reruns(t)} for t in trials}


def confirm_set(study: Study, k: int) -> list[int]:
    """The planned trials, then every trial re-run since because the knee moved to it (by number)."""
    if k <= 0:
        return []
    planned = plan_reruns(study, k)
    return planned + sorted(r.trial for r in study.records if r.confirmed is not None and r.trial not in planned)


def pending(study: Study, k: int, repeats: int) -> list[tuple[int, int]]:
    trials = confirm_set(study, k)
    return schedule(trials, repeats, recorded(study, trials))


def next_knee(study: Study, k: int) -> int | None:
    """After the planned re-runs: the trial the knee moved to, if it was never re-run and the bound (MAX_EXTRA
    trials beyond the K planned) leaves room; None when the knee stands on confirmed figures."""
    from tuner.study.verdict import next_to_confirm

    if k <= 0:
        return None
    extra = len(confirm_set(study, k)) - len(plan_reruns(study, k))
    return next_to_confirm(study) if extra < MAX_EXTRA else None


def rerun_configs(study: Study, pairs: list[tuple[int, int]], wall_limit_s: float,
                  keys: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The configs the re-runs' Tune trials get: each trial's own sampled params, its number and the repeat, and
    `keys` (the study's budget keys: tuner.search._trial.budget_keys)."""
    from tuner.search._trial import REPEAT_KEY, TRIAL_KEY, WALL_KEY

    by_number: dict[int, TrialRecord] = {r.trial: r for r in study.records}
    return [{**by_number[t].params, TRIAL_KEY: t, REPEAT_KEY: rep, WALL_KEY: wall_limit_s, **(keys or {})}
            for t, rep in pairs]


__all__ = ["DEFAULT_REPEATS", "DEFAULT_TRIALS", "MAX_EXTRA", "THROUGHPUT", "confirm_set", "next_knee", "pending",
           "plan_reruns", "recorded", "rerun_configs", "schedule"]
