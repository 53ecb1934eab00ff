"""A study's numerics parity verdicts, as its folder keeps them (parity.json): written by tuner.search before the
first trial, read by the report and the export. What each verdict means: tuner.measure.parity."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from tuner.errors import StudyError

PARITY_FILE = "parity.json"


class KnobParity(BaseModel):
    """One numerics knob value against fp32: its settings, the verdict's state and its one-line text."""

    model_config = ConfigDict(extra="ignore")

    knobs: dict[str, Any]  # {"precision": "bf16"}
    state: Literal["within seed noise", "drifts", "diverged"]
    text: str
    gap: float | None = None
    seed_gap: float | None = None
    from_step: int | None = None

    def matches(self, params: dict[str, Any]) -> bool:
        """Whether a trial with `params` runs this knob value."""
        return all(params.get(k) == v for k, v in self.knobs.items())


class StudyParity(BaseModel):
    """The parity check a study ran: how many steps each arm trained, and one verdict per numerics knob value."""

    model_config = ConfigDict(extra="ignore")

    steps: int
    seconds: float = 0.0
    verdicts: list[KnobParity] = []
    error: str | None = None  # the check could not run (the study went on without it)

    def for_params(self, params: dict[str, Any]) -> list[KnobParity]:
        """The verdicts that apply to a trial's params (its numerics knob values that were checked)."""
        return [v for v in self.verdicts if v.matches(params)]

    def lines(self) -> list[str]:
        """What the study's start, the report and the export say of it."""
        head = f"numerics parity against fp32 ({self.steps} steps, same seed and batches; another seed for the noise):"
        if self.error:
            return [f"numerics parity could not run: {self.error}"]
        return [head, *(f"  {v.text}" for v in self.verdicts)]


def read_parity(study_dir: Path) -> StudyParity | None:
    """The study's parity.json, None when it has none (no numerics knob to check, or a study from before)."""
    path = Path(study_dir) / PARITY_FILE
    if not path.is_file():
        return None
    try:
        return StudyParity.model_validate_json(path.read_text())
    except (ValidationError, ValueError) as err:
        raise StudyError(f"{path} is damaged ({str(err).splitlines()[0]}); delete it to go on without the numerics "
                         f"parity verdicts") from None
