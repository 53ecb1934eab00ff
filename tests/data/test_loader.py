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
