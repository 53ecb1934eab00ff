"""The driver's end of a trial its own process cannot end (issue 37): a user's loss() blocked in a C call or a
`time.sleep`, a compile stuck in native code. Neither the loop's wall cap (checked between steps) nor a watchdog
thread in the trial can interrupt those, and a Ray trial runs in a thread where no signal reaches it.

So the trial tells its driver, as each phase starts, how long it may take from then (a phase report:
tuner.train.reports.PhaseReport; "compile": the compile limit, "train": the wall cap and what follows it), and the
driver, which Tune steps about ten times a second, kills the trial's process once that is past: the trial is
recorded `error` (`compile_timeout` for a compile) with a reason naming the limit, and the study goes on. With
--study-seconds the driver also ends every running trial when the allowance and half its margin are spent, so the
study itself ends within S plus its margin (tuner.search._allowance) whatever a trial does.

A trial's set-up before its first phase report (its process, the workload's factory and datasets) is bounded in
the trial itself (tuner.train.deadline: setup_timeout_s, then the process ends), and a set-up timeout stops the
study from starting the same hang again (tuner.search._searcher).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from ray.tune import Callback

from tuner.search._allowance import margin
from tuner.search._protocol import PhaseReport, from_tune, order_of

# With --study-seconds S, running trials are ended at S plus this share of the margin: the rest is for Ray's stop
# and the study's last writes.
ALLOWANCE_KILL_SHARE = 0.5


@dataclass(frozen=True)
class Ended:
    """Why the driver ended a trial's process: the trial's state and its one-line reason."""

    state: str
    reason: str


@dataclass
class _Phase:
    name: str
    limit_s: float
    deadline: float


class TrialWatch(Callback):
    """Ends a trial's process past the limit of its phase, or when the study's allowance is spent; the recorders
    ask `ended(trial)` for the state and reason of a trial it ended."""

    def __init__(self, allowance: Any = None, clock: Callable[[], float] = time.perf_counter) -> None:
        self.allowance = allowance  # tuner.search._allowance.Allowance, or None
        self.clock = clock
        self._phases: dict[str, _Phase] = {}
        self._ended: dict[str, Ended] = {}

    def __getstate__(self) -> dict[str, Any]:  # Ray pickles the run config into the study folder
        return {**self.__dict__, "allowance": None, "_phases": {}, "_ended": {}}

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        report = from_tune(result)
        if isinstance(report, PhaseReport):
            self._phases[trial.trial_id] = _Phase(report.phase, report.limit_s, self.clock() + report.limit_s)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._phases.pop(trial.trial_id, None)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._phases.pop(trial.trial_id, None)

    def ended(self, trial: Any) -> Ended | None:
        """The state and reason of a trial this watch ended (once), else None."""
        return self._ended.pop(trial.trial_id, None)

    def spent(self) -> bool:
        """Whether the study's allowance (with its share of the margin) is spent."""
        a = self.allowance
        return a is not None and self.clock() >= a.deadline + ALLOWANCE_KILL_SHARE * margin(a.seconds)

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        spent = self.spent()
        if spent:
            self.allowance.ended = True  # no trial starts after this
        now = self.clock()
        for trial in trials:
            if trial.status != "RUNNING" or trial.trial_id in self._ended:
                continue
            phase = self._phases.get(trial.trial_id)
            if spent:
                a = self.allowance
                why = Ended("error", f"--study-seconds {a.seconds:g} (+{margin(a.seconds):.0f} s margin) ran out while "
                                     f"this trial ran: its process was ended")
            elif phase is not None and now >= phase.deadline:
                why = self._past(trial, phase)
            else:
                continue
            if _kill(trial):
                self._ended[trial.trial_id] = why
                self._phases.pop(trial.trial_id, None)

    @staticmethod
    def _past(trial: Any, phase: _Phase) -> Ended:
        if phase.name == "compile":
            return Ended("compile_timeout", f"torch.compile's first steps did not finish within {phase.limit_s:.0f} s "
                                            f"(the compile limit and the time to stop them): the trial's process was "
                                            f"ended")
        order = order_of(trial.config)
        wall = order.limits.wall_limit_s if order is not None else None
        cap = f" (its wall cap {float(wall):g} s and what follows it)" if wall is not None else ""
        return Ended("error", f"the trial did not end within {phase.limit_s:.0f} s of its training's start{cap}: a "
                              f"step or the code after it blocked past the wall cap, so the trial's process was ended")


def _kill(trial: Any) -> bool:
    """End the trial's process (its Ray actor; a DDP trial's workers and a re-run's child die with it)."""
    import ray

    actor = getattr(getattr(trial, "temporary_state", None), "ray_actor", None)
    if actor is None:
        return False
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # noqa: BLE001 - already gone: Tune reports it as it ended
        return False
    return True
