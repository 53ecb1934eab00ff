"""The reports' cache of parity verdicts (<reports>/.cache/parity/<key>.json): a verdict depends on nothing but the
workload (its source, options, dataset), the config's params, the knob value, the machine's numerics (device, CPU
model and flags or GPU), torch and tuner, the steps and seeds, so a later study of the same workload on the same
machine reuses it (the check cost the default study 22 s on a bf16 CPU; _study.py says so, `cached`). A workload
whose source cannot be told apart is checked every time; a damaged entry is checked again, never an error."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tuner.parity._judge import YARDSTICK_SEEDS, State

CACHE_FOLDER = "parity"  # under the reports' cache folder: one <key>.json per verdict
RECIPE = 2  # bump when the arms (_arms.py) change: every cached verdict is then checked again


class CachedVerdict(BaseModel):
    """One verdict as the cache keeps it: the verdict, when it was checked, and what its key was made of (for a
    person reading the file; the key alone decides)."""

    state: State
    text: str
    gap: float | None = None
    seed_gap: float | None = None
    from_step: int | None = None
    checked_at: str  # ISO 8601, UTC
    parts: dict[str, Any] = {}


def _digest(files: list[Path], root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def workload_identity(text: str) -> dict[str, str] | None:
    """What tells the source of workload `text` apart: a built-in's name and the digest of tuner's built-in
    workloads' source; a file's name, function and the digest of the .py files it can import beside it; a
    package's likewise. None where the source is not found at its path here (it is then checked every time)."""
    import importlib.util

    from tuner.builtin import resolve_workload
    from tuner.workload import importable_sources

    try:
        ref = resolve_workload(text)
        if ref.builtin:
            import tuner.builtin

            folder = Path(tuner.builtin.__file__).parent
            return {"builtin": ref.text, "source": _digest(importable_sources(folder), folder)}
        if ref.file is not None:
            path = Path(ref.file)
            if not path.is_file():  # another node's copy, shipped by Ray (its cache is that node's too)
                return None
            return {"file": path.name, "attr": ref.attr, "source": _digest(importable_sources(path.parent), path.parent)}
        spec = importlib.util.find_spec(ref.module.split(".")[0])
        origin = Path(spec.origin) if spec is not None and spec.origin not in (None, "built-in", "frozen") else None
        if origin is None or not origin.is_file():
            return None
        root = origin.parent
        files = importable_sources(root) if origin.name == "__init__.py" else [origin]
        return {"module": ref.module, "attr": ref.attr, "source": _digest(files, root)}
    except Exception:  # noqa: BLE001 - an unreadable source is only a verdict checked again
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "CPU part"):
                    return value.strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def machine_numerics(device: Any) -> dict[str, Any]:
    """What decides this machine's rounding for a tuner Device: a GPU's name, compute capability, CUDA and cuDNN;
    a CPU's model, architecture, torch's vector ISA and the digest of its feature flags (bf16 among them)."""
    import platform

    import torch

    out: dict[str, Any] = {"device": device.describe(), "torch": torch.__version__}
    if device.is_cuda:
        idx = device.torch_device.index if device.torch_device.index is not None else torch.cuda.current_device()
        out.update(capability=list(torch.cuda.get_device_capability(idx)), cuda=torch.version.cuda,
                   cudnn=torch.backends.cudnn.version())
    else:
        from tuner.device import cpu_flags

        out.update(cpu=_cpu_model(), arch=platform.machine(), isa=torch.backends.cpu.get_cpu_capability(),
                   flags=hashlib.sha256(" ".join(sorted(cpu_flags())).encode()).hexdigest()[:16])
    return out


def verdict_key(cfg: Any, knobs: dict[str, Any], steps: int, machine: dict[str, Any],
                identity: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """The cache key of the verdict on `knobs` for TrialConfig `cfg` (the fp32 arm's) and what it is made of:
    the workload's identity, options and dataset, the params (batch size, lr, seed: the second seed is the next),
    the knob value, the steps, the machine's numerics, tuner's version and the check's recipe (arms and rule)."""
    import tuner
    from tuner.parity._judge import TOLERANCE, WINDOWS

    parts = {"recipe": [RECIPE, WINDOWS, TOLERANCE, YARDSTICK_SEEDS], "tuner": tuner.__version__, "workload": identity,
             "workload_options": cfg.workload_options, "dataset": cfg.dataset,
             "params": cfg.params.model_dump(mode="json"), "gpus": cfg.gpus, "env": cfg.env,
             "knobs": knobs, "steps": steps, "seeds": [cfg.params.seed + i for i in range(YARDSTICK_SEEDS + 1)], "machine": machine}
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24], parts


def read_cached(path: Path) -> CachedVerdict | None:
    """The verdict kept at `path`; None when there is none, or it cannot be read or is damaged (checked again)."""
    try:
        return CachedVerdict.model_validate_json(path.read_bytes())
    except (OSError, ValueError, ValidationError):
        return None


def holds_verdicts(cache_dir: Path) -> bool:
    """Whether this machine's parity cache holds any verdict (a cluster's nodes may each hold their own: asked
    only of a local study)."""
    try:
        return any((Path(cache_dir) / CACHE_FOLDER).glob("*.json"))
    except OSError:
        return True  # cannot tell: let the task look
