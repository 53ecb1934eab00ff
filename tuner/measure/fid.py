"""Frechet distance of images to a dataset's training split, comparable across the trials of a study.

FID is only comparable at equal sample count, equal latent seeds, equal real statistics and an equal feature
extractor, so everything that could differ between trials is fixed here and cached on disk once per dataset:

- `classifier` features (default): the penultimate layer of a SmallCNN trained once, deterministically, on the
  dataset's training split (the practice for MNIST-like data, where Inception's 2048-d pool features would have
  a singular covariance: digits has 1797 images). Its held-out accuracy is recorded beside it.
- `inception` features: torch-fidelity's Inception v3 from a weights file on disk. Nothing is ever downloaded.

The Frechet math is torchmetrics' FrechetInceptionDistance; this module only feeds it and caches its real-image
states (real_features_sum / real_features_cov_sum / real_features_num_samples) under
`cache_dir/fid/<dataset slug>/`.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

from tuner.config import Quality
from tuner.device import Device
from tuner.errors import DatasetError, WeightsError
from tuner.files import load_json

if TYPE_CHECKING:
    from torchmetrics.image.fid import FrechetInceptionDistance

    from tuner.data import Datasets

# The file torch-fidelity (and so torchmetrics) would download; torch.hub keeps downloads in get_dir()/checkpoints.
INCEPTION_FILE = "weights-inception-2015-12-05-6726825d.pth"
INCEPTION_DIM = 2048

# Feature classifier: fixed so every study on a dataset gets the same extractor.
CLASSIFIER_RECIPE = 1  # bump when the architecture or training below changes: cached classifiers are retrained
CLASSIFIER_SEED = 0
CLASSIFIER_EPOCHS = 5
CLASSIFIER_MAX_SAMPLES = 50_000  # cap on training samples (epochs x train size) for large datasets
CLASSIFIER_BATCH = 64
CLASSIFIER_LR = 1e-3

# Real statistics: at most this many training images (the usual 50k for FID), a fixed subset when larger.
REAL_MAX_SAMPLES = 50_000
_REAL_SUBSET_SEED = 31337

_BATCH = {"classifier": 250, "inception": 32}  # feature-extraction batch: memory only, not the result


# --- cache layout -------------------------------------------------------------------------------------------


def image_size_of(datasets: Datasets) -> int:
    """Side of the dataset's images (Datasets does not store it; every item has it)."""
    return int(datasets.val[0][0].shape[-1])


def dataset_slug(name: str, image_size: int) -> str:
    """A folder name for (dataset, image size): readable for plain names, hashed when a path is in it."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "dataset"
    if safe != name or len(safe) > 48:
        safe = f"{safe[-40:].strip('._')}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"
    return f"{safe}-{image_size}px"


def fid_cache_dir(datasets: Datasets, cache_dir: Path) -> Path:
    return Path(cache_dir) / "fid" / dataset_slug(datasets.name, image_size_of(datasets))


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Exclusive lock on a cache folder, so concurrent trials build a cache entry once instead of racing."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no flock (Windows): atomic renames still keep the cache consistent
        yield
        return
    with open(folder / ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _atomic_write(path: Path, write: Any) -> None:
    """Write through a temp file in the same folder and rename it into place: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; the cache is as readable as anything else the user writes
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- real images --------------------------------------------------------------------------------------------


def unaugmented_train(datasets: Datasets) -> Dataset:
    """The training split with the validation transform: real statistics must not depend on augmentation draws.

    tuner's datasets carry their transform as `.transform` (ImageFolder, MNIST, CIFAR10, the folder split); where
    the train split has one, a shallow copy gets val's. Datasets without transforms (synthetic) have nothing to undo.
    """
    train, val = datasets.train, datasets.val
    if hasattr(train, "transform") and hasattr(val, "transform"):
        train = copy.copy(train)
        train.transform = val.transform
    return train


def _real_subset(ds: Dataset) -> Dataset:
    n = len(ds)  # type: ignore[arg-type]
    if n <= REAL_MAX_SAMPLES:
        return ds
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(_REAL_SUBSET_SEED))[:REAL_MAX_SAMPLES]
    return Subset(ds, sorted(perm.tolist()))


def _batches(ds: Dataset, batch_size: int) -> Iterator[torch.Tensor]:
    for x, _ in DataLoader(ds, batch_size=batch_size, shuffle=False, num_workers=0, generator=torch.Generator()):
        yield x


# --- feature classifier -------------------------------------------------------------------------------------


class ClassifierFeatures(nn.Module):
    """torchmetrics feature module: images in [0, 1] -> the classifier's penultimate layer (N, d), in float64.

    It never leaves eval mode (BatchNorm must use its running statistics), like torchmetrics' own Inception.
    """

    def __init__(self, classifier: nn.Module) -> None:
        super().__init__()
        self.classifier = classifier
        self.num_features = int(classifier.feature_dim)  # lets torchmetrics skip its dummy forward pass
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
        if info.get("meta") != meta or info.get("sha256") != _sha256(folder / "classifier.pt"):
            return None
        model = _new_classifier(datasets)
        model.load_state_dict(torch.load(folder / "classifier.pt", map_location="cpu", weights_only=True))
        return model.to(device.torch_device).eval(), float(info["accuracy"])
    except Exception:  # noqa: BLE001 - missing, truncated or foreign files all mean "train it again"
        return None


def feature_classifier(datasets: Datasets, cache_dir: Path, device: Device) -> tuple[nn.Module, float]:
    """The dataset's FID feature classifier (eval mode) and its held-out accuracy; trained once, then cached.

    Cached as cache_dir/fid/<slug>/classifier.pt + classifier.json (accuracy, what it was trained on, the .pt's
    sha256). A missing, corrupt or mismatched cache entry is retrained; training is seeded so it is repeatable.
    """
    folder = fid_cache_dir(datasets, cache_dir)
    meta = _classifier_meta(datasets, image_size_of(datasets))
    with _locked(folder):
        cached = _load_classifier(folder, datasets, meta, device)
        if cached is not None:
            return cached
        model, accuracy = _train_classifier(datasets, device)
        state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        _atomic_write(folder / "classifier.pt", lambda p: torch.save(state, p))
        info = {"accuracy": accuracy, "sha256": _sha256(folder / "classifier.pt"), "meta": meta}
        _atomic_write(folder / "classifier.json", lambda p: p.write_text(json.dumps(info, indent=2) + "\n"))
        return model, accuracy


# --- inception ----------------------------------------------------------------------------------------------


def inception_weights_candidates(quality: Quality) -> list[Path]:
    """Where the Inception weights are looked for: fid_weights if set, else torch hub's checkpoint cache."""
    if quality.fid_weights is not None:
        return [Path(quality.fid_weights).expanduser()]
    return [Path(torch.hub.get_dir()) / "checkpoints" / INCEPTION_FILE]


def check_fid_weights(quality: Quality) -> None:
    """Refuse, before a study starts, an Inception FID whose package or weights file is not on this machine.

    Classifier features need nothing on disk (the classifier is trained when missing), so they always pass.
    """
    if quality.enabled and quality.fid_features == "inception":
        inception_weights_path(quality)


def inception_weights_path(quality: Quality) -> Path:
    """The Inception weights file to load (never downloaded); WeightsError says where to put it when missing."""
    if quality.fid_features != "inception":
        raise ValueError("inception_weights_path is only for fid_features=inception")
    try:
        import torch_fidelity  # noqa: F401
    except ImportError:
        raise WeightsError(
            "fid_features: inception needs the torch-fidelity package (pip install torch-fidelity); "
            "or use fid_features: classifier"
        ) from None
    path = inception_weights_candidates(quality)[0]
    if path.is_file():
        return path
    if quality.fid_weights is not None:
        raise WeightsError(
            f"fid_weights: {path} does not exist; put torch-fidelity's Inception weights ({INCEPTION_FILE}) there "
            "or fix the path (fid_weights: PATH in the config, --fid-weights PATH); tuner never downloads weights"
        )
    raise WeightsError(
        f"fid_features: inception needs the Inception weights file {INCEPTION_FILE} at {path} "
        "(or anywhere, named with fid_weights: PATH in the config / --fid-weights PATH); tuner never downloads "
        "weights; or use fid_features: classifier"
    )


# --- the metric ---------------------------------------------------------------------------------------------


class FidSetup:
    """A FrechetInceptionDistance with the dataset's cached real statistics loaded, ready for generated images.

    Build it with `prepare_fid`; feed batches in [-1, 1] with `add_fake`; read `compute()`. `info` holds the keys
    results record (fid_features, and fid_classifier_accuracy for classifier features).
    """

    def __init__(
        self, metric: FrechetInceptionDistance, features: str, device: Device, info: dict[str, Any]
    ) -> None:
        self.metric = metric
        self.features = features
        self.device = device
        self.info = info
        self.fake_count = 0
        self.finite = True

    @property
    def batch_size(self) -> int:
        return _BATCH[self.features]

    def _prepare(self, images: torch.Tensor) -> torch.Tensor:
        """[-1, 1] -> [0, 1] float on the device (normalize=True); Inception wants 3 channels."""
        x = ((images.detach().float().to(self.device.torch_device) + 1) / 2).clamp_(0, 1)
        if self.features == "inception" and x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        return x

    def add_real(self, images: torch.Tensor) -> None:
        self.metric.update(self._prepare(images), real=True)

    def add_fake(self, images: torch.Tensor) -> None:
        """Add generated images; non-finite ones (a diverged generator) make compute() return NaN."""
        if not torch.isfinite(images).all():
            self.finite = False
            return
        self.metric.update(self._prepare(images), real=False)
        self.fake_count += images.shape[0]

    def compute(self) -> float:
        if not self.finite or self.fake_count < 2:
            return math.nan
        return float(self.metric.compute())


def _new_metric(feature: nn.Module | int, weights: Path | None, device: Device) -> FrechetInceptionDistance:
    from torchmetrics.image.fid import FrechetInceptionDistance

    kwargs: dict[str, Any] = {}
    if weights is not None:
        kwargs["feature_extractor_weights_path"] = str(weights)  # given, so torch-fidelity never downloads
    # sync_on_compute=False: a DDP trial scores on one rank; syncing would wait forever for the others.
    metric = FrechetInceptionDistance(
        feature=feature, reset_real_features=False, normalize=True, sync_on_compute=False, **kwargs
    )
    return metric.to(device.torch_device)


_REAL_STATES = ("real_features_sum", "real_features_cov_sum", "real_features_num_samples")


def _real_stats(setup: FidSetup, datasets: Datasets, folder: Path, key: dict[str, Any]) -> None:
    """Load the real states from cache, or compute them over the training split once and cache them."""
    path = folder / f"real-{setup.features}.pt"
    with _locked(folder):
        try:
            saved = torch.load(path, map_location="cpu", weights_only=True)
            if saved["key"] == key:
                for name in _REAL_STATES:
                    setattr(setup.metric, name, saved[name].to(setup.device.torch_device))
                return
        except Exception:  # noqa: BLE001 - missing, corrupt or stale: compute again
            pass
        with torch.no_grad():
            for x in _batches(_real_subset(unaugmented_train(datasets)), setup.batch_size):
                setup.add_real(x)
        states = {name: getattr(setup.metric, name).detach().cpu() for name in _REAL_STATES}
        _atomic_write(path, lambda p: torch.save({"key": key, **states}, p))


def prepare_fid(datasets: Datasets, quality: Quality, cache_dir: Path, device: Device) -> FidSetup:
    """Feature extractor + metric with the dataset's real statistics (computed once per dataset and extractor)."""
    folder = fid_cache_dir(datasets, cache_dir)
    size = image_size_of(datasets)
    key: dict[str, Any] = {  # what cached real statistics must match to be reused
        "dataset": datasets.name,
        "image_size": size,
        "train_samples": len(datasets.train),  # type: ignore[arg-type]
        "max_samples": REAL_MAX_SAMPLES,
    }
    if quality.fid_features == "classifier":
        classifier, accuracy = feature_classifier(datasets, cache_dir, device)
        metric = _new_metric(ClassifierFeatures(classifier), None, device)
        key["extractor"] = load_json(folder / "classifier.json", "FID cache file", DatasetError)["sha256"]
        info = {"fid_features": "classifier", "fid_classifier_accuracy": accuracy}
    else:
        weights = inception_weights_path(quality)
        try:
            metric = _new_metric(INCEPTION_DIM, weights, device)
        except Exception as err:  # noqa: BLE001 - torch.load / load_state_dict raise many kinds
            raise WeightsError(
                f"fid weights {weights} are not torch-fidelity's Inception v3 state dict ({type(err).__name__}: "
                f"{str(err).splitlines()[0][:200] if str(err) else ''}); replace the file with {INCEPTION_FILE}"
            ) from None
        key["extractor"] = _sha256(weights)
        info = {"fid_features": "inception"}
    setup = FidSetup(metric, quality.fid_features, device, info)
    _real_stats(setup, datasets, folder, key)
    return setup


def fid_of_images(
    batches: Iterable[torch.Tensor], datasets: Datasets, quality: Quality, cache_dir: Path, device: Device
) -> dict[str, Any]:
    """FID of image batches ([-1, 1], the dataset's channels and size) against the dataset's training split.

    Returns fid, fid_features, fid_samples (the count actually scored), quality_seconds and, for classifier
    features, fid_classifier_accuracy. Use it to score anything that is not a Generator (e.g. held-out images).
    """
    start = time.perf_counter()
    setup = prepare_fid(datasets, quality, cache_dir, device)
    with torch.no_grad():
        for x in batches:
            setup.add_fake(x)
    fid = setup.compute()
    device.synchronize()
    return {"fid": fid, **setup.info, "fid_samples": setup.fake_count, "quality_seconds": time.perf_counter() - start}
