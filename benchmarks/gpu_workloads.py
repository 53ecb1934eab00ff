"""The GPU proof's image classifier: torchvision's ResNet-50 (or a smaller ResNet for the CPU dry run), as its
authors wrote it, on synthetic images built here (nothing downloaded), with pytorch/examples' ImageNet optimizer
(SGD, lr 0.1, momentum 0.9, weight decay 1e-4).

The images are learnable, so validation loss means something: each class has a fixed low-resolution colour
template, upsampled, and every image is its class's template plus noise (TemplateImages).

    python -m tuner train ... workload: benchmarks/gpu_workloads.py:resnet
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.nn import functional as F
from torch.utils.data import Dataset

import tuner


class TemplateImages(Dataset):
    """`n` images of `size` x `size`, 3 channels, in [-1, 1]: their class's template plus noise (seeded). The noise
    comes from a bank of NOISE images, each rolled by an offset of its own per item, so building the set costs a
    second, not a minute (a full set of noise at 224x224 took 70 s on a busy 2-core CPU), and an item costs one
    add, as a decoded dataset's would."""

    NOISE = 32

    def __init__(self, n: int, size: int, num_classes: int, seed: int, templates: torch.Tensor) -> None:
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, num_classes, (n,), generator=g)
        self.templates = templates
        self.noise = torch.randn(self.NOISE, 3, size, size, generator=g) * 0.35
        self.shifts = torch.randint(0, size, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        noise = self.noise[i % self.NOISE].roll(int(self.shifts[i]), dims=2)
        return (self.templates[self.labels[i]] + noise).clamp_(-1, 1), self.labels[i]


def template_images(size: int, num_classes: int, n_train: int, n_val: int) -> tuple[Dataset, Dataset]:
    g = torch.Generator().manual_seed(1234)
    small = torch.rand(num_classes, 3, 7, 7, generator=g) * 1.6 - 0.8
    templates = F.interpolate(small, size=size, mode="bilinear", align_corners=False)
    return (TemplateImages(n_train, size, num_classes, 0, templates),
            TemplateImages(n_val, size, num_classes, 1, templates))


def evaluate(models: dict, val_batches: Any) -> dict:
    loss_sum, correct, n = 0.0, 0, 0
    for x, y in val_batches:
        logits = models["resnet"](x)
        loss_sum += float(F.cross_entropy(logits.float(), y, reduction="sum"))
        correct += int((logits.argmax(1) == y).sum())
        n += len(y)
    return {"val_loss": loss_sum / n, "accuracy": correct / n}


def resnet(arch: str = "resnet50", image_size: int = 224, num_classes: int = 100, n_train: int = 2560,
           n_val: int = 256) -> tuner.Workload:
    import torchvision.models as tvm

    return tuner.Workload(
        models={"resnet": functools.partial(getattr(tvm, arch), num_classes=num_classes)},
        datasets=functools.partial(template_images, image_size, num_classes, n_train, n_val),
        loss=lambda models, batch: F.cross_entropy(models["resnet"](batch[0]), batch[1]),
        evaluate=evaluate,
        quality=("val_loss", "min"),
        optimizer=lambda params, **hp: torch.optim.SGD(params, **hp),
        hyperparameters={"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4},  # pytorch/examples' imagenet
        info={"model": f"torchvision {arch}, {image_size}x{image_size} synthetic template images"},
    )
