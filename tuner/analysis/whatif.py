"""What a follow-up re-run could change: the confirmation's extra re-runs (a moved pick's chase, a tie pass) are
spent only where a reading they could plausibly bring moves the verdict.

Both ask the verdict itself (tuner.analysis.verdict.decide) on the study as it would read with the re-runs added:

- **A chase** (the knee moved to a trial never re-run): its search reading, and the baseline's beside it, read as
  if they were the chase's first round. The search's readings are selected for being high, so where even that
  reading would not make the rival the pick (tied with it within the noise, a cost rule keeping the pick, or
  behind it on the knee), a fresh reading is not expected to: the default study's 15 s GAN chased two such trials
  for 4 of its 10 re-runs, and neither held (benchmarks/results/run-full.json row 3, the thirty-fifth session).
- **A tie pass** (the pick tied with other planned trials, a cost rule deciding): one more re-run of each read at
  its confirmed centre. Where the observed difference would stay within the noise even so, the pass cannot be
  expected to tell them apart. The centred re-runs add no spread, so the check errs towards running the pass.

A what-if study is built in memory from the folder's re-runs; nothing is written.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from tuner.study import TO_TARGET, Rerun, TrialRecord, TrialResult
from tuner.analysis.stats import confirmed
from tuner.analysis.study import Study

# Set while a what-if study is judged: its verdict does not ask what-ifs of its own (each would confirm one more
# trial in memory, a nesting as deep as the study has trials never re-run).
_JUDGING = contextvars.ContextVar("tuner_whatif_judging", default=False)


def judging() -> bool:
    """Whether a what-if study is being judged now (its verdict's notes need no what-if of their own)."""
    return _JUDGING.get()


def with_reruns(study: Study, extra: dict[int, list[Rerun]]) -> Study:
    """`study` as it would read with `extra` re-runs recorded beside each trial's own (in memory)."""
    meta_target = getattr(study.meta, "target", None)
    cap = meta_target.get("cap_seconds") if isinstance(meta_target, dict) else None
    records = []
    for record in study.records:
        copy = record.model_copy(deep=True)
        if record.trial in extra:
            suspect = record.confirmed.suspect if record.confirmed is not None else None
            copy.confirmed = confirmed([*study.folder.reruns(record.trial), *extra[record.trial]], cap)
            copy.confirmed.suspect = suspect
        records.append(copy)
    return Study.judged(study.folder, study.meta, records, strays=study.strays)


def as_rerun(record: TrialResult, repeat: int, round_: int, metrics: dict[str, Any] | None = None) -> Rerun:
    """A re-run that reads what `record` read (or `metrics` over it), numbered `repeat` in round `round_`."""
    fields = {k: getattr(record, k) for k in TrialResult.model_fields if k not in ("metrics", "state")}
    return Rerun(**fields, metrics={**record.metrics, **(metrics or {})}, repeat=repeat, round=round_,
                 state="complete")


def _pick(study: Study, decide: Callable[..., Any]) -> Any:
    from tuner.errors import StudyError

    token = _JUDGING.set(True)
    try:
        return decide(study, for_load=False)  # as the chase and the tie pass read it (tuner.search._confirm)
    except StudyError:
        return None
    finally:
        _JUDGING.reset(token)


def chase_could_move(study: Study, rival: TrialRecord, decide: Callable[..., Any]) -> bool:
    """Whether the rival would be the pick (by `decide`, tuner.analysis.verdict's, passed in: the verdict asks this
    too) were its search reading (and the baseline's) its first re-run round: False where even that reading leaves
    the pick where it is, so a chase is not expected to move it. True where it cannot be told (no baseline re-runs,
    a figure to target, no verdict)."""
    baseline = next((r for r in study.records if r.trial == study.baseline_trial), None)
    if baseline is None or baseline.confirmed is None or rival.trial == baseline.trial or not rival.complete \
            or any(o.metric in TO_TARGET for o in study.objectives):
        return True
    round_ = 1 + max((r or 0 for rec in study.records if rec.confirmed is not None for r in rec.confirmed.rounds),
                     default=0)
    base_repeat = 1 + max((rr.repeat for rr in study.folder.reruns(baseline.trial)), default=-1)
    what_if = with_reruns(study, {rival.trial: [as_rerun(rival, 0, round_)],
                                  baseline.trial: [as_rerun(baseline, base_repeat, round_)]})
    verdict = _pick(what_if, decide)
    return verdict is None or verdict.pick.trial == rival.trial


def pass_could_tell(study: Study, planned: list[int], repeat: int, still_tied: Any) -> bool:
    """Whether one more re-run of each planned trial, each reading its confirmed centre, would leave the verdict
    no longer tied by a cost rule (`still_tied(study)`, the tie pass's own test). True where it cannot be told (a
    trial with no confirmed figure, a figure to target)."""
    extra: dict[int, list[Rerun]] = {}
    for trial in planned:
        record = next((r for r in study.records if r.trial == trial), None)
        if record is None or record.confirmed is None or not record.confirmed.figures \
                or any(f.runs is not None for f in record.confirmed.figures.values()):
            return True
        last = [rr for rr in study.folder.reruns(trial) if rr.complete]
        if not last:
            return True
        centres = {key: f.centre for key, f in record.confirmed.figures.items()}
        extra[trial] = [as_rerun(last[-1], repeat, 0, centres)]
    what_if = with_reruns(study, extra)
    token = _JUDGING.set(True)
    try:
        return not still_tied(what_if)
    finally:
        _JUDGING.reset(token)


__all__ = ["as_rerun", "chase_could_move", "judging", "pass_could_tell", "with_reruns"]
