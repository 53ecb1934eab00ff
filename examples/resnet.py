"""torchvision's ResNet-18 as its authors wrote it, classifying scikit-learn's digits at 32x32, tuned by tuner.

The model is `torchvision.models.resnet18(num_classes=10)` untouched (3-channel input: the grey digits are
repeated), given as a factory with `functools.partial`. It trains with its own optimizer: SGD with momentum 0.9,
lr 0.05 and weight decay 5e-4, the usual CIFAR-style settings; tuner's baseline is exactly that. SGD has no
betas, so search it with a space that leaves them alone (`--space loader`).

    tuner train --config examples/resnet.yaml
    tuner search --space loader --workload examples/resnet.py:make --trials 6
"""

import functools

import torch
from sklearn.datasets import load_digits
from torch.nn import functional as F
from torch.utils.data import TensorDataset

import tuner


def digits(size: int = 32) -> tuple[TensorDataset, TensorDataset]:
    """1797 8x8 digits, upsampled to size x size, 3 channels, normalized; a fixed split."""
    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
    x = F.interpolate(x, size=size, mode="bilinear", align_corners=False).repeat(1, 3, 1, 1)
    x = (x - x.mean()) / x.std()
    y = torch.tensor(data.target, dtype=torch.long)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    train, val = perm[:1500], perm[1500:]
    return TensorDataset(x[train], y[train]), TensorDataset(x[val], y[val])


def evaluate(models: dict, val_batches) -> dict:
    loss_sum, correct, n = 0.0, 0, 0
    for x, y in val_batches:
        logits = models["resnet"](x)
        loss_sum += float(F.cross_entropy(logits, y, reduction="sum"))
        correct += int((logits.argmax(1) == y).sum())
        n += len(y)
    return {"val_loss": loss_sum / n, "accuracy": correct / n}


def make(image_size: int = 32, num_classes: int = 10) -> tuner.Workload:
    from torchvision.models import resnet18

    return tuner.Workload(
        models={"resnet": functools.partial(resnet18, num_classes=num_classes)},
        datasets=functools.partial(digits, image_size),
        loss=lambda models, batch: F.cross_entropy(models["resnet"](batch[0]), batch[1]),
        evaluate=evaluate,
        quality=("val_loss", "min"),
        optimizer=lambda params, **hp: torch.optim.SGD(params, **hp),
        hyperparameters={"lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4},
        sample_unit="pixels",
        sample_size=lambda batch: batch[0].shape[0] * batch[0].shape[2] * batch[0].shape[3],
        info={"model": f"torchvision resnet18, {image_size}x{image_size} digits"},
    )
