"""The one adapter between tuner's schedulers (tuner.schedule, Ray-free) and Ray Tune.

Each Tune result becomes a `Progress` (`Progress.of` the report tuner.search._protocol reads from it: a window, a rung,
the final one) and the scheduler's `Decision` becomes Tune's CONTINUE / PAUSE / STOP. Trials run in submission order (FIFO). Besides
deciding, the adapter gives each trial the ladder its scheduler chose for it (`ladder`, set in the trial's order
before it starts) and, for a trial it stopped with a state of its own (the race's `not reached`), makes that
trial's final report: Ray calls the scheduler's on_trial_complete first, with the trial whose last result the
searcher and the recorder then read, so the record is written by the one writer as any other trial's.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from tuner.schedule import Decision, Progress, Scheduler
from tuner.search._protocol import FinalReport, WindowReport, from_tune, order_of, to_tune
from tuner.study import Objective, TrialRecord

_TUNE = {"continue": TrialScheduler.CONTINUE, "pause": TrialScheduler.PAUSE, "stop": TrialScheduler.STOP}


class TuneScheduler(FIFOScheduler):
    """A Ray Tune scheduler that asks `scheduler.decide` about every report of every trial."""

    _supports_buffered_results = False  # decide on each report as it arrives, never on a batch of them

    def __init__(self, scheduler: Scheduler, objectives: list[Objective]) -> None:
        super().__init__()
        self.scheduler = scheduler
        self.objectives = list(objectives)
        self.stopped: dict[str, tuple[Decision, dict[str, Any]]] = {}  # trial key -> the stop and its last result

    def progress(self, trial: Any, result: dict[str, Any]) -> Progress | None:
        """The report a Tune result carries, as the scheduler reads it (None: not a trial's report)."""
        return Progress.of(_key(trial), from_tune(result), self.objectives)

    # Ray Tune's side ------------------------------------------------------------------------------------------

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """The objectives are the study's own; a single Tune metric would make the study single-objective."""
        return True

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        """The trial's own ladder, when its scheduler gives it one (else the rungs its order already holds)."""
        super().on_trial_add(tune_controller, trial)
        order = order_of(trial.config)
        if order is None or order.rerun:
            return
        ladder = self.scheduler.ladder(str(order.trial))
        if ladder is not None:
            limits = dataclasses.replace(order.limits, rungs=tuple(float(b) for b in ladder))
            trial.config.update(dataclasses.replace(order, limits=limits).to_config())

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        progress = self.progress(trial, result)
        if progress is None or _is_rerun(trial):  # a confirmation re-run trains its whole budget
            return TrialScheduler.CONTINUE
        decision = self.scheduler.decide(progress)
        if decision.stops:
            self.stopped[progress.trial] = (decision, dict(result))
        return _TUNE[decision.action]

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict) -> None:
        """A trial this scheduler stopped: a DDP trial's workers go back (search/_ddp.py) and, when its decision
        names a state, it gets its final report here (see the module's docstring)."""
        super().on_trial_complete(tune_controller, trial, result)
        stop = self.stopped.get(_key(trial))
        if stop is None:  # it ended on its own: its final report already reached `decide` as a result
            return
        from tuner.search._ddp import release_workers

        release_workers(result)
        decision, last = stop
        if decision.ends_as is not None and getattr(trial, "last_result", None) is not None:
            trial.last_result.update(self.final_report(trial, decision, last))

    def final_report(self, trial: Any, decision: Decision, last: dict[str, Any]) -> dict[str, Any]:
        """The final report of a trial this scheduler stopped with a state of its own: what its last window
        measured, no objective values and the reason, marked `stopped` so Optuna is told PRUNED (issue 51: told as
        infeasible, a stopped trial steered TPE away from its region, which it had left only for being slower
        than the best so far: a pick of 3.72 s against FIFO's 2.47 s)."""
        from tuner.search._outcome import penalty

        order = order_of(trial.config)
        window = from_tune(last)
        metrics: dict[str, Any] = {}
        if isinstance(window, WindowReport):
            metrics = {k: v for k, v in (("throughput", window.throughput), ("samples", window.samples),
                                         ("train_seconds", window.train_seconds)) if v is not None}
        record = TrialRecord(trial=order.trial if order is not None else -1, state=decision.ends_as,  # type: ignore[arg-type]
                             error=decision.reason, params=order.searched if order is not None else {},
                             wall_limit_s=order.limits.wall_limit_s if order is not None else None, metrics=metrics)
        return to_tune(FinalReport(values={o.metric: penalty(o) for o in self.objectives}, feasible=False,
                                   record=record, stopped=True))

    def debug_string(self) -> str:
        return f"{type(self.scheduler).__name__}: {len(self.stopped)} trial(s) stopped."

    def save(self, checkpoint_path: str) -> None:
        state = getattr(self.scheduler, "state", None)
        Path(checkpoint_path).write_text(json.dumps(state() if callable(state) else {}))

    def restore(self, checkpoint_path: str) -> None:
        restore = getattr(self.scheduler, "restore", None)
        if callable(restore):
            restore(checkpoint_path)


def _key(trial: Any) -> str:
    """A Tune trial's key here: tuner's trial number (its TrialOrder) as text, else (a re-run, or a config tuner
    did not make) Ray's trial id."""
    order = order_of(trial.config)
    return str(order.trial) if order is not None and not order.rerun else str(trial.trial_id)


def _is_rerun(trial: Any) -> bool:
    order = order_of(trial.config)
    return order is not None and order.rerun


__all__ = ["TuneScheduler"]
