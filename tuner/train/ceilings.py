"""A trial's two ceilings measured with its own workload, models and loader knobs (see tuner.measure.ceiling),
looked up first in the study's cache. Used after a trial's training and by a study's loader probes."""

from __future__ import annotations

import gc
import time
from typing import Any

from torch import nn

from tuner.config import TrialConfig
from tuner.device import Device, is_oom
from tuner.measure.timing import Clock
from tuner.measure.ceiling import CeilingCache, CeilingSkipped, cache_key, compute_ceiling, input_ceiling
from tuner.train.batch import to_device
from tuner.train.distributed import Agreement
from tuner.train.loop import forever
from tuner.train.step import PhaseStep
from tuner.workload.api import Workload

KINDS = ("compute", "input")


def ceiling_keys(cfg: TrialConfig, device: Device, world: int = 1) -> dict[str, str]:
    """The cache key of each ceiling: what it depends on and nothing else, the knobs from tuner.knobs (loader knobs
    do not move the compute ceiling; accumulation, precision and the optimizer do not move the input ceiling)."""
    from tuner.knobs import CEILINGS, ceiling_knobs

    p = cfg.params
    shared = {"workload": cfg.workload, "options": cfg.workload_options, "dataset": cfg.dataset,
              "device": device.describe(), "world": world}
    return {kind: cache_key(kind, {**shared, **{name: getattr(p, name) for name in ceiling_knobs(kind)}})
            for kind in CEILINGS}


def measure_ceiling(kind: str, cfg: TrialConfig, device: Device, workload: Workload, train_set: Any,
                    models: dict[str, nn.Module], seconds: float, world: int = 1, *,
                    step_seconds: float | None = None, notes: dict[str, str] | None = None,
                    clock: Clock = time.perf_counter) -> float | None:
    """One ceiling, all ranks together (samples/s summed over ranks), within `seconds` of wall time; None when it
    could not be measured (the reason in `notes[kind]` when it was skipped for its deadline). The compute ceiling
    trains `models` with a fresh optimizer: pass models whose weights no longer matter. `step_seconds`, the
    trial's settled step, skips a compute ceiling whose deadline cannot hold enough steps before it starts."""
    from tuner.data import make_loader

    p = cfg.params
    try:
        if kind == "compute":
            from tuner.measure.ceiling import check_fits, ceiling_measure

            check_fits(seconds, step_seconds, ceiling_measure(seconds, cfg.measure))
            plain = p.model_copy(update={"num_workers": 0, "prefetch_factor": None, "persistent_workers": False,
                                         "pin_memory": False})
            one = next(iter(make_loader(train_set, plain, device, seed=p.seed, collate_fn=workload.collate)))
            step = PhaseStep(workload, models, p, device)
            value = compute_ceiling(step, to_device(one, device.torch_device), device, seconds, Agreement(world),
                                    measure=cfg.measure, clock=clock)
        else:
            loader = make_loader(train_set, p, device, seed=p.seed + 1, collate_fn=workload.collate)
            batches = forever(loader)
            try:
                value = input_ceiling(batches, device, seconds, pinned=p.pin_memory, measure=cfg.measure, clock=clock,
                                      warmup_batches=2 + p.num_workers * (p.prefetch_factor or 2))
            finally:
                batches.close()  # the workers stop now
    except CeilingSkipped as why:
        if notes is not None:
            notes[kind] = str(why)
        return None
    except Exception as err:  # noqa: BLE001 - a ceiling is evidence; whatever it ran beside stands
        if is_oom(err):
            gc.collect()
            device.free_memory()
        return None
    return value * world if value is not None else None


def ceilings(cfg: TrialConfig, device: Device, workload: Workload, train_set: Any, models: dict[str, nn.Module],
             seconds: float, cache: CeilingCache | None = None, *, rank: int = 0, world: int = 1,
             kinds: tuple[str, ...] = KINDS, step_seconds: float | None = None,
             notes: dict[str, str] | None = None, clock: Clock = time.perf_counter) -> dict[str, float | None]:
    """Each ceiling in `kinds`, from the cache or measured (and then cached), each within `seconds` of wall
    time; why one was skipped goes to `notes`. Under DDP every rank measures: a cache hit on one rank and a miss
    on another would leave the others waiting in a collective."""
    cache = cache if world == 1 else None
    keys = ceiling_keys(cfg, device, world)
    out: dict[str, float | None] = {}
    for kind in kinds:
        value = cache.get(keys[kind]) if cache is not None else None
        if value is None:
            value = measure_ceiling(kind, cfg, device, workload, train_set, models, seconds, world,
                                    step_seconds=step_seconds, notes=notes, clock=clock)
            if value is not None and cache is not None and rank == 0:
                cache.put(keys[kind], value, {"kind": kind, "params": cfg.params.model_dump(mode="json")})
        out[kind] = value
    return out
