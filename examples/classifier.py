"""A plain classifier (an MLP on scikit-learn's digits) tuned by tuner, with its own optimizer (SGD + momentum).

    tuner train --config examples/classifier.yaml
    tuner search --space amp_loader --workload examples/classifier.py:make --trials 6
"""

import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.nn import functional as F
from torch.utils.data import TensorDataset

import tuner


def digits() -> tuple[TensorDataset, TensorDataset]:
    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32) / 16.0
    y = torch.tensor(data.target)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    train, val = perm[:1500], perm[1500:]
    return TensorDataset(x[train], y[train]), TensorDataset(x[val], y[val])


def evaluate(models: dict, val_batches) -> dict:
    loss, correct, n = 0.0, 0, 0
    for x, y in val_batches:
        logits = models["net"](x)
        loss += float(F.cross_entropy(logits, y, reduction="sum"))
        correct += int((logits.argmax(1) == y).sum())
        n += len(y)
    return {"val_loss": loss / n, "accuracy": correct / n}


def sgd(params, lr: float, betas: tuple[float, float]) -> torch.optim.Optimizer:
    """tuner passes its searched lr and betas; here beta1 is SGD's momentum."""
    return torch.optim.SGD(params, lr=lr * 100, momentum=betas[0])


def make(hidden: int = 64) -> tuner.Workload:
    return tuner.Workload(
        models={"net": lambda: nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))},
        datasets=digits,
        loss=lambda models, batch: F.cross_entropy(models["net"](batch[0]), batch[1]),
        evaluate=evaluate,
        quality=("val_loss", "min"),
        optimizer=sgd,
    )
