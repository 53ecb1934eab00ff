"""One study read back from disk, with its Pareto ranks: what `tuner report` and `tuner export` start from."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.errors import StudyError
from tuner.report.pareto import Objective, pareto_ranks, quality_objective
from tuner.report.trials import STUDY_META, load_trials, read_study_meta

# Data-wait fraction (share of step time spent waiting for the next batch) read as a bottleneck. Kept here, in one
# place, because the terminal table, the JSON and the HTML report all say the same thing.
INPUT_BOUND_ABOVE = 0.3
COMPUTE_BOUND_BELOW = 0.1
BOUND_EXPLANATION = (
    f"data wait is the share of each training step spent waiting for the next batch. Above {INPUT_BOUND_ABOVE:.0%} "
    f"the trial is input-bound (the DataLoader is the bottleneck: more workers, prefetch or cheaper transforms may "
    f"help); below {COMPUTE_BOUND_BELOW:.0%} it is compute-bound (the model is the bottleneck: batch size and "
    f"precision matter, loader knobs barely do); in between it is mixed."
)

FAILED_STATES = ("oom", "diverged", "error")
STATE_NOTES = {
    "complete": "complete",
    "oom": "infeasible: out of memory",
    "diverged": "diverged: loss became NaN/inf",
    "error": "error",
}


def bound_label(data_wait: Any) -> str:
    """input-bound / compute-bound / mixed for a data-wait fraction; "" when unknown."""
    if isinstance(data_wait, bool) or not isinstance(data_wait, (int, float)) or not math.isfinite(data_wait):
        return ""
    if data_wait > INPUT_BOUND_ABOVE:
        return "input-bound"
    if data_wait < COMPUTE_BOUND_BELOW:
        return "compute-bound"
    return "mixed"


def _default_objectives(meta: dict[str, Any]) -> list[Objective]:
    quality = "loss" if meta.get("workload") == "cnn" else "fid"
    return [Objective("throughput", "maximize"), Objective(quality, "minimize")]


def known_studies(reports_dir: Path) -> list[str]:
    if not Path(reports_dir).is_dir():
        return []
    return sorted(p.parent.name for p in Path(reports_dir).glob(f"*/{STUDY_META}"))


def _ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8"."""
    parts: list[str] = []
    start = prev = None
    for n in sorted(numbers) + [None]:  # type: ignore[list-item]
        if start is not None and (n is None or n != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if n is not None and start is None:
            start = n
        prev = n
    return ", ".join(parts)


@dataclass
class Study:
    name: str
    dir: Path
    meta: dict[str, Any]
    records: list[dict[str, Any]]
    objectives: list[Objective]
    ranks: dict[int, int] = field(default_factory=dict)

    @property
    def quality(self) -> Objective | None:
        return quality_objective(self.objectives)

    def rank(self, record: dict[str, Any]) -> int | None:
        return self.ranks.get(int(record["trial"]))

    def front(self) -> list[dict[str, Any]]:
        return [r for r in self.records if self.rank(r) == 0]

    def sorted_records(self) -> list[dict[str, Any]]:
        """Ranked trials by rank then throughput (fastest first), then unranked complete trials, then failures."""

        def key(r: dict[str, Any]) -> tuple[Any, ...]:
            rank = self.rank(r)
            thr = r.get("throughput") if isinstance(r.get("throughput"), (int, float)) else -math.inf
            group = 0 if rank is not None else (1 if r.get("state") == "complete" else 2)
            return (group, rank if rank is not None else 0, -thr if group < 2 else 0, int(r["trial"]))

        return sorted(self.records, key=key)

    def trial(self, number: int) -> dict[str, Any]:
        for r in self.records:
            if int(r["trial"]) == number:
                return r
        if not self.records:
            raise StudyError(f"no trial {number} in study '{self.name}': it has no finished trials yet")
        known = _ranges([int(r["trial"]) for r in self.records])
        raise StudyError(f"no trial {number} in study '{self.name}'; its trials are {known}")

    def require_complete(self) -> None:
        if not self.ranks:
            counts: dict[str, int] = {}
            for r in self.records:
                counts[str(r.get("state"))] = counts.get(str(r.get("state")), 0) + 1
            have = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no finished trials"
            raise StudyError(
                f"study '{self.name}' has no complete trial with finite objectives ({have}); "
                f"run more trials with `tuner search` before reporting a best config"
            )

    def sample_grid(self, record: dict[str, Any]) -> Path | None:
        """The trial's sample grid path, absolute or relative to the study folder; None if it has none."""
        raw = record.get("sample_grid")
        if not raw:
            return None
        path = Path(str(raw))
        return path if path.is_absolute() else self.dir / path


def open_study(reports_dir: Path, name: str) -> Study:
    """Read `<reports_dir>/<name>/`; an unknown name is a StudyError listing the studies that exist."""
    reports_dir = Path(reports_dir)
    study_dir = reports_dir / name
    if not (study_dir / STUDY_META).is_file():
        known = known_studies(reports_dir)
        where = f"{reports_dir}/"
        if known:
            raise StudyError(f"no study '{name}' in {where}; known: {', '.join(known)}")
        raise StudyError(f"no study '{name}' in {where}; it has no studies (run `tuner search` or pass --reports-dir)")
    meta = read_study_meta(study_dir)
    objectives = [Objective.from_meta(o) for o in meta.get("objectives") or []] or _default_objectives(meta)
    records = load_trials(study_dir)
    return Study(name, study_dir, meta, records, objectives, pareto_ranks(records, objectives))
