"""A trial's two ceilings measured with its own workload, models and loader knobs (see tuner.measure.ceiling),
looked up first in the study's cache; compute_ceiling and input_ceiling drive the step or the loader for them. Used after a trial's training and by a study's loader probes."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from torch import nn

from tuner.config import Budget, Measure, Params, TrialConfig
from tuner.device import Device, is_oom
from tuner.knobs import probed
from tuner.measure.ceiling import (MIN_WINDOWS, CeilingCache, CeilingSkipped, ceiling_cache_keys, ceiling_measure,
                                   check_fits, settled, stable_measure)
from tuner.measure.timing import Clock, WaitMeter, WindowTimer, summarize
from tuner.data import batch_len, to_device
from tuner.train.distributed import Agreement
from tuner.train.loop import forever, run_loop
from tuner.train.step import PhaseStep
from tuner.workload import Workload

KINDS = ("compute", "input")


def compute_ceiling(step: Any, batch: Any, device: Device, seconds: float, agree: Any = None,
                    clock: Clock = time.perf_counter, *, step_seconds: float | None = None,
                    measure: Measure | None = None, stable: float | None = None) -> float | None:
    """Samples/s of `step` (a tuner.train.step.PhaseStep) fed `batch`, already on the device, over and over,
    within `seconds` of wall time (warm-up included). `step_seconds` (the trial's settled step) decides before
    any step whether the deadline can hold a reading: CeilingSkipped when not, or when the deadline cut it.
    `stable` (a fraction; the probes'): shorter windows, and the reading ends once the last WINDOWS agree within
    it (tuner.measure.ceiling.settled) instead of at the deadline."""
    m = ceiling_measure(seconds, measure) if stable is None else stable_measure(seconds, measure)
    check_fits(seconds, step_seconds, m)
    stop = (lambda rates: settled(rates, stable)) if stable is not None else None  # noqa: E731
    loop = run_loop(step, repeat(batch), budget=Budget(seconds=seconds), measure=m, device=device, agree=agree,
                    clock=clock, wall_limit_s=seconds, stop=stop)
    if loop.diverged:
        return None
    if len(loop.windows) < MIN_WINDOWS:
        raise CeilingSkipped(f"cut at its {seconds:.3g} s deadline after {len(loop.windows)} full window(s) "
                             f"(steps of about {loop.step_seconds or 0:.3g} s)", step_seconds=loop.step_seconds)
    return summarize(loop.windows).median  # a ceiling is the median window (tuner.measure.ceiling.WINDOWS)


def input_ceiling(batches: Iterator[Any], device: Device, seconds: float, *, warmup_batches: int = 2,
                  pinned: bool = False, clock: Clock = time.perf_counter, measure: Measure | None = None,
                  stable: float | None = None) -> float:
    """Samples/s a batch iterator (the trial's loader, endless) delivers to the device within `seconds` of wall
    time: each batch is copied as training copies it (non_blocking when pinned), the device is synced at window
    ends, and each window holds at least the trial's minimum of batches. CeilingSkipped when the deadline cannot
    hold MIN_WINDOWS such windows. `stable`: as compute_ceiling's."""
    m = ceiling_measure(seconds, measure) if stable is None else stable_measure(seconds, measure)
    windows = m.windows
    dev = device.torch_device
    start = clock()
    deadline = start + seconds
    for _ in range(warmup_batches):  # worker start-up and the first prefetch are start-up, not steady state
        to_device(next(batches), dev, pinned)
        if clock() >= deadline:
            raise CeilingSkipped(f"the loader's start-up ({warmup_batches} batches) took longer than its "
                                 f"{seconds:.3g} s deadline")
    meter = WaitMeter(batches, clock)
    timer = WindowTimer(device, meter, clock)
    for i in range(windows):
        window_s = max((deadline - clock()) / (windows - i), m.window_min_seconds)
        timer.start()
        t0, n = clock(), 0
        cut = False
        while True:
            batch = to_device(next(meter), dev, pinned)
            timer.add(batch_len(batch, 1))
            n += 1
            if n >= m.window_min_steps and clock() - t0 >= window_s:
                break
            if clock() >= deadline:
                cut = True
                break
        timer.close()
        if n < m.window_min_steps:
            timer.windows.pop()
        if cut or clock() >= deadline:
            break
        if stable is not None and settled([w.throughput for w in timer.windows], stable):
            break
    if len(timer.windows) < MIN_WINDOWS:
        raise CeilingSkipped(f"cut at its {seconds:.3g} s deadline after {len(timer.windows)} full window(s)")
    return summarize(timer.windows).median  # type: ignore[return-value]


def ceiling_keys(cfg: TrialConfig, device: Device, world: int = 1) -> dict[str, str]:
    """The cache key of each ceiling (tuner.measure.ceiling.ceiling_cache_keys, which reports read too)."""
    return ceiling_cache_keys(cfg, device.describe(), world)


def first_batch(cfg: TrialConfig, device: Device, workload: Workload, train_set: Any) -> Any:
    """The batch a compute ceiling steps on, on the device: the first of the trial's loader without workers
    (loader knobs do not change the compute ceiling). The same for every setting of the speed knobs at one batch
    size, so the probes take it once there (the steps never change it: a ceiling repeats one batch)."""
    from tuner.data import make_loader

    p = cfg.params
    plain = p.model_copy(update=Params.defaults(probed("input")))  # tuner's default loader: in-process, unpinned
    one = next(iter(make_loader(train_set, plain, device, seed=p.seed, collate_fn=workload.collate)))
    return to_device(one, device.torch_device)


@dataclass(frozen=True)
class CeilingNote:
    """Why a ceiling gave no reading: skipped (its deadline could not hold one, or cut it) or, with `raised`, the
    workload's own error at its innermost line (not out of memory: that is the config's, and says nothing)."""

    text: str
    raised: bool = False
    step_seconds: float | None = None  # a compute reading cut at its deadline: the step it timed

    def __str__(self) -> str:
        return f"raised {self.text}" if self.raised else self.text


def measure_ceiling(kind: str, cfg: TrialConfig, device: Device, workload: Workload, train_set: Any,
                    models: dict[str, nn.Module], seconds: float, world: int = 1, *,
                    step_seconds: float | None = None, notes: dict[str, CeilingNote] | None = None,
                    clock: Clock = time.perf_counter, stable: float | None = None, batch: Any = None) -> float | None:
    """One ceiling, all ranks together (samples/s summed over ranks), within `seconds` of wall time; None when it
    could not be measured (why in `notes[kind]` when it was skipped for its deadline or raised). The compute ceiling
    trains `models` with a fresh optimizer: pass models whose weights no longer matter. `step_seconds`, the
    trial's settled step, skips a compute ceiling whose deadline cannot hold enough steps before it starts.
    `batch`: the compute ceiling's first_batch, when the caller took it already (None: taken here)."""
    from tuner.data import make_loader

    p = cfg.params
    try:
        if kind == "compute":
            check_fits(seconds, step_seconds, ceiling_measure(seconds, cfg.measure))
            one = batch if batch is not None else first_batch(cfg, device, workload, train_set)
            step = PhaseStep(workload, models, p, device)
            value = compute_ceiling(step, one, device, seconds, Agreement(world),
                                    measure=cfg.measure, clock=clock, stable=stable)
        else:
            loader = make_loader(train_set, p, device, seed=p.seed + 1, collate_fn=workload.collate)
            batches = forever(loader)
            try:
                value = input_ceiling(batches, device, seconds, pinned=p.pin_memory, measure=cfg.measure, clock=clock,
                                      warmup_batches=2 + p.num_workers * (p.prefetch_factor or 2), stable=stable)
            finally:
                batches.close()  # the workers stop now
    except CeilingSkipped as why:
        if notes is not None:
            notes[kind] = CeilingNote(str(why), step_seconds=why.step_seconds)
        return None
    except Exception as err:  # noqa: BLE001 - a ceiling is evidence; whatever it ran beside stands
        if is_oom(err):
            gc.collect()
            device.free_memory()
        elif notes is not None:  # said, not swallowed: a bug in the workload at this config shows here first
            from tuner.workload import user_error_line

            notes[kind] = CeilingNote(user_error_line(err), raised=True)
        return None
    return value * world if value is not None else None


def ceilings(cfg: TrialConfig, device: Device, workload: Workload, train_set: Any, models: dict[str, nn.Module],
             seconds: float, cache: CeilingCache | None = None, *, rank: int = 0, world: int = 1,
             kinds: tuple[str, ...] = KINDS, step_seconds: float | None = None,
             notes: dict[str, CeilingNote] | None = None, clock: Clock = time.perf_counter,
             stable: float | None = None, batch: Any = None) -> dict[str, float | None]:
    """Each ceiling in `kinds`, from the cache or measured (and then cached), within `seconds` of wall time each;
    why one was skipped goes to `notes`; `stable`: a reading may end once its rate settled (the probes');
    `batch`: the compute ceiling's first_batch, taken already (measure_ceiling).
    A kind the cache holds costs nothing, so the ones measured share its seconds too: after a search's trial the
    input ceiling is usually the probes' (cached), and the GAN's compute ceiling, whose 0.75 s could not hold its
    0.145 s steps on a loaded moment, was skipped in every re-run of a default study (row 11 not measured). The
    whole stays within len(kinds) x `seconds`, the budget's margin for ceilings.
    Under DDP every rank measures: a cache hit on one rank and a miss on another would leave the others waiting
    in a collective."""
    cache = cache if world == 1 else None
    keys = ceiling_keys(cfg, device, world)
    out: dict[str, float | None] = {kind: cache.get(keys[kind]) if cache is not None else None for kind in kinds}
    missing = [kind for kind in kinds if out[kind] is None]
    each = seconds * len(kinds) / len(missing) if missing else seconds
    for kind in kinds:
        value = out[kind]
        if value is None:
            value = measure_ceiling(kind, cfg, device, workload, train_set, models, each, world,
                                    step_seconds=step_seconds, notes=notes, clock=clock, stable=stable,
                                    batch=batch)
            if value is not None and cache is not None and rank == 0:
                cache.put(keys[kind], value, {"kind": kind, "params": cfg.params.model_dump(mode="json")})
        out[kind] = value
    return out
