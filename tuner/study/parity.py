"""A study's numerics parity verdicts, as its folder keeps them (parity.json): written by tuner.parity's study check
before the first trial, read by the report and the export. What each verdict means, and why this part stays here
and not in tuner/parity: tuner.parity's docstring."""

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
    checked_at: str | None = None  # when the check ran (ISO 8601, UTC)
    cached: bool = False  # reused from the reports' cache: checked by an earlier study of the same workload here
    cache_file: str | None = None  # that cache entry (delete it to have the next study check again)

    def line(self) -> str:
        """The verdict's text, saying when it was checked where it was reused from the cache."""
        return f"{self.text} (cached from {_when(self.checked_at)})" if self.cached else self.text

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
    # Why the study's time cap changed the check (tuner.parity's parity_run): `capped_from` the steps it
    # planned where fewer fit the cap; `skipped` why it did not run (the trials' quality decides those knobs; a
    # verdict of the full steps kept in the cache from an earlier study is still shown).
    capped_from: int | None = None
    capped_by: str | None = None  # the cap and the step that gave it: "--parity-seconds 120 at 1.18 s a step"
    skipped: str | None = None
    unchecked: list[dict[str, Any]] = []  # the knob values `skipped` left without a verdict (the trials decide)

    def for_params(self, params: dict[str, Any]) -> list[KnobParity]:
        """The verdicts that apply to a trial's params (its numerics knob values that were checked)."""
        return [v for v in self.verdicts if v.matches(params)]

    def lines(self) -> list[str]:
        """What the study's start, the report and the export say of it."""
        steps = (f"{self.steps} steps, capped from {self.capped_from} by {self.capped_by}" if self.capped_from else
                 f"{self.steps} steps")
        head = f"numerics parity against fp32 ({steps}, same seed and batches; other seeds for the noise):"
        if self.error:
            return [f"numerics parity could not run: {self.error}"]
        if self.skipped and not self.verdicts:
            return [f"numerics parity not run: {self.skipped}"]
        rest = [f"  not run for the others: {self.skipped}"] if self.skipped else []
        return [head, *(f"  {v.line()}" for v in self.verdicts), *rest]


def _when(iso: str | None) -> str:
    """`2026-11-27 07:12 UTC` from an ISO 8601 time; the text itself where it is not one."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(iso)).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return str(iso or "an earlier study")


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
