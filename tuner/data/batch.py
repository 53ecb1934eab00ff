"""Moving a batch to the trial's device, whatever its shape: tensors inside tuples, lists, dicts, named tuples."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from tuner.errors import WorkloadError


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


def to_channels_last(batch: Any) -> Any:
    """`batch` with each 4-D floating tensor in channels_last memory format (what a user does for a CNN's images:
    same values, NHWC strides); everything else as it is."""
    if isinstance(batch, torch.Tensor):
        if batch.dim() == 4 and batch.is_floating_point():
            return batch.contiguous(memory_format=torch.channels_last)
        return batch
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a named tuple
        return type(batch)(*(to_channels_last(x) for x in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_channels_last(x) for x in batch)
    if isinstance(batch, Mapping):
        return type(batch)({k: to_channels_last(v) for k, v in batch.items()})  # type: ignore[call-arg]
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


class CollateError(WorkloadError):
    """Samples the default collate cannot batch. Raised in a loader worker too, where the DataLoader re-raises it
    in the trial's process wrapped in the worker's traceback: the message is unwrapped back to its one line."""

    def __init__(self, message: str) -> None:
        marker = f"{type(self).__name__}: "
        if message.startswith("Caught ") and marker in message:
            message = message.rsplit(marker, 1)[1].strip()
        super().__init__(message)


def _leaves(sample: Any, path: str = "") -> list[tuple[str, str]]:
    """(where in the sample, shape or type) of each leaf: `[0]: (12,)`, `["label"]: int`."""
    if isinstance(sample, torch.Tensor):
        return [(path, str(tuple(sample.shape)))]
    if hasattr(sample, "shape") and hasattr(sample, "dtype"):  # a numpy array
        return [(path, str(tuple(sample.shape)))]
    if isinstance(sample, Mapping):
        return [leaf for k, v in sample.items() for leaf in _leaves(v, f"{path}[{k!r}]")]
    if isinstance(sample, tuple):
        return [leaf for i, v in enumerate(sample) for leaf in _leaves(v, f"{path}[{i}]")]
    if isinstance(sample, list):
        return [(path, f"list of {len(sample)}")]
    return [(path, type(sample).__name__)]


def _python_list(sample: Any, path: str = "") -> str | None:
    """Where a sample holds a Python list of numbers (or of lists) instead of a tensor, else None."""
    if isinstance(sample, list):
        if sample and all(isinstance(v, (int, float, list)) and not isinstance(v, bool) for v in sample):
            return path or "the sample"
        return next((w for i, v in enumerate(sample) if (w := _python_list(v, f"{path}[{i}]"))), None)
    if isinstance(sample, tuple):
        return next((w for i, v in enumerate(sample) if (w := _python_list(v, f"{path}[{i}]"))), None)
    if isinstance(sample, Mapping):
        return next((w for k, v in sample.items() if (w := _python_list(v, f"{path}[{k!r}]"))), None)
    return None


def describe_samples(samples: list[Any]) -> str:
    """The shapes of a few samples, field by field; the fields whose shapes differ when some do."""
    seen: dict[str, list[str]] = {}
    for sample in samples[:8]:
        for where, shape in _leaves(sample):
            if shape not in seen.setdefault(where or "sample", []):
                seen[where or "sample"].append(shape)
    varying = {w: s for w, s in seen.items() if len(s) > 1} or seen
    return "; ".join(f"{'sample' if w == 'sample' else 'sample' + w} {'shapes' if len(s) > 1 else 'shape'} "
                     f"{', '.join(s[:4])}{' ...' if len(s) > 4 else ''}" for w, s in varying.items())


_COLLATE_HINT = ("give Workload(collate=fn), fn(list of samples) -> batch, that pads or packs them (e.g. "
                 "torch.nn.utils.rnn.pad_sequence)")


def checked_collate(samples: list[Any]) -> Any:
    """torch's default collate, with what it cannot batch named as the dataset's problem (before the model runs):
    samples holding Python lists (it would turn them into a list of per-position tensors) or samples whose
    tensors differ in shape. Used where the workload gives no collate of its own."""
    from torch.utils.data import default_collate

    where = _python_list(samples[0]) if samples else None
    if where is not None:
        raise CollateError(f"the dataset's samples hold Python lists, not tensors ({where}: "
                           f"{describe_samples(samples)}); return tensors from __getitem__ (torch.tensor(...)), or "
                           f"{_COLLATE_HINT}")
    try:
        return default_collate(samples)
    except (RuntimeError, TypeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CollateError(f"the dataset's samples cannot be batched by the default collate ({first}): "
                           f"{describe_samples(samples)}; {_COLLATE_HINT}") from None
