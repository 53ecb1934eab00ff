"""Moving a batch to the trial's device, whatever its shape: tensors inside tuples, lists, dicts, named tuples."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def to_device(batch: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """A copy of `batch` with every tensor on `device` (non_blocking when the loader pins memory)."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a named tuple
        return type(batch)(*(to_device(x, device, non_blocking) for x in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(x, device, non_blocking) for x in batch)
    if isinstance(batch, Mapping):
        return type(batch)({k: to_device(v, device, non_blocking) for k, v in batch.items()})  # type: ignore[call-arg]
    return batch


def batch_len(batch: Any, default: int) -> int:
    """Samples in a batch: the leading size of its first tensor (host metadata, no device sync)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else default
    items = batch.values() if isinstance(batch, Mapping) else batch if isinstance(batch, (list, tuple)) else ()
    for x in items:
        n = batch_len(x, -1)
        if n >= 0:
            return n
    return default
