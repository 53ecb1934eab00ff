"""Fixtures shared by the quality tests: one digits cache, so the FID classifier trains once per session, and
tiny random datasets whose FID cache builds in about a second."""

import pytest
import torch
from torch.utils.data import TensorDataset

from tuner.data import Datasets, load_datasets


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "measure-cache"


@pytest.fixture(scope="session")
def digits(cache):
    return load_datasets("digits", 32, cache)


def make_tiny(name="tiny", n_train=48, n_val=8, size=16, channels=1):
    g = torch.Generator().manual_seed(0)
    make = lambda n: TensorDataset(torch.rand(n, channels, size, size, generator=g) * 2 - 1, torch.arange(n) % 10)
    return Datasets(make(n_train), make(n_val), channels=channels, num_classes=10, name=name, synthetic=False)


@pytest.fixture
def tiny():
    """make_tiny(name, n_train, n_val, size, channels): random images, labels 0..9."""
    return make_tiny
