"""Training a fixed number of optimizer steps, with no budget, no windows and no measuring: the one loop of a
numerics parity arm (tuner.parity) and of the fixed-batch benchmark's splits (benchmarks/fixed_batch.py), which
compare loss trajectories step by step, so every run of them must train exactly the same steps."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.config import TrialConfig

if TYPE_CHECKING:
    from tuner.train._build import Training


@contextmanager
def train_steps(cfg: TrialConfig, steps: int, cache_dir: Path) -> Iterator[tuple[Training, list[float]]]:
    """`cfg` built fresh and seeded and trained `steps` optimizer steps, with the mean training loss of each (a
    loss that stops being finite ends the run there), yielded inside its trial scope so a caller can go on to score
    the models under the same device and numerics (benchmarks/fixed_batch.py)."""
    from tuner.device import resolve_device
    from tuner.train._build import build_training, trial_scope

    device = resolve_device(cfg.params.device)
    losses: list[float] = []
    with trial_scope(cfg, device, cache_dir, None):
        training = build_training(cfg, device)
        batches = training.batches()
        try:
            for _ in range(steps):
                training.step(batches)
                losses.append(training.step.pop_mean_loss())
                if not math.isfinite(losses[-1]):
                    break
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()
        yield training, losses
