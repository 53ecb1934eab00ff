"""What one trial returns: a state plus measured figures. Failures are states, not exceptions."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

State = Literal["complete", "oom", "diverged", "error"]


@dataclass
class TrialResult:
    state: State
    error: str | None = None
    throughput: float | None = None  # median training samples/s over the timed windows
    throughput_spread: float | None = None  # (max - min) / median over the windows, a fraction
    windows: list[float] = field(default_factory=list)  # samples/s of each timed window
    throughput_overall: float | None = None  # all timed samples / all timed seconds (epoch ends, worker restarts in)
    data_wait: float | None = None  # fraction of step time blocked waiting for the next batch
    peak_mem_mb: float | None = None
    train_seconds: float = 0.0  # wall time of the training loop, warm-up included
    samples: int = 0  # training samples consumed (micro-batch x micro-steps), warm-up included
    steps: int = 0  # optimizer steps
    capped: bool = False  # stopped by the wall-time cap before the budget was spent
    loss_curve: list[list[float]] = field(default_factory=list)  # [samples, mean train loss] per window
    device: str = ""
    quality: dict[str, Any] = field(default_factory=dict)  # fid/fid_features/fid_samples or loss/accuracy, quality_seconds
    sample_grid: str | None = None  # PNG of generated samples (gan)

    def to_dict(self) -> dict[str, Any]:
        """Flat dict: quality keys sit beside the throughput keys (what --json prints and Tune reports)."""
        d = asdict(self)
        d.update(d.pop("quality"))
        return d
