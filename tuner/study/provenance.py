"""Where a figure was measured: library versions and hardware, recorded once per study (and per benchmark run)."""

from __future__ import annotations

import os
import platform
from typing import Any


def versions() -> dict[str, str]:
    """Versions of what shapes the numbers. Imports only what is installed (Ray/Optuna may be absent on a
    machine that only runs `tuner train`)."""
    import importlib.metadata as md

    import tuner

    out = {"python": platform.python_version(), "tuner": tuner.__version__}
    for dist in ("torch", "torchvision", "ray", "optuna"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    return out


def hardware(cluster_cpus: float | None = None, gpus: float | None = None, nodes: int = 1) -> dict[str, Any]:
    """This machine's CPUs and GPUs (names from torch), plus the cluster's totals when a study ran on one."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    out: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "platform": platform.platform(),
        "gpus": count if gpus is None else gpus,
        "gpu_names": [torch.cuda.get_device_name(i) for i in range(count)],
        "nodes": nodes,
    }
    if cluster_cpus is not None:
        out["cluster_cpus"] = cluster_cpus
    return out
