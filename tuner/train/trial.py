"""Train one configuration within its budget and return measured figures: the unit every search trial runs."""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tuner.config import TrialConfig
from tuner.device import Device, resolve_device
from tuner.errors import error_line
from tuner.measure.timing import summarize
from tuner.train.loop import forever, run_loop
from tuner.study import TrialResult
from tuner.train.workloads import CnnStep, GanStep


def _distributed() -> tuple[int, int]:
    """(rank, world size); (0, 1) unless a torch.distributed process group is up (DDP under Ray Train)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _wrap_ddp(model: nn.Module, device: Device) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel as DDP

    ids = [device.torch_device.index] if device.is_cuda else None
    # broadcast_buffers=False: D runs twice (real, fake) before one backward; re-broadcasting BatchNorm buffers
    # between those forwards is an in-place change autograd refuses.
    return DDP(model, device_ids=ids, broadcast_buffers=False)


def preflight(cfg: TrialConfig) -> Device:
    """Refuse what would fail later, before any work starts: device, precision, pin_memory, dataset, FID weights."""
    from tuner.data import check_dataset

    device = resolve_device(cfg.params.device)
    device.check_precision(cfg.params.precision)
    device.check_pin_memory(cfg.params.pin_memory)
    check_dataset(cfg.dataset)
    if cfg.workload == "gan" and cfg.quality.enabled and cfg.quality.fid_features == "inception":
        from tuner.measure.quality import check_fid_weights

        check_fid_weights(cfg.quality)
    return device


def run_trial(
    cfg: TrialConfig,
    *,
    cache_dir: Path,
    out_dir: Path | None = None,
    device: Device | None = None,
    wall_limit_s: float | None = None,
    on_window: Callable[[dict[str, Any]], None] | None = None,
) -> TrialResult:
    """Run `cfg`; `oom` and `diverged` come back as states. Bad input (device, precision, dataset) raises UserError."""
    from tuner.data import load_datasets, make_loader

    p = cfg.params
    device = device or resolve_device(p.device)
    device.check_precision(p.precision)
    device.check_pin_memory(p.pin_memory)
    if p.threads is not None:
        torch.set_num_threads(p.threads)
    rank, world = _distributed()
    torch.manual_seed(p.seed + rank)

    data = load_datasets(cfg.dataset, cfg.image_size, Path(cache_dir), seed=p.seed)
    sampler = None
    if world > 1:
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(data.train, num_replicas=world, rank=rank, seed=p.seed, drop_last=True)
    loader = make_loader(data.train, p, device, shuffle=sampler is None, seed=p.seed, sampler=sampler)

    torch.manual_seed(p.seed)  # same initial weights on every rank and for every knob that leaves the model alone
    models: dict[str, nn.Module]
    if cfg.workload == "gan":
        from tuner.models import Discriminator, Generator

        models = {"g": Generator(channels=data.channels, image_size=cfg.image_size),
                  "d": Discriminator(channels=data.channels, image_size=cfg.image_size)}
    else:
        from tuner.models import SmallCNN

        models = {"c": SmallCNN(channels=data.channels, num_classes=data.num_classes)}
    models = {k: m.to(device.torch_device) for k, m in models.items()}
    if world > 1:
        models = {k: _wrap_ddp(m, device) for k, m in models.items()}
    step = GanStep(models["g"], models["d"], p, device) if cfg.workload == "gan" else CnnStep(models["c"], p, device)

    result = TrialResult(state="complete", device=device.describe())
    device.reset_peak_memory()
    t0 = time.perf_counter()
    batches = forever(loader, sampler.set_epoch if sampler is not None else None)
    try:
        loop = run_loop(step, batches, budget=cfg.budget, measure=cfg.measure, device=device,
                        wall_limit_s=wall_limit_s, on_window=on_window)
    except torch.OutOfMemoryError as err:
        result.state, result.error = "oom", error_line(err)
        result.metrics.update(train_seconds=time.perf_counter() - t0, peak_mem_mb=device.peak_memory_mb())
        step = models = None  # drop every reference to the big tensors before emptying the cache
        gc.collect()
        device.free_memory()
        return result
    finally:
        batches.close()  # stops the loader's worker processes now, not at garbage collection

    summary = summarize(loop.windows)
    scale = world  # every rank trains its own shard at the same time
    result.windows = [w * scale for w in summary.windows]
    result.metrics.update(
        throughput=summary.throughput * scale if summary.throughput is not None else None,
        throughput_spread=summary.spread, throughput_overall=summary.overall * scale if summary.overall else None,
        data_wait=summary.data_wait, peak_mem_mb=device.peak_memory_mb(), train_seconds=loop.seconds,
        samples=loop.samples * world, steps=loop.steps)
    result.capped, result.loss_curve = loop.capped, loop.loss_curve
    if loop.diverged:
        result.state, result.error = "diverged", "non-finite training loss"
        return result

    if cfg.quality.enabled and rank == 0:
        try:
            quality = _evaluate(cfg, models, data, device, Path(cache_dir), out_dir)
        except torch.OutOfMemoryError as err:
            result.state, result.error = "oom", "during quality evaluation: " + error_line(err)
            device.free_memory()
            return result
        result.sample_grid = quality.pop("sample_grid", None)
        result.metrics.update(quality)
        fid = quality.get("fid")
        if fid is not None and not math.isfinite(fid):  # the loss was finite but the generator's images are not
            result.state, result.error = "diverged", "generator produced non-finite images (FID undefined)"
            result.metrics["fid"] = None
    return result


def _evaluate(cfg: TrialConfig, models: dict[str, nn.Module], data: Any, device: Device, cache_dir: Path,
              out_dir: Path | None) -> dict[str, Any]:
    from tuner.measure import quality

    unwrap = lambda m: getattr(m, "module", m)  # noqa: E731 - DDP keeps the model in .module
    if cfg.workload == "cnn":
        return quality.evaluate_cnn(unwrap(models["c"]), data, device)
    grid = Path(out_dir) / "samples.png" if out_dir is not None else None
    out = quality.evaluate_gan(unwrap(models["g"]), data, cfg.quality, cache_dir, device, sample_grid=grid)
    if grid is not None and grid.exists():
        out["sample_grid"] = str(grid)
    return out
