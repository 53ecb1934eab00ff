"""Input-bound or compute-bound, read from the share of step time spent waiting for data.

Kept in one place because the terminal table, the JSON, the HTML report and the export all say the same thing.
"""

from __future__ import annotations

from typing import Any

from tuner.study.metrics import finite

INPUT_BOUND_ABOVE = 0.3
COMPUTE_BOUND_BELOW = 0.1
BOUND_EXPLANATION = (
    f"data wait is the share of each training step spent waiting for the next batch. Above {INPUT_BOUND_ABOVE:.0%} "
    f"the trial is input-bound (the DataLoader is the bottleneck: more workers, prefetch or cheaper transforms may "
    f"help); below {COMPUTE_BOUND_BELOW:.0%} it is compute-bound (the model is the bottleneck: batch size and "
    f"precision matter, loader knobs barely do); in between it is mixed."
)


def bound_label(data_wait: Any) -> str:
    """input-bound / compute-bound / mixed for a data-wait fraction; "" when unknown."""
    wait = finite(data_wait)
    if wait is None:
        return ""
    if wait > INPUT_BOUND_ABOVE:
        return "input-bound"
    if wait < COMPUTE_BOUND_BELOW:
        return "compute-bound"
    return "mixed"
