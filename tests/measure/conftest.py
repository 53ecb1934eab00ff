"""Fixtures shared by the quality tests: one digits cache, so the FID classifier trains once per session."""

import pytest

from tuner.data import load_datasets


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "measure-cache"


@pytest.fixture(scope="session")
def digits(cache):
    return load_datasets("digits", 32, cache)
