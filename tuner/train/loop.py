"""The budgeted, measured training loop every workload runs.

warm-up steps (untimed) -> timed windows until the budget (seconds or samples) is spent. The clock is read at
window ends only (after a device sync), and the loss is read there too, which is where divergence is detected.

Under DDP every decision a rank would take from its own clock or loss is agreed (tuner.train.distributed): warm-up
stops together, windows hold a step count fixed after warm-up (the slowest rank's pace), and the wall cap and a
non-finite loss are agreed at window ends, so no rank takes a step the others do not.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from tuner.config import Budget, Measure
from tuner.device import Device
from tuner.measure.timing import Clock, WaitMeter, Window, WindowTimer
from tuner.train.distributed import Agreement


class Step(Protocol):
    def __call__(self, batches: Iterator[Any]) -> int: ...
    def pop_mean_loss(self) -> float: ...


@dataclass
class LoopResult:
    windows: list[Window]
    samples: int = 0  # this rank's samples, warm-up included
    steps: int = 0
    seconds: float = 0.0  # wall time of the whole loop, warm-up included
    diverged: bool = False
    capped: bool = False
    loss_curve: list[list[float]] = field(default_factory=list)


def forever(loader: Any, set_epoch: Callable[[int], None] | None = None) -> Iterator[Any]:
    """Endless batches across epochs (a DistributedSampler needs set_epoch for a new shuffle each epoch)."""
    epoch = 0
    while True:
        if set_epoch is not None:
            set_epoch(epoch)
        yield from loader
        epoch += 1


def run_loop(
    step: Step,
    batches: Iterator[Any],
    *,
    budget: Budget,
    measure: Measure,
    device: Device,
    wall_limit_s: float | None = None,
    clock: Clock = time.perf_counter,
    on_window: Callable[[dict[str, Any]], None] | None = None,
    agree: Agreement | None = None,
) -> LoopResult:
    agree = agree or Agreement()
    shared_pace = agree.world > 1
    meter = WaitMeter(batches, clock)
    timer = WindowTimer(device, meter, clock)
    res = LoopResult(windows=timer.windows)
    start = clock()

    def over_wall() -> bool:
        return wall_limit_s is not None and clock() - start >= wall_limit_s

    # Warm-up: untimed. Under DDP at least one step, synchronized, to learn the shared pace.
    warmup = max(measure.warmup_steps, 1) if shared_pace and budget.seconds is not None else measure.warmup_steps
    step_s = 0.0
    for _ in range(warmup):
        t = clock()
        res.samples += step(meter)
        res.steps += 1
        if shared_pace:
            device.synchronize()
        step_s = clock() - t
        # Stop warming up when one more step of this length would leave no time for a timed step.
        if agree.any(wall_limit_s is not None and clock() - start + 2 * step_s >= wall_limit_s):
            break
    if warmup and agree.any(not math.isfinite(step.pop_mean_loss())):
        res.diverged = True
        res.seconds = clock() - start
        return res

    # Split what is left of the budget into equal windows.
    if budget.seconds is not None:
        window_s = max(budget.seconds - (clock() - start), 0.0) / measure.windows
        if shared_pace:  # a step count every rank shares, from the slowest rank's warm-up pace
            local = max(1, math.ceil(window_s / max(agree.max(step_s), 1e-6)))
            window_steps = int(agree.max(local))  # each rank's clock says how much budget is left: agree on it
            window_done = lambda w_start, n: n >= window_steps  # noqa: E731
        else:
            window_done = lambda w_start, n: clock() - w_start >= window_s  # noqa: E731 - host clock, no sync
    else:
        left = max(budget.samples - res.samples * agree.world, measure.windows)
        window_n = math.ceil(left / measure.windows / agree.world)
        window_done = lambda w_start, n: timer.open_samples >= window_n  # noqa: E731

    for _ in range(measure.windows):
        timer.start()  # restarted per window: callbacks and the loss read below stay outside the timed region
        w_start, n_steps = clock(), 0
        while True:
            n = step(meter)
            timer.add(n)
            res.samples += n
            res.steps += 1
            n_steps += 1
            if window_done(w_start, n_steps):
                break
            if not shared_pace and over_wall():
                res.capped = True
                break
        timer.close()
        device.sample_memory()
        loss = step.pop_mean_loss()
        res.loss_curve.append([res.samples * agree.world, loss])
        if agree.any(not math.isfinite(loss)):
            res.diverged = True
            break
        if on_window is not None:
            w = timer.windows[-1]
            on_window({"window": len(timer.windows), "throughput": w.throughput * agree.world, "train_loss": loss,
                       "samples": res.samples * agree.world})
        if res.capped or agree.any(over_wall()):
            res.capped = res.capped or len(timer.windows) < measure.windows
            break
    res.seconds = clock() - start
    return res
