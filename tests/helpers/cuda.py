"""What the real-CUDA tests (tests/cuda) share: the marker that skips them without a GPU, and small workloads."""

from __future__ import annotations

import pytest
import torch

HAVE_CUDA = torch.cuda.is_available() and torch.cuda.device_count() > 0

# Each module in tests/cuda sets `pytestmark = CUDA`: selected by `-m cuda`, skipped without a GPU.
CUDA = [pytest.mark.cuda, pytest.mark.skipif(not HAVE_CUDA, reason="needs a CUDA GPU (never faked)")]


def cnn_config(ceiling_seconds: float = 0, **params):
    """The built-in cnn on synthetic 16x16 images, a samples budget, quality off, on the GPU; ceilings (and
    of_peak, which follows them) only when given seconds."""
    from tuner.config import parse_config

    return parse_config({"workload": "cnn", "dataset": "synthetic", "workload_options": {"image_size": 16},
                         "budget": {"samples": 320},
                         "params": {"batch_size": 16, "device": "cuda", **params},
                         "measure": {"warmup_steps": 1, "windows": 3, "ceiling_seconds": ceiling_seconds},
                         "quality": {"enabled": False}})
