"""tests/cuda: real CUDA, never faked. Every test here carries the `cuda` marker (`pytest -m cuda` runs them) and is
skipped on a machine without a CUDA GPU, so a CPU run of the suite reports them as skipped, not passed."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    import torch

    have_gpu = torch.cuda.is_available() and torch.cuda.device_count() > 0
    skip = pytest.mark.skip(reason="needs a CUDA GPU (tests/cuda run real CUDA, never a fake)")
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.cuda)
            if not have_gpu:
                item.add_marker(skip)


@pytest.fixture
def gpu():
    """tuner's Device for this machine's CUDA GPU, as `device: cuda` resolves it."""
    from tuner.device import resolve_device

    return resolve_device("cuda")
