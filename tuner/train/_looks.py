"""When a timed window of a seconds budget ends, on one process (tuner.train.loop).

Every clock read that ends a window, spends the budget or crosses a rung point follows a device sync: on CUDA the
host runs ahead of the GPU (up to its launch queue), so the host clock alone ends windows, budgets and rungs late
by that much. Syncing at every step would cost the overlap a plain loop has, so on CUDA a window's end is decided
at a few synced looks: the first at a step count from the synced pace (the windows read so far, else warm-up's),
short of the end, the next at the count the window's own pace gives for what is left (on a CPU, whose sync waits
for nothing, at every step). The wall cap alone reads the host clock at every step (the loop's): the host clock is
never ahead of the synced one, so when it says the cap is reached, it is."""

from __future__ import annotations

import math
from collections.abc import Callable

from tuner.config import Measure
from tuner.device import Device
from tuner.measure.timing import Clock
from tuner.train._points import EvalPoints

LOOK_SHARE = 0.9  # a window's first synced look comes at this share of what its pace says is left ...
LOOK_EXACT = 16  # ... unless that is this many steps or fewer: then at the step that should end it


def steps_to_look(left_s: float, pace: float) -> int:
    """Steps until the next synced look at a window whose end is `left_s` away at `pace` seconds a step."""
    if pace <= 0:
        return 1
    steps = left_s / pace
    return max(1, int(steps * LOOK_SHARE) if steps > LOOK_EXACT else math.ceil(steps - 1e-9))


def seconds_window(target_s: float, from_used: float, pace: float, *, measure: Measure, device: Device,
                   clock: Clock, used: Callable[[], float], points: EvalPoints,
                   step_n: int) -> Callable[[float, int], bool]:
    """When a window of a seconds budget (one process) that starts at `from_used` of it is done: it holds
    min_steps steps and has lasted target_s, or min_s and reached the next rung or sample point. Decided at
    synced looks only, the first at a step count from `pace` (synced seconds a step; `step_n`: warm-up's samples
    a step, which counts the steps to a sample point)."""
    min_steps, min_s = measure.window_min_steps, measure.window_min_seconds
    cut = points.any and not points.shared
    if cut:
        ahead = points.rungs_left(from_used, from_used)
        first_left = min(target_s, max(min_s, min(ahead))) if ahead else target_s
    else:
        first_left = target_s
    look = max(min_steps, min(steps_to_look(first_left, pace) if pace > 0 else min_steps,
                              points.steps_to_sample(step_n)))
    every_step = not device.is_cuda  # no device queue: the clock is as good as synced at every step

    def synced() -> float:
        device.synchronize()
        return clock()

    def done(w_start: float, n: int) -> bool:
        nonlocal look
        if n < look and not every_step:
            return False
        elapsed = synced() - w_start
        if n >= min_steps and (elapsed >= target_s
                               or (points.any and elapsed >= min_s and points.crossed(from_used))):
            return True
        left = target_s - elapsed
        if cut:
            ahead = points.rungs_left(from_used, used())
            if ahead:
                left = min(left, max(min_s - elapsed, min(ahead)))
        look = max(min_steps, n + min(steps_to_look(left, elapsed / n), points.steps_to_sample(step_n)))
        return False

    return done
