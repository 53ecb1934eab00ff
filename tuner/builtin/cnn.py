"""The built-in classifier workload: a small CNN with cross-entropy, scored on the fixed held-out split.

`workload_options`: image_size (side the images are resized to, 32 by default), width (base channel count, 32),
target_eval_samples (a study with a target: its evaluations during training score a fixed subset of this many
validation samples, 128 by default, so K can be fine; the trial's quality at the end scores the whole split; none:
the whole split every time).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn import functional as F

from tuner.builtin._data import TARGET_EVAL_SAMPLES, SpecData
from tuner.workload import Workload


def make(dataset: str = "digits", image_size: int = 32, width: int = 32,
         target_eval_samples: int | None = TARGET_EVAL_SAMPLES) -> Workload:
    if not isinstance(image_size, int) or image_size < 8:
        raise ValueError(f"image_size must be a whole number >= 8 (got {image_size!r})")
    data = SpecData(dataset, image_size)

    def net() -> torch.nn.Module:
        from tuner.models import SmallCNN

        d = data.get()
        return SmallCNN(channels=d.channels, num_classes=d.num_classes, width=width)

    def loss(models: Any, batch: Any) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(models["net"](x), y)

    def evaluate(models: Any, val_batches: Any) -> dict[str, float]:
        """Mean cross-entropy and accuracy over the held-out split (fp32 logits, sums kept on the device)."""
        loss_sum, correct, total = None, None, 0
        for x, y in val_batches:
            logits = models["net"](x).float()
            batch_loss = F.cross_entropy(logits, y, reduction="sum").double()
            batch_correct = (logits.argmax(1) == y).sum()
            loss_sum = batch_loss if loss_sum is None else loss_sum + batch_loss
            correct = batch_correct if correct is None else correct + batch_correct
            total += y.shape[0]
        if not total:
            return {"loss": float("nan"), "accuracy": float("nan")}
        return {"loss": float(loss_sum) / total, "accuracy": int(correct) / total}

    return Workload(models={"net": net}, datasets=data.splits, loss=loss, evaluate=evaluate,
                    quality=("loss", "min"), name="cnn", target_eval_samples=target_eval_samples,
                    hyperparameters={"lr": 1e-3, "betas": (0.9, 0.999)},  # its own: Adam at torch's defaults
                    info={"model": f"SmallCNN width {width}, {image_size}x{image_size}", "dataset": dataset})
