"""The rung scheduler of a study: its settings (`--scheduler asha`, `--min-budget`, `--eta`), the rungs they make,
and its rung entries kept in the study folder (trials/NNNN/rungs.json) so --resume rebuilds it as it was.

Ray's own experiment state lags behind a kill -9, so the scheduler is rebuilt from the folder instead: the entries
of every trial that has a record. A trial running at the kill has none (Optuna marks it FAIL and a new trial runs
in its place), so its entries are dropped with it and every rung holds finished trials only.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tuner.config import Budget
from tuner.errors import ConfigError, StudyError
from tuner.study import Objective, StudyFolder

SCHEDULERS = ("fifo", "asha")
DEFAULT_SCHEDULER = "fifo"  # the lead decides the default from the tabular benchmark (issue 20)
DEFAULT_ETA = 3.0
DEFAULT_RUNGS = 3  # rungs at budget/eta^2, budget/eta, budget by default
RUNGS_FILE = "rungs.json"


@dataclass(frozen=True)
class SchedulerPlan:
    """The scheduler a study runs with, as study.json keeps it (`scheduler`)."""

    name: str = DEFAULT_SCHEDULER
    eta: float | None = None
    min_budget: float | None = None  # the first rung, in the budget's unit
    rungs: tuple[float, ...] = ()  # the rung budgets; the last is the trial's whole budget

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    def describe(self) -> str:
        if self.name != "asha":
            return "fifo (every trial runs its whole budget)"
        return f"asha (eta {self.eta:g}, rungs at {', '.join(f'{b:g}' for b in self.rungs)})"


def plan_scheduler(name: str | None, min_budget: float | None, eta: float | None, budget: Budget) -> SchedulerPlan:
    """Validate the scheduler options against the trial budget; eta 3 and three rungs unless given."""
    name = name or DEFAULT_SCHEDULER
    if name not in SCHEDULERS:
        raise ConfigError(f"unknown scheduler {name!r}; use one of {', '.join(SCHEDULERS)}")
    if name == "fifo":
        if min_budget is not None or eta is not None:
            raise ConfigError("--min-budget and --eta set the rungs of --scheduler asha; add --scheduler asha or "
                              "drop them")
        return SchedulerPlan()
    from tuner.search._scheduler import rung_budgets

    whole = float(budget.seconds if budget.seconds is not None else budget.samples)  # type: ignore[arg-type]
    unit = "seconds" if budget.seconds is not None else "samples"
    eta = DEFAULT_ETA if eta is None else float(eta)
    if not eta > 1:
        raise ConfigError(f"--eta must be > 1 (got {eta:g}): each rung keeps 1/eta of the trials that reach it")
    if min_budget is None:
        min_budget = whole / eta ** (DEFAULT_RUNGS - 1)
    if not 0 < min_budget < whole:
        raise ConfigError(f"--min-budget must be > 0 and below the trial budget ({whole:g} {unit}; got "
                          f"{min_budget:g}): it is the first rung's budget, in {unit}")
    return SchedulerPlan(name="asha", eta=eta, min_budget=float(min_budget),
                         rungs=tuple(rung_budgets(float(min_budget), eta, whole)))


def saved_scheduler(meta_value: dict[str, Any] | None) -> SchedulerPlan:
    """study.json's `scheduler` (a study from before schedulers ran fifo)."""
    if not meta_value:
        return SchedulerPlan()
    return SchedulerPlan(name=str(meta_value.get("name", DEFAULT_SCHEDULER)), eta=meta_value.get("eta"),
                         min_budget=meta_value.get("min_budget"),
                         rungs=tuple(float(b) for b in meta_value.get("rungs") or ()))


def make_scheduler(plan: SchedulerPlan, objectives: list[Objective], folder: StudyFolder) -> Any:
    """The Ray Tune scheduler: None for fifo (Tune's default), else ParetoASHA with the entries the folder kept."""
    if plan.name != "asha":
        return None
    from tuner.search._scheduler import ParetoASHA

    return ParetoASHA(objectives, list(plan.rungs), float(plan.eta or DEFAULT_ETA), entries=stored_entries(folder))


def write_rungs(folder: StudyFolder, number: int, scheduler: Any) -> None:
    """The scheduler's entries for one trial, beside it (atomic: a kill leaves the previous file)."""
    mine = [asdict(e) for e in scheduler.entries if e.trial == str(number)]
    folder.write_file(folder.trial_dir(number) / RUNGS_FILE, json.dumps(mine) + "\n")  # never a deleted study


def stored_entries(folder: StudyFolder) -> list[Any]:
    """Every recorded trial's rung entries; those of a trial with no record (running at a kill) are removed."""
    out = []
    for _, trial_dir in folder.trial_dirs():  # the study's own trial folders (not a user's copy of one)
        path = trial_dir / RUNGS_FILE
        if not path.is_file():
            continue
        if not (path.parent / "result.json").is_file():
            path.unlink(missing_ok=True)
            continue
        out += read_entries(path)
    return out


def check_stored_entries(folder: StudyFolder) -> None:
    """On --resume, before anything runs: every recorded trial's rungs.json reads (else a StudyError naming it)."""
    for _, trial_dir in folder.trial_dirs():
        path = trial_dir / RUNGS_FILE
        if path.is_file() and (trial_dir / "result.json").is_file():
            read_entries(path)


def read_entries(path: Path) -> list[Any]:
    """One trial's rung entries; a file that does not read as them (cut short, edited) is one StudyError line."""
    from tuner.search._scheduler import RungEntry

    try:
        data = json.loads(path.read_text() or "[]")
        if not isinstance(data, list):
            raise ValueError("not a list of rung entries")
        return [RungEntry(str(e["trial"]), int(e["rung"]), tuple(float(v) for v in e["values"]), bool(e["went_on"]))
                for e in data]
    except (OSError, ValueError, KeyError, TypeError) as err:
        why = f"missing key {err}" if isinstance(err, KeyError) else (str(err).splitlines() or [type(err).__name__])[0]
        raise StudyError(f"{path}: the trial's rung entries do not read ({why}); restore the file, or delete it (the "
                         f"rung scheduler then leaves that trial out of its rungs)") from None
