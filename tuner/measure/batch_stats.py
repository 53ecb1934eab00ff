"""Which of a workload's layers learn from the batch's statistics: where they exist, splitting one effective batch
into micro-batches x accumulation steps changes what is learned, not only how fast (issue 40).

Without them, micro-batches of the same effective batch sum to the same gradient (up to rounding), so the split is
a speed knob. With them it is not:
- BatchNorm (1d/2d/3d, lazy) and SyncBatchNorm (every `torch.nn.modules.batchnorm._BatchNorm`) normalize each
  training forward by the micro-batch's mean and variance, so a smaller micro-batch is a noisier normalization;
- InstanceNorm with `track_running_stats=True` normalizes each sample by its own statistics (the training forward
  does not see the batch) but updates its running statistics once per micro-batch, and evaluation uses those: the
  split changes the model that is scored, so it counts. Without running statistics it does not.
- GroupNorm and LayerNorm normalize each sample alone: not batch statistics.
"""

from __future__ import annotations

from typing import Any


def batch_statistics_layers(*modules: Any) -> list[str]:
    """The batch-statistics layers of `modules` (nn.Modules; None and non-modules are skipped), as
    `module[i].path (Type)`, in order: empty when splitting the effective batch is exact."""
    from torch import nn
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.instancenorm import _InstanceNorm

    found: list[str] = []
    models = [m for m in modules if isinstance(m, nn.Module)]
    for i, model in enumerate(models):
        for path, layer in model.named_modules():
            counts = isinstance(layer, _BatchNorm) or (isinstance(layer, _InstanceNorm)
                                                       and bool(layer.track_running_stats))
            if counts:
                where = path or type(model).__name__
                found.append(f"{where} ({type(layer).__name__})" if len(models) == 1
                             else f"model {i}: {where} ({type(layer).__name__})")
    return found


def split_note(layers: list[str]) -> str | None:
    """The line a study and its report show where the split changes what is learned (None: it does not)."""
    if not layers:
        return None
    shown = ", ".join(layers[:3]) + (f" and {len(layers) - 3} more" if len(layers) > 3 else "")
    return (f"the model normalizes by batch statistics ({shown}): splitting the effective batch into micro-batches "
            f"changes what is learned, so the micro-batch size is a learning knob here, scored on quality")
