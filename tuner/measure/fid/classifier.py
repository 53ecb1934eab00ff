"""The default FID feature extractor: a SmallCNN trained once per dataset, deterministically, then cached.

Inception's 2048-d pool features would have a singular covariance on MNIST-like data (digits has 1797 images),
so classifier features (its penultimate layer) are the default. Every trial of every study on a dataset must see
the same extractor, so training is seeded, leaves the caller's RNG alone, and the result is cached as
`classifier.pt` + `classifier.json` (held-out accuracy, what it was trained on, the .pt's sha256).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from tuner.device import Device
from tuner.files import atomic_write, locked
from tuner.measure.fid._cache import fid_cache_dir, image_size_of, sha256
from tuner.measure.fid.real import unaugmented_train

if TYPE_CHECKING:
    from tuner.data import Datasets

CLASSIFIER_RECIPE = 1  # bump when the architecture or training below changes: cached classifiers are retrained
CLASSIFIER_SEED = 0
CLASSIFIER_EPOCHS = 5
CLASSIFIER_MAX_SAMPLES = 50_000  # cap on training samples (epochs x train size) for large datasets
CLASSIFIER_BATCH = 64
CLASSIFIER_LR = 1e-3


class ClassifierFeatures(nn.Module):
    """FID feature module: images in [0, 1] -> the classifier's penultimate layer (N, d), in float64.

    It never leaves eval mode (BatchNorm must use its running statistics), like torchmetrics' own Inception.
    """

    def __init__(self, classifier: nn.Module) -> None:
        super().__init__()
        self.classifier = classifier
        self.num_features = int(classifier.feature_dim)  # the feature count, without a dummy forward pass
        self.eval()

    def train(self, mode: bool = True) -> "ClassifierFeatures":
        return super().train(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The classifier was trained on the dataset's [-1, 1] images.
        return self.classifier.features(x.float() * 2 - 1).double()


def _classifier_meta(datasets: Datasets, image_size: int) -> dict[str, Any]:
    """What a cached classifier must match to be reused (a changed folder dataset changes its sizes)."""
    return {
        "recipe": CLASSIFIER_RECIPE,
        "dataset": datasets.name,
        "image_size": image_size,
        "channels": datasets.channels,
        "num_classes": datasets.num_classes,
        "train_samples": len(datasets.train),  # type: ignore[arg-type]
        "val_samples": len(datasets.val),  # type: ignore[arg-type]
        "seed": CLASSIFIER_SEED,
        "epochs": CLASSIFIER_EPOCHS,
        "max_samples": CLASSIFIER_MAX_SAMPLES,
    }


def _new_classifier(datasets: Datasets, seed: int = CLASSIFIER_SEED) -> nn.Module:
    """A seeded SmallCNN; its random init draws leave the caller's RNG alone (the trial's stream must not shift)."""
    from tuner.models import SmallCNN

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return SmallCNN(channels=datasets.channels, num_classes=datasets.num_classes)


def _accuracy(model: nn.Module, ds: Dataset, device: Device) -> float:
    correct = total = 0
    model.eval()
    with torch.no_grad():
        for x, y in DataLoader(ds, batch_size=256, shuffle=False, num_workers=0, generator=torch.Generator()):
            pred = model(x.to(device.torch_device)).argmax(1).cpu()
            correct += int((pred == torch.as_tensor(y)).sum())
            total += len(y)
    return correct / max(total, 1)


def _train_classifier(datasets: Datasets, device: Device) -> tuple[nn.Module, float]:
    """A few epochs of Adam on the un-augmented training split, seeded, without touching the caller's RNG."""
    train = unaugmented_train(datasets)
    n = len(train)  # type: ignore[arg-type]
    steps = max(1, min(CLASSIFIER_EPOCHS * n, CLASSIFIER_MAX_SAMPLES) // CLASSIFIER_BATCH)
    cuda = [device.torch_device] if device.torch_device.type == "cuda" else []
    # enable_grad: scoring runs under no_grad, and the first score of a dataset trains this classifier.
    with torch.random.fork_rng(devices=cuda), torch.autocast(device.torch_device.type, enabled=False), \
            torch.enable_grad():
        torch.manual_seed(CLASSIFIER_SEED)
        model = _new_classifier(datasets).to(device.torch_device)
        opt = torch.optim.Adam(model.parameters(), lr=CLASSIFIER_LR)
        loader = DataLoader(
            train, batch_size=min(CLASSIFIER_BATCH, n), shuffle=True, drop_last=n >= CLASSIFIER_BATCH,
            num_workers=0, generator=torch.Generator().manual_seed(CLASSIFIER_SEED),
        )
        model.train()
        step = 0
        while step < steps:
            for x, y in loader:
                x, y = x.to(device.torch_device), torch.as_tensor(y).to(device.torch_device)
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                step += 1
                if step >= steps:
                    break
    model.eval()
    return model, _accuracy(model, datasets.val, device)


def _load_classifier(
    folder: Path, datasets: Datasets, meta: dict[str, Any], device: Device
) -> tuple[nn.Module, float] | None:
    """The cached classifier if it is intact and was trained for this exact dataset; None means retrain."""
    try:
        info = json.loads((folder / "classifier.json").read_text())
        if info.get("meta") != meta or info.get("sha256") != sha256(folder / "classifier.pt"):
            return None
        model = _new_classifier(datasets)
        model.load_state_dict(torch.load(folder / "classifier.pt", map_location="cpu", weights_only=True))
        return model.to(device.torch_device).eval(), float(info["accuracy"])
    except Exception:  # noqa: BLE001 - missing, truncated or foreign files all mean "train it again"
        return None


def feature_classifier(datasets: Datasets, cache_dir: Path, device: Device) -> tuple[nn.Module, float]:
    """The dataset's FID feature classifier (eval mode) and its held-out accuracy; trained once, then cached.

    A missing, corrupt or mismatched cache entry is retrained; training is seeded so it is repeatable. The lock
    makes concurrent trials on one node train it once instead of racing.
    """
    folder = fid_cache_dir(datasets, cache_dir)
    meta = _classifier_meta(datasets, image_size_of(datasets))
    with locked(folder):
        cached = _load_classifier(folder, datasets, meta, device)
        if cached is not None:
            return cached
        model, accuracy = _train_classifier(datasets, device)
        state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        atomic_write(folder / "classifier.pt", lambda p: torch.save(state, p))
        info = {"accuracy": accuracy, "sha256": sha256(folder / "classifier.pt"), "meta": meta}
        atomic_write(folder / "classifier.json", json.dumps(info, indent=2) + "\n")
        return model, accuracy
