"""Where a study's wall time went, from what its folder records: the parity check, the loader probes, a derived
target's reference runs, the search's trials, the confirmation's re-runs and the rest (start-up, Ray, between the
trials, recording). The summary says it (issue 55), so a user sees what the study itself cost beside the training
it ran."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tuner.study import PARITY_FILE, StudyFolder
from tuner.analysis.trials import read_records


@dataclass(frozen=True)
class WallShares:
    """Seconds of one `tuner search` call: `trials` from the first trial's start to the last one's end (their
    records' one-second timestamps), `confirmation` from there to the last re-run's end, `probes` and `parity` as
    their files say, `target` the reference runs that set a derived target (study.json's `reference_seconds`);
    `overhead` is the rest of the wall time (a ResNet-18 study's 95 s of target runs read as overhead before)."""

    wall: float
    trials: float
    confirmation: float = 0.0
    probes: float = 0.0
    parity: float = 0.0
    target: float = 0.0

    @property
    def overhead(self) -> float:
        return max(0.0, self.wall - self.trials - self.confirmation - self.probes - self.parity - self.target)

    def text(self) -> str:
        parts = [("parity check", self.parity), ("probes", self.probes), ("target runs", self.target),
                 ("trials", self.trials), ("confirmation", self.confirmation), ("overhead", self.overhead)]
        shown = ", ".join(f"{name} {s:.0f} s" for name, s in parts if s > 0 or name in ("trials", "overhead"))
        return f"time: {shown} (of {self.wall:.0f} s; overhead: start-up, Ray, between the trials, recording)"

    def to_json(self) -> dict[str, float]:
        return {"wall": round(self.wall, 1), "parity": round(self.parity, 1), "probes": round(self.probes, 1),
                "target": round(self.target, 1), "trials": round(self.trials, 1),
                "confirmation": round(self.confirmation, 1), "overhead": round(self.overhead, 1)}


def _epoch(iso: str | None) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp() if iso else None
    except ValueError:
        return None


def _seconds(path: Any, since: float) -> float:
    """A probes.json's or parity.json's `seconds`, when this call wrote it (a resumed study's are an earlier's)."""
    try:
        if not path.is_file() or path.stat().st_mtime < since - 1:
            return 0.0
        value = json.loads(path.read_text()).get("seconds")
    except (OSError, ValueError, AttributeError):
        return 0.0
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def wall_shares(folder: StudyFolder, wall: float, since: float) -> WallShares:
    """The shares of a call that started at `since` (epoch seconds) and took `wall` seconds: only the trials,
    re-runs and files it wrote count (one second of slack for the timestamps' resolution)."""
    records = read_records(folder)
    mine = [r for r in records if (t := _epoch(r.started)) is not None and t >= since - 1]
    starts = [t for r in mine if (t := _epoch(r.started)) is not None]
    ends = [t for r in mine if (t := _epoch(r.ended)) is not None]
    trials = max(ends) - min(starts) if starts and ends else 0.0
    reruns = [t for r in records for rr in folder.reruns(r.trial)
              if (t := _epoch(rr.ended)) is not None and t >= since - 1]
    search_end = max(ends) if ends else None
    confirmation = max(reruns) - search_end if reruns and search_end is not None and max(reruns) > search_end else 0.0
    return WallShares(wall=wall, trials=max(0.0, trials), confirmation=confirmation,
                      probes=_seconds(folder.probes_path, since), parity=_seconds(folder.path / PARITY_FILE, since),
                      target=_target_seconds(folder, since))


def _target_seconds(folder: StudyFolder, since: float) -> float:
    """A derived target's reference runs, when this call set it (it wrote study.json; a resume never derives it)."""
    from tuner.errors import StudyError

    try:
        meta = folder.read_meta()
    except (StudyError, OSError):
        return 0.0
    created = _epoch(meta.created)
    target = getattr(meta, "target", None)  # study.json keeps it as written (StudyMeta keeps unknown keys)
    value = target.get("reference_seconds") if isinstance(target, dict) else None
    if created is None or created < since - 1 or not isinstance(value, (int, float)) or isinstance(value, bool):
        return 0.0
    return float(value)
