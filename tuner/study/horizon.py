"""A study's horizon check, as its folder keeps it (horizon.json): written by `tuner export --horizon`, read by
`tuner report` and `tuner export`. What the check runs and how its word is judged: tuner.analysis.horizon."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from tuner.errors import StudyError

HORIZON_FILE = "horizon.json"

Word = Literal["holds", "shrinks", "reverses"]


class HorizonRun(BaseModel):
    """One re-training to the horizon: which side, its seed, what it read (None: not reached by the horizon)."""

    model_config = ConfigDict(extra="ignore")

    side: Literal["pick", "baseline"]
    seed: int
    state: str
    time_to_target: float | None = None
    samples_to_target: int | None = None
    trained_seconds: float | None = None  # at its last evaluation (a not-reached run is counted there)
    trained_samples: int | None = None
    final_quality: float | None = None  # the mean of its last evaluations (the baseline's set the target)
    error: str | None = None
    pid: int | None = None  # the process it trained in: each run its own, never the CLI's (tuner.report.horizon)


class HorizonCheck(BaseModel):
    """The pick and the baseline re-trained to the horizon, interleaved, and whether the study's speed-up holds."""

    model_config = ConfigDict(extra="ignore")

    horizon: dict[str, Any]  # a Budget: {"seconds": 120} or {"samples": 50000}
    pick: int
    baseline: int
    metric: str
    direction: Literal["minimize", "maximize"]
    target: float
    target_source: Literal["baseline at the horizon", "--target"]
    eval_every_samples: int
    key: Literal["time_to_target", "samples_to_target"]  # what the ratio compares
    ratio: float  # the baseline's over the pick's (above 1: the pick reaches the target sooner)
    low: float | None = None
    high: float | None = None
    study_ratio: float | None = None  # the same ratio as the study read it at its own target
    study_low: float | None = None
    study_high: float | None = None
    word: Word
    text: str
    runs: list[HorizonRun] = []
    checked_at: str | None = None

    def line(self) -> str:
        """What `tuner report` and `tuner export` print of it."""
        return f"horizon check: {self.text}"


def read_horizon(study_dir: Path) -> HorizonCheck | None:
    """The study's horizon.json, None when no horizon check ran."""
    path = Path(study_dir) / HORIZON_FILE
    if not path.is_file():
        return None
    try:
        return HorizonCheck.model_validate_json(path.read_text())
    except (ValidationError, ValueError) as err:
        raise StudyError(f"{path} is damaged ({str(err).splitlines()[0]}); delete it, or run `tuner export "
                         f"--horizon` again") from None


def write_horizon(study_dir: Path, check: HorizonCheck) -> Path:
    """Atomically, over an earlier check (the latest one stands)."""
    from tuner.files import atomic_write

    path = Path(study_dir) / HORIZON_FILE
    atomic_write(path, check.model_dump_json(indent=2) + "\n")
    return path
