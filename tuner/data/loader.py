"""DataLoader built from the trial's loader knobs, seeded, and safe to combine with the training's threads."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler, Sampler, SequentialSampler

from tuner.config import Params
from tuner.device import Device
from tuner.errors import ConfigError
from tuner.knobs import check_device, probed


def worker_init_fn(worker_id: int) -> None:
    """One compute thread per worker (workers must not oversubscribe the training's cores); seed numpy/random.

    torch already gives each worker the seed base_seed + worker_id (base_seed drawn from the loader's
    generator), so deriving numpy's and random's seeds from it makes augmentations reproducible per seed.
    """
    torch.set_num_threads(1)
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


TORCH_PREFETCH_FACTOR = 2  # DataLoader's own prefetch_factor with workers, when none is given


def prefetch_depth(params: Params) -> int:
    """Batches the loader's workers hold ready at most (num_workers x prefetch_factor; none without workers): what
    a pause in training lets them fill untimed (tuner.train.loop drains it before the next timed window)."""
    return params.num_workers * (params.prefetch_factor or TORCH_PREFETCH_FACTOR) if params.num_workers else 0


class _WholeSteps(Sampler[int]):
    """The inner sampler's indices cut to a multiple of `step` (the effective batch on this rank: micro-batch x
    accumulation steps): an epoch drops its remainder in whole optimizer steps, so every split of one effective
    batch (16 x 4, 64 x 1) trains on the same samples in the same order, epoch after epoch. Dropping only the
    incomplete micro-batch let 16 x 4 keep samples 64 x 1 drops, and their batches differed from the second epoch.
    Lazy, as the inner sampler is: a seeded shuffle draws its permutation when the epoch starts, as DataLoader's."""

    def __init__(self, inner: Any, step: int):
        self.inner = inner
        self.step = step

    def __len__(self) -> int:
        return len(self.inner) // self.step * self.step

    def __iter__(self) -> Any:
        keep = len(self)
        for i, index in enumerate(self.inner):
            if i >= keep:
                return
            yield index


def make_loader(
    dataset: Dataset,
    params: Params,
    device: Device,
    *,
    shuffle: bool = True,
    drop_last: bool = True,
    seed: int = 0,
    sampler: Any = None,
    collate_fn: Any = None,
) -> DataLoader:
    """A DataLoader with params' batch size and loader knobs; refuses combinations that cannot work here.
    With drop_last, an epoch keeps whole optimizer steps only (_WholeSteps); under DDP `sampler` (a
    DistributedSampler) holds this rank's share, so whole steps per rank are whole effective batches overall."""
    from tuner.data.batch import checked_collate

    check_device(params, device, probed("input"))  # pin_memory without CUDA: the table's rule (tuner.knobs)
    n = len(dataset)  # type: ignore[arg-type]
    if drop_last and n < params.batch_size:
        raise ConfigError(
            f"batch_size {params.batch_size} is larger than the dataset ({n} items), so no full batch exists; "
            f"lower batch_size to at most {n}"
        )
    generator = torch.Generator().manual_seed(seed)
    if drop_last:
        inner = sampler if sampler is not None else (
            RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset))  # as DataLoader's
        step = params.batch_size * params.accumulation_steps
        if len(inner) < step:
            share = f"this rank's share of the training split ({len(inner)} of {n} items)" if sampler is not None \
                else f"the training split ({n} items)"
            raise ConfigError(
                f"the effective batch {step} (batch_size {params.batch_size} x accumulation_steps "
                f"{params.accumulation_steps}) is larger than {share}, so no whole optimizer step exists; "
                f"lower batch_size or accumulation_steps"
            )
        sampler = _WholeSteps(inner, step)
    kwargs: dict[str, Any] = {}
    if params.num_workers > 0:  # DataLoader refuses these with 0 workers; config refuses them too
        kwargs["worker_init_fn"] = worker_init_fn
        kwargs["persistent_workers"] = params.persistent_workers
        if params.prefetch_factor is not None:
            kwargs["prefetch_factor"] = params.prefetch_factor
    return DataLoader(
        dataset,
        batch_size=params.batch_size,
        shuffle=shuffle and sampler is None,
        sampler=sampler,  # a DistributedSampler under DDP shards and shuffles itself
        drop_last=drop_last,
        num_workers=params.num_workers,
        pin_memory=params.pin_memory,
        generator=generator,
        collate_fn=collate_fn or checked_collate,
        **kwargs,
    )
