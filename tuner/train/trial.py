"""Train one configuration of one workload within its budget and measure it: the unit every search trial runs.

Failures are states, not exceptions: an out-of-memory anywhere in the trial (building the models, wrapping them in
DDP, a cuDNN/cuBLAS workspace, training, scoring) is `oom`; a non-finite loss or quality metric is `diverged`; an
exception raised by the workload's own code is `error`, with the user's frames kept. Bad input tuner itself
refuses (a device this machine lacks, a batch larger than the dataset) raises a UserError instead.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tuner.config import TrialConfig
from tuner.device import Device, is_oom, resolve_device
from tuner.errors import TunerError, error_line
from tuner.measure.ceiling import CeilingCache
from tuner.measure.timing import summarize
from tuner.study import TrialResult
from tuner.study.headroom import assess
from tuner.train.batch import to_device
from tuner.train.ceilings import ceilings
from tuner.train.deadline import setup_deadline
from tuner.train.distributed import Agreement, rank_world, unwrap, wrap_ddp
from tuner.train.loop import forever, run_loop
from tuner.train.step import PhaseStep
from tuner.workload.api import Workload
from tuner.workload.context import TrialContext, running
from tuner.workload.loader import build, parse_ref, user_error_line, user_traceback


CEILING_SHARE = 0.05  # each ceiling's deadline is at most this share of the budget: both fit the 10% margin

BUDGET_MARGIN_SHARE = 0.1  # a trial's wall time (training, ceilings, scoring) stays within the budget plus
BUDGET_MARGIN_STEPS = 2  # this share of it and this many steps (README: "The budget")


def budget_margin(budget_s: float, step_s: float | None) -> float:
    """The stated margin over a seconds budget: 10% of it (the two ceilings' deadlines) and two steps (the
    window that ends on the step past the budget, and one more where the step time moved after warm-up)."""
    return BUDGET_MARGIN_SHARE * budget_s + BUDGET_MARGIN_STEPS * (step_s or 0.0)


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """torch's CPU compute threads for this trial only: a reused Ray actor must not hand them to the next trial."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


@contextlib.contextmanager
def trial_scope(cfg: TrialConfig, device: Device, cache_dir: Path, out_dir: Path | None) -> Iterator[None]:
    """What a trial runs under, restored afterwards: its CPU threads, its device's numerics (TF32), and the
    context its workload reads (tuner.trial_context())."""
    with torch_threads(cfg.params.threads), device.numerics(cfg.params), \
            running(make_context(cfg, device, cache_dir, out_dir)):
        yield


def make_context(cfg: TrialConfig, device: Device, cache_dir: Path, out_dir: Path | None,
                 preflight: bool = False) -> TrialContext:
    rank, world = rank_world()
    return TrialContext(device=device.torch_device, cache_dir=Path(cache_dir), out_dir=out_dir, seed=cfg.params.seed,
                        rank=rank, world_size=world, params=cfg.params, quality=cfg.quality, preflight=preflight)


def build_workload(cfg: TrialConfig) -> Workload:
    return build(parse_ref(cfg.workload), cfg.workload_options, cfg.dataset)


def build_models(workload: Workload, device: Device, seed: int) -> dict[str, nn.Module]:
    """Fresh models, seeded alike (the same initial weights for every knob that leaves the model alone)."""
    torch.manual_seed(seed)
    models: dict[str, nn.Module] = {}
    for name, factory in workload.models.items():
        model = factory()
        if not isinstance(model, nn.Module):
            raise TypeError(f"Workload.models[{name!r}]() returned a {type(model).__name__}, not a torch.nn.Module")
        models[name] = model.to(device.torch_device)
    return models


@dataclass
class Training:
    """What a trial trains with, built the one way every trial builds it."""

    workload: Workload
    train_set: Any
    val_set: Any
    loader: Any
    sampler: Any  # a DistributedSampler under DDP, else None
    models: dict[str, nn.Module]
    step: PhaseStep

    def batches(self) -> Iterator[Any]:
        """Endless batches; close() it to stop the loader's worker processes."""
        return forever(self.loader, self.sampler.set_epoch if self.sampler is not None else None)


def build_training(cfg: TrialConfig, device: Device, *, rank: int = 0, world: int = 1) -> Training:
    """The workload, its datasets, the loader with the config's knobs, seeded models (DDP-wrapped when world > 1)
    and their step: what run_trial trains and tuner profile records."""
    from tuner.data import make_loader

    p = cfg.params
    torch.manual_seed(p.seed + rank)
    with setup_deadline(cfg.setup_timeout_s, f"the workload factory {parse_ref(cfg.workload).attr}()"):
        workload = build_workload(cfg)
    with setup_deadline(cfg.setup_timeout_s, "the workload's datasets()"):
        train_set, val_set = workload.datasets()
    sampler = None
    if world > 1:
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, seed=p.seed, drop_last=True)
    loader = make_loader(train_set, p, device, shuffle=sampler is None, seed=p.seed, sampler=sampler,
                         collate_fn=workload.collate)
    models = build_models(workload, device, p.seed)
    if world > 1:
        models = {k: wrap_ddp(m, device) for k, m in models.items()}
    torch.manual_seed(p.seed + rank)  # after DDP's broadcast: each rank draws its own noise (latents, dropout)
    step = PhaseStep(workload, models, p, device)
    return Training(workload, train_set, val_set, loader, sampler, models, step)


@contextlib.contextmanager
def eval_mode(models: dict[str, nn.Module]) -> Iterator[None]:
    """Eval mode, no grad, fp32 for scoring; every submodule's own mode comes back afterwards."""
    modes = [(m, m.training) for model in models.values() for m in model.modules()]
    for model in models.values():
        model.eval()
    device_type = next((p.device.type for m in models.values() for p in m.parameters()), "cpu")
    try:
        with torch.no_grad(), torch.autocast(device_type, enabled=False):
            yield
    finally:
        for m, mode in modes:
            m.training = mode


def val_batches(workload: Workload, val_set: Any, device: Device, limit: int | None = None) -> Iterator[Any]:
    """The validation split in fixed batches (eval_batch_size), on the device; its own RNG, never the global one."""
    from torch.utils.data import DataLoader

    loader = DataLoader(val_set, batch_size=workload.eval_batch_size, shuffle=False, num_workers=0,
                        collate_fn=workload.collate, generator=torch.Generator())
    for i, batch in enumerate(loader):
        if limit is not None and i >= limit:
            return
        yield to_device(batch, device.torch_device)


def score(workload: Workload, models: dict[str, nn.Module], val_set: Any, device: Device,
          limit: int | None = None) -> dict[str, Any]:
    """evaluate() in eval mode, as {metric: number or text}; quality_seconds is its wall time unless it says."""
    if workload.evaluate is None:
        return {}
    plain = {k: unwrap(m) for k, m in models.items()}
    start = time.perf_counter()
    with eval_mode(plain):
        raw = workload.evaluate(plain, val_batches(workload, val_set, device, limit))
    device.synchronize()
    if not isinstance(raw, dict):
        raise TypeError(f"evaluate() must return a dict of metrics, got {type(raw).__name__}")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, torch.Tensor):
            value = value.detach().float().item() if value.numel() == 1 else str(value.tolist())
        elif value is not None and not isinstance(value, (int, float, str, bool)):
            value = str(value)
        out[str(key)] = value
    out.setdefault("quality_seconds", time.perf_counter() - start)
    return out


class _Run:
    """One trial's state, so a failure handler can read what was measured and then drop every big tensor."""

    def __init__(self, cfg: TrialConfig, device: Device, out_dir: Path | None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.cfg, self.device, self.out_dir, self.clock = cfg, device, out_dir, clock
        self.result = TrialResult(state="complete", device=device.describe())
        self.models: dict[str, nn.Module] | None = None
        self.step: PhaseStep | None = None
        self.workload: Workload | None = None
        self.train_set: Any = None
        self.t0 = clock()

    def train(self, wall_limit_s: float | None, on_window: Callable[[dict[str, Any]], None] | None,
              score_reserve_s: float | None = None) -> None:
        cfg, device = self.cfg, self.device
        rank, world = rank_world()
        training = build_training(cfg, device, rank=rank, world=world)
        workload, val_set = training.workload, training.val_set
        self.workload, self.train_set = workload, training.train_set
        self.models, self.step = training.models, training.step
        self.result.optimizer = training.step.settings

        budget = cfg.budget
        if budget.seconds is not None and score_reserve_s and cfg.quality.enabled and workload.evaluate is not None:
            # scoring's share of a seconds budget, kept out of training: the trial's wall time holds both
            keep = min(score_reserve_s, 0.9 * budget.seconds)  # the pre-flight refused a budget scoring fills
            budget = budget.model_copy(update={"seconds": budget.seconds - keep})
            self.result.metrics["score_reserve_seconds"] = keep
        device.reset_peak_memory()
        self.t0 = self.clock()
        batches = training.batches()
        try:
            loop = run_loop(self.step, batches, budget=budget, measure=cfg.measure, device=device,
                            wall_limit_s=wall_limit_s, on_window=on_window, agree=Agreement(world), clock=self.clock)
        finally:
            batches.close()  # stops the loader's worker processes now, not at garbage collection
        summary = summarize(loop.windows)
        res = self.result
        res.windows = [w * world for w in summary.windows]  # every rank trains its own shard at the same time
        res.metrics.update(
            throughput=summary.throughput * world if summary.throughput is not None else None,
            throughput_spread=summary.spread,
            throughput_overall=summary.overall * world if summary.overall is not None else None,
            data_wait=summary.data_wait, peak_mem_mb=device.peak_memory_mb(), train_seconds=loop.seconds,
            samples=loop.samples * world, steps=loop.steps, warmup_steps=loop.warmup_steps,
            step_seconds=loop.step_seconds)
        res.capped, res.loss_curve = loop.capped, loop.loss_curve
        if not loop.windows and not loop.diverged:  # no reading to rank: not a complete trial (nor worth scoring)
            res.state = "error"
            res.error = (f"the wall cap stopped training before one window of {cfg.measure.window_min_steps} steps: "
                         f"the step is too slow for this budget (raise --budget-seconds)")
            return
        per_sample = self.step.units_per_sample()
        if per_sample is not None and res.metrics.get("throughput") is not None:
            res.metrics.update(unit_throughput=res.metrics["throughput"] * per_sample, sample_unit=workload.sample_unit)
        if loop.diverged:
            res.state, res.error = "diverged", "non-finite training loss"
            return
        if rank == 0 and cfg.quality.enabled and workload.evaluate is not None:
            quality = score(workload, self.models, val_set, device)
            grid = quality.pop("sample_grid", None)
            res.sample_grid = str(grid) if grid else None
            res.metrics.update(quality)
            if workload.quality is not None:
                name = workload.quality[0]
                value = quality.get(name)
                if isinstance(value, (int, float)) and not math.isfinite(value):
                    res.state, res.error = "diverged", f"quality metric {name} is not finite (the model's outputs are not)"
                    res.metrics[name] = None

    def ceilings(self, cache: CeilingCache | None) -> None:
        """Both ceilings of a complete trial, on the same process and resources, after scoring (the models may
        train on: they are done), then the verdict. A ceiling that fails is left out; the trial stands."""
        res, cfg, p, device = self.result, self.cfg, self.cfg.params, self.device
        seconds = cfg.measure.ceiling_seconds  # a samples budget has no wall-time contract to share with
        if cfg.budget.seconds is not None:
            seconds = min(seconds, CEILING_SHARE * cfg.budget.seconds)
        if not res.complete or self.workload is None or self.models is None or seconds <= 0:
            return
        rank, world = rank_world()
        t0 = self.clock()
        self.step = None  # the training's optimizer state: the compute ceiling builds its own
        notes: dict[str, str] = {}
        found = ceilings(cfg, device, self.workload, self.train_set, self.models, seconds, cache,
                         rank=rank, world=world, step_seconds=res.value("step_seconds"), notes=notes,
                         clock=self.clock)
        for kind, value in found.items():
            res.metrics[f"{kind}_ceiling"] = value
        if notes:
            res.metrics["ceiling_skipped"] = "; ".join(f"{k}: {v}" for k, v in notes.items())
        res.metrics["ceiling_seconds"] = self.clock() - t0
        res.metrics.update(assess(res.throughput, res.metrics.get("compute_ceiling"),
                                  res.metrics.get("input_ceiling"), params=p.model_dump(),
                                  data_wait=res.metrics.get("data_wait"), device=res.device).metrics())

    def failed(self, state: str, error: str, traceback: str | None = None) -> None:
        res = self.result
        res.state, res.error, res.traceback = state, error, traceback  # type: ignore[assignment]
        res.metrics.setdefault("train_seconds", time.perf_counter() - self.t0)
        with contextlib.suppress(Exception):
            res.metrics["peak_mem_mb"] = self.device.peak_memory_mb()

    def release(self, collect: bool) -> None:
        """Drop the models, optimizers and activations. After a failure also collect cycles and return the cached
        memory: outside any except block, whose traceback would keep the activations alive (a full collection
        costs a tenth of a second, so a trial that ended well skips it)."""
        self.models = self.step = self.workload = self.train_set = None
        if collect:
            gc.collect()
            self.device.free_memory()


def run_trial(
    cfg: TrialConfig,
    *,
    cache_dir: Path,
    out_dir: Path | None = None,
    device: Device | None = None,
    wall_limit_s: float | None = None,
    on_window: Callable[[dict[str, Any]], None] | None = None,
    ceilings: CeilingCache | None = None,
    clock: Callable[[], float] = time.perf_counter,
    score_reserve_s: float | None = None,
) -> TrialResult:
    """Run `cfg`; oom / diverged / error come back as states. Bad input (device, precision, dataset) raises.
    A complete trial then measures its compute and input ceilings (looked up in `ceilings` first, a study's
    cache) and gets its headroom verdict. `clock` times the loop, the ceilings and the trial's wall_seconds
    (from the first training step to the end of the ceilings), which stays within the budget plus budget_margin
    when `score_reserve_s` (the pre-flight's estimate of scoring) is kept out of training's share."""
    p = cfg.params
    device = device or resolve_device(p.device)
    device.check_precision(p.precision)
    device.check_pin_memory(p.pin_memory)
    run = _Run(cfg, device, out_dir, clock)
    failure: tuple[str, str, str | None] | None = None
    with trial_scope(cfg, device, cache_dir, out_dir):
        try:
            run.train(wall_limit_s, on_window, score_reserve_s)
            run.ceilings(ceilings)
            run.result.metrics["wall_seconds"] = clock() - run.t0
        except (TunerError, KeyboardInterrupt):
            raise
        except BaseException as err:  # noqa: BLE001 - every other failure (a user's sys.exit() too) is a state
            if is_oom(err):
                failure = ("oom", error_line(err), None)
            else:
                failure = ("error", user_error_line(err), user_traceback(err))
        if failure is not None:
            run.failed(*failure)
        run.release(collect=failure is not None)
    return run.result
