"""make_loader: knobs passed through only where they are valid, seeded shuffling, workers that yield batches."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import Dataset

from tuner.config import Params
from tuner.data import make_loader
from tuner.device import Device
from tuner.errors import ConfigError, DeviceError

CPU = Device("cpu", torch.device("cpu"))


class _Items(Dataset):
    """Item i is (tensor filled with i, the number of torch threads of the process that built it)."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return torch.full((1, 4, 4), float(i)), torch.get_num_threads()


def test_pin_memory_refused_on_cpu():
    with pytest.raises(DeviceError, match="pin_memory"):
        make_loader(_Items(8), Params(batch_size=4, pin_memory=True), CPU)


def test_prefetch_and_persistence_only_with_workers():
    plain = make_loader(_Items(8), Params(batch_size=4), CPU)
    assert plain.num_workers == 0 and plain.prefetch_factor is None and not plain.persistent_workers
    # a Params that skipped validation must not crash DataLoader (which refuses prefetch with 0 workers)
    odd = Params.model_construct(**{**Params().model_dump(), "batch_size": 4, "prefetch_factor": 4, "persistent_workers": True})
    assert make_loader(_Items(8), odd, CPU).prefetch_factor is None
    workers = make_loader(_Items(8), Params(batch_size=4, num_workers=2, prefetch_factor=5, persistent_workers=True), CPU)
    assert workers.prefetch_factor == 5 and workers.persistent_workers and workers.num_workers == 2


def test_one_worker_yields_batches_with_one_thread():
    loader = make_loader(_Items(10), Params(batch_size=4, num_workers=1), CPU, seed=1)
    batches = list(loader)
    assert len(batches) == 2  # drop_last drops the 2 leftover items
    x, threads = batches[0]
    assert x.shape == (4, 1, 4, 4)
    assert threads.tolist() == [1, 1, 1, 1]  # workers do not oversubscribe the training's cores


def test_shuffle_is_seeded():
    def order(seed: int) -> list[int]:
        loader = make_loader(_Items(32), Params(batch_size=32), CPU, seed=seed)
        return next(iter(loader))[0][:, 0, 0, 0].long().tolist()

    assert order(3) == order(3)
    assert order(3) != order(4)
    assert sorted(order(3)) == list(range(32))
    unshuffled = make_loader(_Items(8), Params(batch_size=8), CPU, shuffle=False)
    assert next(iter(unshuffled))[0][:, 0, 0, 0].long().tolist() == list(range(8))


def test_batch_larger_than_dataset_is_config_error():
    with pytest.raises(ConfigError, match=r"batch_size 16 is larger than the dataset \(10 items\).*lower"):
        make_loader(_Items(10), Params(batch_size=16), CPU)
    # without drop_last a short final batch is fine
    assert len(list(make_loader(_Items(10), Params(batch_size=16), CPU, drop_last=False))) == 1


def test_pin_memory_passed_on_cuda_device():
    fake_cuda = Device("cuda", torch.device("cpu"))  # is_cuda without a GPU: only the decision is checked
    assert make_loader(_Items(8), Params(batch_size=4, pin_memory=True), fake_cuda).pin_memory


class _Index(Dataset):
    """Item i is the integer i: a loader's batches read as the sample indices they hold."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


def _steps(loader, accumulation: int, steps: int, set_epoch=None) -> list[list[int]]:
    """The samples of each of `steps` optimizer steps (`accumulation` micro-batches each), across epochs."""
    from tuner.train.loop import forever

    batches = forever(loader, set_epoch)
    try:
        return [[i for _ in range(accumulation) for i in next(batches).tolist()] for _ in range(steps)]
    finally:
        batches.close()


def test_splits_of_one_effective_batch_see_the_same_batches_every_epoch():
    # 1438 = digits' training split, not a multiple of 64: dropping only the incomplete micro-batch let 16 x 4 keep
    # 16 samples (1424 of them) that 64 x 1 drops (1408), and their batches differed from the second epoch on
    data = _Index(1438)
    runs = {(b, a): _steps(make_loader(data, Params(batch_size=b, accumulation_steps=a), CPU, seed=5), a, 3 * 22)
            for b, a in [(64, 1), (32, 2), (16, 4), (8, 8)]}
    reference = runs[(64, 1)]
    assert all(len(s) == 64 for s in reference)
    for split, seen in runs.items():
        assert seen == reference, split
    assert reference[22] != reference[0]  # the second epoch is shuffled anew, the same for every split
    assert len({i for s in reference[:22] for i in s}) == 22 * 64  # an epoch: 22 whole steps, no sample twice
    # another seed draws other batches
    assert _steps(make_loader(data, Params(batch_size=16, accumulation_steps=4), CPU, seed=6), 4, 22) != reference[:22]


def test_ddp_splits_of_one_effective_batch_see_the_same_batches_on_each_rank():
    from torch.utils.data.distributed import DistributedSampler

    data = _Index(1470)  # 735 per rank of 2: 11 whole steps of 64 (micro x accumulation), 31 dropped per rank

    def seen(rank: int, b: int, a: int) -> list[list[int]]:
        sampler = DistributedSampler(data, num_replicas=2, rank=rank, seed=5, drop_last=True)
        loader = make_loader(data, Params(batch_size=b, accumulation_steps=a), CPU, shuffle=False, seed=5,
                             sampler=sampler)
        assert len(loader) == 11 * a
        return _steps(loader, a, 3 * 11, sampler.set_epoch)

    for rank in (0, 1):
        assert seen(rank, 16, 4) == seen(rank, 64, 1) == seen(rank, 32, 2)
    assert not {i for s in seen(0, 64, 1)[:11] for i in s} & {i for s in seen(1, 64, 1)[:11] for i in s}


def test_effective_batch_larger_than_dataset_is_config_error():
    with pytest.raises(ConfigError, match=r"effective batch 64 \(batch_size 16 x accumulation_steps 4\) is larger "
                                          r"than the training split \(50 items\).*lower"):
        make_loader(_Index(50), Params(batch_size=16, accumulation_steps=4), CPU)
