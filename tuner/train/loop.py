"""The budgeted, measured training loop every workload runs.

[compiled models: torch.compile's first steps, until one compiles nothing; outside the budget and the wall cap] ->
warm-up steps (untimed, until the step time settles) -> timed windows until the budget (seconds or samples) is
spent. Each window holds at least `measure.window_min_steps` steps and lasts `measure.window_min_seconds`: a budget
too short for `measure.windows` of them takes fewer (down to `measure.min_windows`, and fewer still rather than
overrun when the step slowed after the pre-flight), never one-step windows. The
loss is read at window ends, which is where divergence is detected. A seconds budget is kept to within one step
(plus the last window's minimum when the pre-flight's estimate of the step was wrong); the wall cap is a backstop,
and a window it cuts before it holds its minimum steps is dropped, not read.

Every clock read that ends a window, spends the budget or crosses a rung point follows a device sync; on CUDA a
seconds window's end is decided at a few synced looks (tuner.train._looks). The wall cap alone reads the host
clock at every step: the host clock is never ahead of the synced one, so when it says the cap is reached, it is.
Where a window also ends for a rung's or a target's evaluation is tuner.train._points's; the untimed steps that
drain the prefetch queue a pause between windows refilled, tuner.train._drain's.

Under DDP every decision a rank would take from its own clock or loss is agreed (tuner.train.distributed): warm-up
stops together, windows hold a step count fixed at their start (the slowest rank's pace), and the wall cap and a
non-finite loss are agreed at window ends, so no rank takes a step the others do not.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from tuner.config import Budget, Measure
from tuner.device import Device
from tuner.measure.timing import Clock, WaitMeter, Window, WindowTimer
from tuner.train._drain import drain
from tuner.train._looks import seconds_window
from tuner.train._points import EvalPoints
from tuner.train.distributed import Agreement

if TYPE_CHECKING:
    from tuner.train.compile import CompileWatch


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
    warmup_steps: int = 0
    step_seconds: float | None = None  # the last warm-up step's wall time (all ranks: the slowest), device synced
    dropped_steps: int = 0  # steps of a window the wall cap cut before it held window_min_steps (not a reading)
    compile_seconds: float | None = None  # torch.compile's first steps, before `seconds` and the budget start
    compile_steps: int = 0
    skipped_windows: int = 0  # windows not started: at the pace read so far they could not end within the budget
    drained_steps: int = 0  # untimed steps before a window that emptied the prefetch queue a pause had refilled
    tail_steps: int = 0  # untimed steps that end a samples budget too short for one more window (not a reading)



def window_count(left: float, one_window: float, measure: Measure) -> int:
    """How many windows fit `left` (seconds or samples) when each needs at least `one_window`: `measure.windows`
    when they fit, fewer when not, never fewer than `min_windows` (which then take longer than `left`)."""
    low = min(measure.min_windows, measure.windows)
    fit = int(left // one_window) if one_window > 0 else measure.windows
    return max(low, min(measure.windows, fit))


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
    rung_points: list[float] | Callable[[], list[float]] | None = None,
    compiling: CompileWatch | None = None,
    reserve: Callable[[float | None, int], float] | None = None,
    stop: Callable[[list[float]], bool] | None = None,
    prefetched: int = 0,
    sample_points: Callable[[], list[int]] | None = None,
    pause_clock: Clock | None = None,
) -> LoopResult:
    """`rung_points`: budgets (the budget's unit, from the loop's start) where a window also ends, once it holds
    its minimum steps and seconds, so a rung's evaluation reads the model at its budget (not under DDP, whose
    windows hold step counts agreed at their start: there the rung follows at the next window's end). A callable
    is asked again at each check: rung points that move with the reserve (tuner.train.trial).

    `reserve(step_seconds, step_samples)`: the seconds of a seconds budget kept for what follows the windows
    (scoring, rung evaluations still to come), asked at warm-up's steps and at each window start with the pace
    warm-up measured, so the windows end that much earlier. A window after the first is not started when, at
    the pace of the windows so far, it could not end within a step of then (`skipped_windows`): a step that slowed after the
    pre-flight shortens the reading, not the contract.

    `stop(rates)`, given the timed windows' samples/s after each window, True ends the reading there (a ceiling
    probe whose rate has settled; not under DDP, whose ranks end together).

    `prefetched`: how many batches the loader's workers hold ready (num_workers x prefetch_factor; 0 without
    workers): what a pause between windows refills, drained untimed before the next window. `pause_clock` reads
    that pause: the wall clock, where `clock` leaves out what runs between windows (a trial's rung and target
    evaluations, tuner.train.trial), since the workers fill the queue during them all the same (`clock` if None).

    `sample_points`: training samples (all ranks) where a window also ends once it holds its minimums, as at a rung
    point, for a target's evaluation every K samples (tuner.train.trial): a window cut there short of its own end
    is not one of the `measure.windows` (the ones after it still share what is left), so evaluations as frequent as
    the minimums allow leave the budget's windows as they were; a samples budget still ends where it says (the windows those cuts leave no
    room for are skipped, and its last samples, too few for a window, trained untimed). Warm-up ends before a
    sample point, and before a samples budget could no longer hold the fewest windows. Not under DDP, like rung
    points."""
    agree = agree or Agreement()
    shared_pace = agree.world > 1
    wall = pause_clock or clock
    meter = WaitMeter(batches, clock)
    timer = WindowTimer(device, meter, clock)
    res = LoopResult(windows=timer.windows)
    if compiling is not None:  # torch.compile's first steps: before the budget, the wall cap and the warm-up start
        from tuner.train.compile import run_compile_warmup

        first = run_compile_warmup(step, meter, compiling, device, clock, agree)
        res.compile_seconds, res.compile_steps = first.seconds, first.steps
        res.samples += first.samples
        res.steps += first.steps
    device.synchronize()  # the budget starts with what was launched before it done
    start = clock()

    def used() -> float:
        """The budget used so far, in its unit (warm-up included, as the budget counts it)."""
        return clock() - start if budget.seconds is not None else float(res.samples * agree.world)

    points = EvalPoints(rung_points, sample_points, world=agree.world, used=used, trained=lambda: res.samples)
    has_points = points.any
    min_steps, min_s = measure.window_min_steps, measure.window_min_seconds

    def over_wall() -> bool:
        """The host clock, read after a step without a sync: never ahead of the synced clock, so a cap it says is
        reached is reached (the window it cuts closes on a synced read)."""
        return wall_limit_s is not None and clock() - start >= wall_limit_s

    def timed_need(step_s: float) -> float:
        """Seconds the fewest windows of the least length take at this pace."""
        return min(measure.min_windows, measure.windows) * max(min_steps * step_s, min_s)

    def timed_steps() -> int:
        """Steps the fewest windows of a samples budget hold at least."""
        return min(measure.min_windows, measure.windows) * min_steps

    def kept(step_s: float | None, samples: int) -> float:
        return reserve(step_s, samples) if reserve is not None and budget.seconds is not None else 0.0

    # Warm-up: untimed, each step synced (nothing is timed here, so the syncs cost no reading). It ends when two
    # consecutive steps agree within warmup_settle (after warmup_steps, before warmup_max_steps), or earlier when
    # going on would leave the budget too little for the timed windows. Under DDP at least one step, to learn the
    # shared pace, and every rank stops at the same step.
    low = max(measure.warmup_steps, 1) if shared_pace and budget.seconds is not None else measure.warmup_steps
    high = max(low, measure.warmup_max_steps)
    prev: float | None = None
    step_n = 0
    while low > 0 and res.warmup_steps < high:
        t = clock()
        step_n = step(meter)
        res.samples += step_n
        res.steps += 1
        res.warmup_steps += 1
        device.synchronize()
        step_s = clock() - t
        settled = prev is not None and abs(step_s - prev) <= measure.warmup_settle * min(step_s, prev)
        prev = step_s
        elapsed = clock() - start
        force = res.warmup_steps >= high or (budget.seconds is not None and res.warmup_steps >= low
                                             and elapsed + step_s + timed_need(step_s)
                                             > budget.seconds - kept(step_s, step_n))
        # a samples budget alike (its windows' fewest steps left after one more), and a target's sample point
        # the next step would pass: evaluated at the end of the first window, not after 20 unsettled steps
        force = force or (budget.samples is not None and res.warmup_steps >= low
                          and (res.samples + step_n * (1 + timed_steps())) * agree.world > budget.samples)
        force = force or (res.warmup_steps >= low and not shared_pace
                          and any(k <= (res.samples + step_n) * agree.world for k in points.samples_ahead()))
        force = force or (wall_limit_s is not None and elapsed + 2 * step_s >= wall_limit_s)
        verdict = agree.max(2.0 if force else 0.0 if settled and res.warmup_steps >= low else 1.0)
        if verdict != 1.0:  # 2: some rank must stop; 0: every rank has settled
            break
    if prev is not None:
        res.step_seconds = agree.max(prev) if shared_pace else prev
    if res.warmup_steps and agree.any(not math.isfinite(step.pop_mean_loss())):
        res.diverged = True
        res.seconds = clock() - start
        return res

    if wall_limit_s is not None and agree.any(over_wall()):  # warm-up alone used the cap: no step more
        res.capped = True
        res.seconds = clock() - start
        return res

    # Windows: as many as fit (measure.windows at most, min_windows at least), each at least window_min_steps
    # steps and window_min_seconds long; what is left of a seconds budget is split again at each window start,
    # so a slow window takes its time from the later ones rather than from the budget.
    step_s = res.step_seconds or 0.0
    if budget.seconds is not None:
        def end() -> float:  # the training share's end: the budget less what is kept for after it
            return start + budget.seconds - kept(res.step_seconds, step_n)

        n_windows = window_count(max(end() - clock(), 0.0), max(min_steps * step_s, min_s), measure)
        window_s = lambda i: max((end() - clock()) / (n_windows - i), min_s)  # noqa: E731
    else:
        per_step = step_n * agree.world
        left = max(budget.samples - res.samples * agree.world, 0)
        n_windows = window_count(left, min_steps * per_step, measure) if per_step else measure.windows
        window_n = max(math.ceil(left / n_windows / agree.world), 1)

    read_s, read_steps = 0.0, 0  # the windows read so far: their pace
    w_batches, closed_at = 0, 0.0
    i, extra, w_target = 0, 0, 0.0
    while i < n_windows:
        if timer.windows:  # after every window read, one cut at a sample point too (i stays)
            drained, n_drained = drain(step, meter, prefetched=prefetched, last=timer.windows[-1],
                                       last_batches=w_batches, closed_at=closed_at, wall=wall, agree=agree,
                                       device=device)
            res.samples += drained
            res.steps += n_drained
            res.drained_steps += n_drained
        if budget.seconds is None and not has_points:  # what is left over the windows left (drains took some)
            window_n = max(math.ceil(max(budget.samples - res.samples * agree.world, 0) / (n_windows - i)
                                     / agree.world), 1)
        if budget.seconds is not None and read_steps and not shared_pace:
            pace = read_s / read_steps
            if clock() + max(min_steps * pace, min_s) > end() + pace:  # within a step of it, as the last window
                res.skipped_windows = n_windows - i
                break
        if budget.samples is not None and read_steps and not shared_pace and (
                res.samples + (min_steps - 1) * step_n) * agree.world > budget.samples:
            res.skipped_windows = n_windows - i  # windows cut at sample points took the rest: the budget holds
            break
        w_used, w_samples = used(), res.samples * agree.world
        if budget.seconds is not None:
            if shared_pace:  # a step count every rank shares, from the slowest rank's pace and clock
                local = math.ceil(window_s(i) / max(step_s, 1e-6))
                target = int(agree.max(max(min_steps, local)))
                window_done = lambda w_start, n: n >= target  # noqa: E731
            else:
                w_target = window_s(i)
                window_done = seconds_window(w_target, w_used, read_s / read_steps if read_steps else step_s,
                                             measure=measure, device=device, clock=clock, used=used,
                                             points=points, step_n=step_n)
        else:
            if has_points:  # a window cut at a rung point leaves the rest of the budget to the windows after it
                window_n = max(math.ceil(max(budget.samples - res.samples * agree.world, 0) / (n_windows - i)
                                         / agree.world), 1)
            window_done = lambda w_start, n: n >= min_steps and (timer.open_samples >= window_n  # noqa: E731
                                                                 or points.crossed(w_used))
        timer.start()  # restarted per window: callbacks and the loss read below stay outside the timed region
        w_start, n_steps, b_start = clock(), 0, meter.batches
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
        w_end = clock()  # synced by close(): the pause starts here
        w_batches, closed_at = meter.batches - b_start, w_end if pause_clock is None else wall()
        w_len = w_end - w_start
        # cut at a sample point short of its own end (read before on_window moves the next point): not a window of n
        cut = sample_points is not None and not shared_pace and points.sample_due() and (
            w_len < w_target if budget.seconds is not None
            else res.samples * agree.world - w_samples < window_n * agree.world)
        if n_steps < min_steps:  # cut by the wall cap: too few steps to be a reading
            timer.windows.pop()
            res.dropped_steps += n_steps
        else:
            read_s, read_steps = read_s + clock() - w_start, read_steps + n_steps
        device.sample_memory()
        loss = step.pop_mean_loss()
        res.loss_curve.append([res.samples * agree.world, loss])
        if agree.any(not math.isfinite(loss)):
            res.diverged = True
            break
        if on_window is not None and n_steps >= min_steps:
            w = timer.windows[-1]
            on_window({"window": len(timer.windows), "throughput": w.throughput * agree.world, "train_loss": loss,
                       "samples": res.samples * agree.world, "budget_used": used(),
                       "timed_samples": w.samples * agree.world, "timed_seconds": w.seconds})
        extra, i = (extra + 1, i) if cut else (extra, i + 1)
        if res.capped or agree.any(over_wall()):
            res.capped = res.capped or len(timer.windows) - extra < n_windows
            break
        if stop is not None and not shared_pace and stop([w.throughput for w in timer.windows]):
            break
    if budget.samples is not None and res.skipped_windows and not res.capped:
        # the budget's last samples, too few for a window's fewest steps: trained, untimed, so a samples budget
        # ends where it says (a target's evaluation due there follows the loop: tuner.train.trial)
        while res.samples * agree.world < budget.samples and not over_wall():
            res.samples += step(meter)
            res.steps += 1
            res.tail_steps += 1
        device.synchronize()
        res.diverged = res.diverged or res.tail_steps > 0 and agree.any(not math.isfinite(step.pop_mean_loss()))
    res.seconds = clock() - start
    return res
