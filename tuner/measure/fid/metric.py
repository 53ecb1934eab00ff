"""The Frechet distance itself, fed the dataset's cached real statistics: for classifier features tuner's own
`Frechet` (torchmetrics' arithmetic without importing torchmetrics, tuner.measure.fid.frechet), for Inception
features torchmetrics' FrechetInceptionDistance.

FID is only comparable across trials at equal sample count, latent seed, real statistics and extractor, so the
real states (real_features_sum / real_features_cov_sum / real_features_num_samples) are computed once per
(dataset, extractor) and cached as `real-<features>.pt`; trials only add their generated images.

A process's first FID also pays one-time costs (importing torchmetrics for Inception features, reading or building
the cache, CUDA's lazy loading of linear-algebra libraries and kernels). `warm_up_fid` does all of them as a separate
step, so a caller can time the scoring apart from them (quality_seconds vs quality_setup_seconds).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from tuner.config import Quality
from tuner.device import Device
from tuner.errors import WeightsError
from tuner.files import atomic_write, locked
from tuner.measure.fid._cache import fid_cache_dir, image_size_of, sha256
from tuner.measure.fid.classifier import ClassifierFeatures, feature_classifier
from tuner.measure.fid.frechet import Frechet
from tuner.measure.fid.inception import INCEPTION_DIM, INCEPTION_FILE, inception_weights_path
from tuner.measure.fid.real import REAL_MAX_SAMPLES, image_batches, real_subset, unaugmented_train

if TYPE_CHECKING:
    from torchmetrics.image.fid import FrechetInceptionDistance

    from tuner.data import Datasets

_BATCH = {"classifier": 250, "inception": 32}  # feature-extraction batch: memory only, not the result
_REAL_STATES = ("real_features_sum", "real_features_cov_sum", "real_features_num_samples")


class FidSetup:
    """A Frechet metric with the dataset's cached real statistics loaded, ready for generated images.

    Build it with `prepare_fid` (or `warm_up_fid`); feed batches in [-1, 1] with `add_fake`; read `compute()`.
    `info` holds the keys results record (fid_features, and fid_classifier_accuracy for classifier features).
    """

    def __init__(
        self, metric: Frechet | FrechetInceptionDistance, features: str, device: Device, info: dict[str, Any]
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


def _real_stats(setup: FidSetup, datasets: Datasets, folder: Path, key: dict[str, Any]) -> None:
    """Load the real states from cache, or compute them over the training split once and cache them."""
    path = folder / f"real-{setup.features}.pt"
    with locked(folder):
        try:
            saved = torch.load(path, map_location="cpu", weights_only=True)
            if saved["key"] == key:
                for name in _REAL_STATES:
                    setattr(setup.metric, name, saved[name].to(setup.device.torch_device))
                return
        except Exception:  # noqa: BLE001 - missing, corrupt or stale: compute again
            pass
        with torch.no_grad():
            for x in image_batches(real_subset(unaugmented_train(datasets)), setup.batch_size):
                setup.add_real(x)
        states = {name: getattr(setup.metric, name).detach().cpu() for name in _REAL_STATES}
        atomic_write(path, lambda p: torch.save({"key": key, **states}, p))


def prepare_fid(datasets: Datasets, quality: Quality, cache_dir: Path, device: Device) -> FidSetup:
    """Feature extractor + metric with the dataset's real statistics (computed once per dataset and extractor)."""
    folder = fid_cache_dir(datasets, cache_dir)
    key: dict[str, Any] = {  # what cached real statistics must match to be reused
        "dataset": datasets.name,
        "image_size": image_size_of(datasets),
        "train_samples": len(datasets.train),  # type: ignore[arg-type]
        "max_samples": REAL_MAX_SAMPLES,
    }
    if quality.fid_features == "classifier":
        classifier, accuracy = feature_classifier(datasets, cache_dir, device)
        extractor = ClassifierFeatures(classifier)
        metric: Frechet | FrechetInceptionDistance = Frechet(extractor, extractor.num_features, device.torch_device)
        key["extractor"] = json.loads((folder / "classifier.json").read_text())["sha256"]
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
        key["extractor"] = sha256(weights)
        info = {"fid_features": "inception"}
    setup = FidSetup(metric, quality.fid_features, device, info)
    _real_stats(setup, datasets, folder, key)
    return setup


def warm_up_fid(datasets: Datasets, quality: Quality, cache_dir: Path, device: Device) -> FidSetup:
    """A ready FidSetup, with every one-time cost of a first FID paid here rather than in the scoring.

    That is: for Inception features the torchmetrics import (1.2-2.6 s of CPU, mostly scipy.signal), building or
    reading the cached extractor and real statistics, one probe image through the extractor (dropped again; on CUDA
    it loads the extractor's kernels) and the Frechet math on a 2x2 matrix on `device` (on CUDA the first
    torch.linalg.eigvals lazily loads the solver libraries). Cheap to repeat: a second call only reads the cache.
    """
    setup = prepare_fid(datasets, quality, cache_dir, device)
    size = image_size_of(datasets)
    with torch.no_grad():
        setup.metric.update(setup._prepare(torch.zeros(1, datasets.channels, size, size)), real=False)
        setup.metric.reset()  # drops the probe; reset_real_features=False keeps the real statistics
        m = torch.eye(2, dtype=torch.float64, device=device.torch_device)
        torch.linalg.eigvals(m @ m).sqrt().real.sum()  # the ops compute() runs
    device.synchronize()
    return setup


def fid_of_images(
    batches: Iterable[torch.Tensor] | Callable[[int], Iterable[torch.Tensor]],
    datasets: Datasets,
    quality: Quality,
    cache_dir: Path,
    device: Device,
) -> dict[str, Any]:
    """FID of image batches ([-1, 1], the dataset's channels and size) against the dataset's training split.

    `batches` is the images, or a function of the extractor's batch size that makes them (a generator's images,
    drawn as the extractor takes them: tuner.measure.quality.evaluate_gan). Returns fid, fid_features, fid_samples
    (the count actually scored), quality_seconds (the scoring), quality_setup_seconds (warm_up_fid) and, for
    classifier features, fid_classifier_accuracy.
    """
    setup_start = time.perf_counter()
    setup = warm_up_fid(datasets, quality, cache_dir, device)
    start = time.perf_counter()
    with torch.no_grad():
        for x in batches(setup.batch_size) if callable(batches) else batches:
            setup.add_fake(x)
    fid = setup.compute()
    device.synchronize()
    return {
        "fid": fid,
        **setup.info,
        "fid_samples": setup.fake_count,
        "quality_seconds": time.perf_counter() - start,
        "quality_setup_seconds": start - setup_start,
    }
