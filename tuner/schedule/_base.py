"""The scheduler seam: a scheduler answers each report of a trial with continue, pause or stop; nothing else.

A trial's report reaches it as a `Progress` (a small typed record: which trial, the budget used, the rung it
closes or the training time so far, its objective values there, its time to target at its end) and it answers a
`Decision`. It knows nothing of Ray: tuner.search's adapter turns Ray Tune's results into `Progress` and the
answer back into Ray's, so a scheduler is tested, replayed by a benchmark or written anew without a Ray session
(Syne Tune's and Optuna's pruners have the same one-method seam). A scheduler may give each trial its own ladder
of rungs (`ladder`), and say what the study folder keeps beside a trial so --resume rebuilds it (`kept`).

Schedulers are registered by name (`register("fifo", FIFO)`): the registry is the one list `--scheduler`'s
validation and help, the plan and study.json read. A scheduler declares its own options (`options`: asha's
--min-budget and --eta, the race's --race-margin), and the CLI's flags, SearchOptions, the plan, study.json and
--resume's check read them from the registry: a new scheduler with an option is its module and its `register` line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from tuner.config import Budget
from tuner.errors import ConfigError
from tuner.study import FinalReport, Objective, RungReport, StudyFolder, TrialReport, WindowReport

Action = Literal["continue", "pause", "stop"]


@dataclass(frozen=True)
class Decision:
    """What a scheduler answers a report: go on, pause (where the runner can resume a trial later), or stop.
    A stop may say the state the trial's record ends in (`ends_as`, e.g. "not reached") and why (`reason`);
    without one a trial stopped at a rung keeps that rung's `stopped` record."""

    action: Action
    reason: str | None = None
    ends_as: str | None = None

    @property
    def stops(self) -> bool:
        return self.action == "stop"


CONTINUE = Decision("continue")
PAUSE = Decision("pause")
STOP = Decision("stop")


@dataclass(frozen=True)
class Progress:
    """One report of one trial, as a scheduler reads it.

    trial: tuner's trial number as text (else the runner's id); budget_used: the trial budget used so far, in the
    budget's unit; rung: the rung this report closes (0-based), None for a window report; values: the objective
    values at the rung or at the end (the study's objective order); train_seconds: the training loop's seconds so
    far (evaluations excluded), when the report says; final: the trial's own last report (it ended);
    time_to_target: at the end, the training seconds to the first evaluation that met the study's target (None:
    not reached, or no target)."""

    trial: str
    budget_used: float = 0.0
    rung: int | None = None
    values: tuple[float, ...] = ()
    train_seconds: float | None = None
    final: bool = False
    time_to_target: float | None = None

    @classmethod
    def of(cls, trial: str, report: TrialReport | None, objectives: list[Objective]) -> "Progress | None":
        """What a trial's report (tuner.study.reports: a window, a rung, the final one) tells a scheduler; None
        for a report no scheduler reads (a start, a phase). The one place a report's fields become a Progress."""
        if isinstance(report, WindowReport):
            return cls(trial=trial, budget_used=float(report.budget_used), train_seconds=report.train_seconds,
                       time_to_target=report.time_to_target)
        if isinstance(report, (RungReport, FinalReport)):
            return cls(trial=trial, budget_used=float(report.budget_used or 0.0), rung=report.rung,
                       values=tuple(report.values.get(o.metric, float("nan")) for o in objectives),
                       final=isinstance(report, FinalReport), time_to_target=report.record.value("time_to_target"))
        return None


@dataclass(frozen=True)
class SchedulerOption:
    """One option a scheduler declares: `key` names it in the plan, study.json and SearchOptions.scheduler_options;
    `flag` is `tuner search`'s (its parameter name the flag's, dashes as underscores); `what` says what the
    scheduler's options set, for the line that refuses them under another scheduler; `null_kept`: study.json
    writes it (null) for every scheduler, as asha's entries did before the race came."""

    key: str
    flag: str
    help: str
    what: str
    metavar: str | None = None
    null_kept: bool = False

    @property
    def param(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


def _option_keys() -> set[str]:
    return {o.key for o in scheduler_options()}


@dataclass(frozen=True)
class SchedulerPlan:
    """The scheduler a study runs with, as study.json keeps it (`scheduler`): its name, its rungs and the values of
    its own options (`settings`, read as attributes: `plan.eta`, `plan.margin`; None where not set)."""

    name: str = "fifo"
    rungs: tuple[float, ...] = ()  # the rung budgets; the last is the trial's whole budget
    settings: tuple[tuple[str, float], ...] = ()  # (key, value) of the options set, by key (`of` makes it)

    @classmethod
    def of(cls, name: str, rungs: Any = (), **settings: Any) -> "SchedulerPlan":
        return cls(name=name, rungs=tuple(float(b) for b in rungs),
                   settings=tuple(sorted((k, v) for k, v in settings.items() if v is not None)))

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__") or key not in _option_keys():
            raise AttributeError(key)
        return dict(self.settings).get(key)

    def to_json(self) -> dict[str, Any]:
        """The entry study.json keeps: the null-kept options always (fifo and asha entries read as they always
        did), the others where set."""
        out: dict[str, Any] = {"name": self.name}
        out.update({o.key: getattr(self, o.key) for o in scheduler_options() if o.null_kept})
        out["rungs"] = list(self.rungs)
        out.update({k: v for k, v in self.settings if k not in out})
        return out

    def describe(self) -> str:
        return kind_of(self.name).describe(self)


class PlanRequest:
    """What the user asked for (`given`: the scheduler options given, by key; read as attributes, None where not
    given) and what the study has, for a scheduler to plan from."""

    def __init__(self, budget: Budget, given: Mapping[str, Any] | None = None, target: bool = False) -> None:
        self.budget = budget
        self.given = {k: v for k, v in (given or {}).items() if v is not None}
        self.target = target  # the study has a target quality

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__") or key not in _option_keys():
            raise AttributeError(key)
        return self.__dict__.get("given", {}).get(key)


class Scheduler(ABC):
    """Decides on each report of each trial. Subclasses implement `decide`; a registered one also says how it is
    planned from the options (`plan`), built for a study (`build`) and described (`describe`)."""

    help: ClassVar[str] = ""  # one phrase for --scheduler's help
    options: ClassVar[tuple[SchedulerOption, ...]] = ()  # its own options (their flags, help and plan keys)
    decides: ClassVar[bool] = True  # False: it never stops a trial, so the runner's default order does as well

    @abstractmethod
    def decide(self, progress: Progress) -> Decision:
        """Continue, pause or stop the trial that made this report."""

    def ladder(self, trial: str) -> tuple[float, ...] | None:
        """The rungs this trial reports at (the budget's unit; the last is its whole budget); None: the plan's."""
        return None

    def kept(self, trial: str) -> list[dict[str, Any]] | None:
        """What the study folder keeps beside this trial (trials/NNNN/rungs.json) so --resume rebuilds the
        scheduler as it was; None: nothing."""
        return None

    @classmethod
    def check_kept(cls, folder: StudyFolder) -> None:
        """On --resume, before anything runs: what this scheduler kept reads (a StudyError line names a file
        that does not); nothing on disk changes."""
        from tuner.schedule._kept import kept_entries

        kept_entries(folder, prune=False)

    # registered schedulers: from the options, for a study ------------------------------------------------------

    @classmethod
    def plan(cls, name: str, ask: PlanRequest) -> SchedulerPlan:
        """Validate its own options (one ConfigError line each; another scheduler's were refused before this);
        the default takes none."""
        return SchedulerPlan(name=name)

    @classmethod
    def build(cls, plan: SchedulerPlan, objectives: list[Objective], folder: StudyFolder | None) -> "Scheduler":
        """The scheduler for a study, rebuilt from what `folder` kept when it resumes."""
        return cls()

    @classmethod
    def describe(cls, plan: SchedulerPlan) -> str:
        return plan.name


_REGISTRY: dict[str, type[Scheduler]] = {}
DEFAULT_SCHEDULER = "fifo"  # the lead decides the default from the tabular benchmark (issue 20)


def register(name: str, kind: type[Scheduler]) -> None:
    """Make `--scheduler NAME` run `kind`."""
    _REGISTRY[name] = kind


def unregister(name: str) -> None:
    """Take a registered scheduler out again (a test's own)."""
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def kind_of(name: str) -> type[Scheduler]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown scheduler {name!r}; use one of {', '.join(_REGISTRY)}") from None


def scheduler_help() -> str:
    """--scheduler's help, from the registry."""
    return "; ".join(f"{n}: {k.help}" for n, k in _REGISTRY.items()) + f" (default {DEFAULT_SCHEDULER})"


def scheduler_options() -> tuple[SchedulerOption, ...]:
    """Every registered scheduler's options, in the registry's order (one per key): `tuner search`'s flags and
    SearchOptions.scheduler_options read them."""
    seen: dict[str, SchedulerOption] = {}
    for kind in _REGISTRY.values():
        for o in kind.options:
            seen.setdefault(o.key, o)
    return tuple(seen.values())


def plan_scheduler(name: str | None, budget: Budget, given: Mapping[str, Any] | None = None, *,
                   target: bool = False) -> SchedulerPlan:
    """Validate the scheduler options `given` (by key; None: not given) against the scheduler, the trial budget
    and the study's target. An option of another scheduler is refused in one line naming its owner."""
    name = name or DEFAULT_SCHEDULER
    kind = kind_of(name)
    given = {k: v for k, v in (given or {}).items() if v is not None}
    own = {o.key for o in kind.options}
    for owner_name, owner in _REGISTRY.items():
        if owner_name == name or not any(o.key in given and o.key not in own for o in owner.options):
            continue
        flags = [o.flag for o in owner.options]
        many = len(flags) > 1
        raise ConfigError(f"{' and '.join(flags)} {'set' if many else 'sets'} {owner.options[0].what} of --scheduler "
                          f"{owner_name} (this study's scheduler: {name}); add --scheduler {owner_name} or drop "
                          f"{'them' if many else flags[0]}")
    return kind.plan(name, PlanRequest(budget=budget, given=given, target=target))


def saved_scheduler(meta_value: dict[str, Any] | None) -> SchedulerPlan:
    """study.json's `scheduler` (a study from before schedulers ran fifo)."""
    if not meta_value:
        return SchedulerPlan()
    settings = {k: v for k, v in meta_value.items() if k not in ("name", "rungs")}
    return SchedulerPlan.of(str(meta_value.get("name", DEFAULT_SCHEDULER)), meta_value.get("rungs") or (),
                            **settings)


def build_scheduler(plan: SchedulerPlan, objectives: list[Objective], folder: StudyFolder | None) -> Scheduler:
    return kind_of(plan.name).build(plan, objectives, folder)


__all__ = ["CONTINUE", "DEFAULT_SCHEDULER", "PAUSE", "STOP", "Decision", "PlanRequest", "Progress", "Scheduler",
           "SchedulerOption", "SchedulerPlan", "build_scheduler", "kind_of", "names", "plan_scheduler", "register",
           "saved_scheduler", "scheduler_help", "scheduler_options", "unregister"]
