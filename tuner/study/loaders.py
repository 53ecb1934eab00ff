"""What a study's loader probes found, as the study folder keeps it (probes.json): the input ceiling of each
probed loader, the compute ceiling and the loader chosen at each probed batch size (tuner.search._probe runs them).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field


class LoaderProbe(BaseModel):
    loader: dict[str, Any]
    input_ceiling: float | None = None
    predicted: float | None = None


class LoaderChoice(BaseModel):
    """The probes at one batch size and the loader chosen there."""

    batch_size: int
    compute_ceiling: float | None = None
    probes: list[LoaderProbe] = Field(default_factory=list)
    loader: dict[str, Any] = Field(default_factory=dict)


class LoaderPlan(BaseModel):
    """What the probes found (probes.json in the study folder): the loader knobs it decides, per batch size."""

    knobs: list[str]
    choices: list[LoaderChoice]
    seconds: float = 0.0  # wall time of the probe phase
    device: str = ""

    def loader_for(self, batch_size: int | None) -> dict[str, Any]:
        """The loader chosen at the probed batch size nearest `batch_size` (on a log scale)."""
        if not self.choices:
            return {}
        if batch_size is None:
            return dict(self.choices[0].loader)
        best = min(self.choices, key=lambda c: abs(math.log(c.batch_size) - math.log(max(1, batch_size))))
        return dict(best.loader)

    def describe(self) -> str:
        parts = []
        for c in self.choices:
            knobs = ", ".join(f"{k} {v}" for k, v in c.loader.items()) or "defaults"
            parts.append(f"batch {c.batch_size}: {knobs}")
        return "; ".join(parts)
