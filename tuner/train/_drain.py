"""Draining the prefetch queue a pause refilled, before the next timed window (tuner.train.loop).

A pause between windows (a rung's evaluation, a report, a checkpoint) lets the loader's workers fill their
prefetch queue untimed, so a loader-bound config would read fast in the next window. Before each window after the
first whose pause was long enough for the workers to make a batch, untimed steps drain that queue: until a batch
had to be waited for about as long as the last window's batches were (the queue is empty again), at most
DRAIN_CAP times its depth; they count in the budget, not in a window."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.device import Device
from tuner.measure.timing import Clock, WaitMeter, Window
from tuner.train.distributed import Agreement

DRAIN_CAP = 2  # draining a refilled prefetch queue takes at most this many times its depth (plus one) batches


def drain(step: Callable[[Any], int], meter: WaitMeter, *, prefetched: int, last: Window, last_batches: int,
          closed_at: float, wall: Clock, agree: Agreement, device: Device) -> tuple[int, int]:
    """Untimed steps until the prefetch queue (`prefetched` batches deep) a pause refilled is empty again: until a
    batch waited at least half as long as the `last` window's did on average (every rank alike under DDP), at most
    DRAIN_CAP times the queue's depth. None after a pause (from `closed_at` to now on the `wall` clock) too short
    for the workers to make a batch at the last window's rate (between two windows without an evaluation: a
    report, the loss read). Returns the samples and steps it trained."""
    samples = steps = 0
    if prefetched <= 0:
        return samples, steps
    made = (wall() - closed_at) * last_batches / last.seconds if last.seconds > 0 else 0.0
    if not agree.any(made >= 1.0):
        return samples, steps
    steady = last.wait_seconds / last_batches if last_batches else 0.0
    drawn0 = meter.batches
    while True:
        drawn = meter.batches - drawn0
        more = drawn <= DRAIN_CAP * prefetched and (drawn == 0 or meter.last_wait < steady / 2)
        if not agree.any(more):
            break
        samples += step(meter)
        steps += 1
    device.synchronize()  # the clock reads that follow decide the budget: on what the drain did, not launched
    return samples, steps
