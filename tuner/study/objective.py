"""What a study optimizes: one metric and a direction. The one Objective type of tuner.

Spaces declare objectives in YAML (`{metric: throughput, direction: max}`); the searcher tells Optuna their values;
Pareto ranking, the knee and the reports compare trials with them. `metric: quality` stands for the workload's own
quality objective (FID for the built-in GAN, validation loss for the CNN, what a user workload declares) and is
resolved to a concrete metric when a study is planned.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

QUALITY = "quality"  # placeholder metric: the workload's declared quality objective
THROUGHPUT = "throughput"
_LONG = {"max": "maximize", "min": "minimize", "maximize": "maximize", "minimize": "minimize"}


class Objective(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str
    direction: Literal["maximize", "minimize"] | None = None  # None only for `metric: quality`

    @field_validator("direction", mode="before")
    @classmethod
    def _long_form(cls, v: Any) -> Any:
        if v is None:
            return None
        if not isinstance(v, str) or v.lower() not in _LONG:
            raise ValueError(f"direction must be max or min (got {v!r})")
        return _LONG[v.lower()]

    @classmethod
    def of(cls, raw: Any) -> "Objective":
        """From a study file: a mapping, or a bare metric name (throughput/accuracy maximized, others minimized)."""
        if isinstance(raw, Objective):
            return raw
        if isinstance(raw, str):
            return cls(metric=raw, direction="maximize" if raw in (THROUGHPUT, "accuracy") else "minimize")
        return cls.model_validate(raw)

    @property
    def maximize(self) -> bool:
        return self.direction == "maximize"

    @property
    def mode(self) -> str:
        """Ray Tune's and the YAML's short spelling."""
        return "max" if self.maximize else "min"

    @property
    def arrow(self) -> str:
        return "↑" if self.maximize else "↓"

    @property
    def comparison(self) -> str:
        return ">=" if self.maximize else "<="

    def better(self, a: float, b: float) -> bool:
        """a is strictly better than b."""
        return a > b if self.maximize else a < b

    def meets(self, value: float, threshold: float) -> bool:
        """value is at least as good as threshold."""
        return value >= threshold if self.maximize else value <= threshold

    def goodness(self, value: float) -> float:
        """Larger is better, whatever the direction."""
        return value if self.maximize else -value

    def describe(self) -> str:
        return f"{self.metric} ({self.mode})" if self.direction else self.metric


def quality_objective(objectives: list[Objective]) -> Objective | None:
    """A study's quality objective: the first one that is not throughput (None for a speed-only study)."""
    return next((o for o in objectives if o.metric != THROUGHPUT), None)
