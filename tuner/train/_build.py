"""Build a trial's run: its workload, datasets, loader, seeded models and step, the scope it runs under (threads,
numerics, the workload's context), and the scoring of its models on the validation split. One build for a trial, a
probe, the pre-flight and `tuner profile` (tuner.train.trial re-exports these names)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tuner.config import Params, TrialConfig
from tuner.device import Device
from tuner.measure.quality import eval_mode
from tuner.data import to_device
from tuner.train.compile import compile_models
from tuner.train.deadline import setup_deadline
from tuner.train.distributed import rank_world, unwrap, wrap_ddp
from tuner.train.environment import env_threads
from tuner.train.loop import forever
from tuner.train.step import PhaseStep, set_memory_format
from tuner.workload import TrialContext, Workload, build, running, trial_context
from tuner.builtin import resolve_workload


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
    with torch_threads(cfg.params.threads or env_threads(cfg.env)), device.numerics(cfg.params), \
            running(make_context(cfg, device, cache_dir, out_dir)):
        yield


def make_context(cfg: TrialConfig, device: Device, cache_dir: Path, out_dir: Path | None,
                 preflight: bool = False) -> TrialContext:
    rank, world = rank_world()
    return TrialContext(device=device.torch_device, cache_dir=Path(cache_dir), out_dir=out_dir, seed=cfg.params.seed,
                        rank=rank, world_size=world, params=cfg.params, quality=cfg.quality, preflight=preflight)


def build_workload(cfg: TrialConfig) -> Workload:
    return build(resolve_workload(cfg.workload), cfg.workload_options, cfg.dataset)


def build_models(workload: Workload, device: Device, params: Params) -> dict[str, nn.Module]:
    """Fresh models, seeded alike (the same initial weights for every knob that leaves the model alone), on the
    device and in the memory format `params` asks for: the one build of a trial's, a probe's and the pre-flight's
    models, and the one place channels_last is applied (before DDP's wrap, which must see the weights it will
    reduce; off leaves the models as the workload built them)."""
    torch.manual_seed(params.seed)
    models: dict[str, nn.Module] = {}
    for name, factory in workload.models.items():
        model = factory()
        if not isinstance(model, nn.Module):
            raise TypeError(f"Workload.models[{name!r}]() returned a {type(model).__name__}, not a torch.nn.Module")
        models[name] = model.to(device.torch_device)
    if params.channels_last:
        set_memory_format(models, True)
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
    with setup_deadline(cfg.setup_timeout_s, f"the workload factory {resolve_workload(cfg.workload).attr}()"):
        workload = build_workload(cfg)
    with setup_deadline(cfg.setup_timeout_s, "the workload's datasets()"):
        train_set, val_set = workload.datasets()
    sampler = None
    if world > 1:
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, seed=p.seed, drop_last=True)
    loader = make_loader(train_set, p, device, shuffle=sampler is None, seed=p.seed, sampler=sampler,
                         collate_fn=workload.collate)
    models = build_models(workload, device, p)  # in channels_last where asked, before DDP's wrap
    if world > 1:
        models = {k: wrap_ddp(m, device) for k, m in models.items()}
    models = compile_models(models, p.compile)  # torch.compile(DDP(model)) under DDP, as PyTorch advises
    torch.manual_seed(p.seed + rank)  # after DDP's broadcast: each rank draws its own noise (latents, dropout)
    step = PhaseStep(workload, models, p, device)
    return Training(workload, train_set, val_set, loader, sampler, models, step)


def val_batches(workload: Workload, val_set: Any, device: Device, limit: int | None = None) -> Iterator[Any]:
    """The validation split in fixed batches (eval_batch_size), on the device; its own RNG, never the global one."""
    from torch.utils.data import DataLoader

    loader = DataLoader(val_set, batch_size=workload.eval_batch_size, shuffle=False, num_workers=0,
                        collate_fn=workload.collate, generator=torch.Generator())
    for i, batch in enumerate(loader):
        if limit is not None and i >= limit:
            return
        yield to_device(batch, device.torch_device)


def target_subset(workload: Workload, val_set: Any) -> Any:
    """What the time-to-target evaluations score (issue 51): a fixed, seeded subset of the validation split,
    workload.target_eval_samples of it, the same for every trial; the whole split without one (or when it asks
    for as many or more)."""
    n = workload.target_eval_samples
    if n is None or n >= len(val_set):
        return val_set
    from torch.utils.data import Subset

    picked = torch.randperm(len(val_set), generator=torch.Generator().manual_seed(0))[:n]
    return Subset(val_set, sorted(int(i) for i in picked))


def score_target(workload: Workload, models: dict[str, nn.Module], val_set: Any, device: Device) -> dict[str, Any]:
    """A time-to-target evaluation (issue 51): evaluate() on `target_subset`, with the trial context's eval_subset
    saying the size the workload asked for (the built-in GAN generates that many images for its FID, whatever the
    split's size) and preflight off (the pre-flight times one as a trial runs it); the whole split's scoring where
    the workload asks for no subset."""
    n = workload.target_eval_samples
    if n is None:
        return score(workload, models, val_set, device)
    with running(trial_context().with_(eval_subset=n, preflight=False)):
        return score(workload, models, target_subset(workload, val_set), device)


def score(workload: Workload, models: dict[str, nn.Module], val_set: Any, device: Device,
          limit: int | None = None) -> dict[str, Any]:
    """evaluate() in eval mode, as {metric: number or text}; quality_seconds is its wall time unless it says."""
    if workload.evaluate is None:
        return {}
    plain = {k: unwrap(m) for k, m in models.items()}
    start = time.perf_counter()
    with eval_mode(*plain.values()):
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
