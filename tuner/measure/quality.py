"""Scoring a trained trial: the scoring mode every evaluate() runs under (eval_mode), FID for the GAN (the CNN's
loss/accuracy is its workload's own evaluate(), tuner.builtin.cnn).

Scores are compared across the trials of a study, so each is taken the same way every time: eval mode, fp32, no
grad, the fixed held-out split (CNN), and for FID the same N, latent seed, feature extractor and cached real
statistics (see tuner.measure.fid). The model's train/eval modes are restored afterwards.

quality_seconds times the scoring only. A GAN's one-time FID work (imports, the cached extractor and real
statistics, CUDA's lazy library loading) is timed apart as quality_setup_seconds, so the first trial of a process
does not look slower to score than the rest.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from tuner.config import Quality
from tuner.device import Device
from tuner.measure.fid import check_fid_weights, feature_classifier, fid_of_images, warm_up_fid

if TYPE_CHECKING:
    from tuner.data import Datasets
    from tuner.models import Generator

__all__ = ["check_fid_weights", "eval_mode", "evaluate_gan", "feature_classifier", "fid_of_images", "warm_up_fid"]

GRID_IMAGES = 64  # 8 x 8


@contextlib.contextmanager
def eval_mode(*models: nn.Module) -> Iterator[None]:
    """Eval mode, fp32 and no grad for the duration (scoring a trial: tuner.train.trial too); every submodule's own
    mode comes back afterwards."""
    modes = [(m, m.training) for model in models for m in model.modules()]
    for model in models:
        model.eval()
    device_type = next((p.device.type for model in models for p in model.parameters()), "cpu")
    try:
        with torch.no_grad(), torch.autocast(device_type, enabled=False):
            yield
    finally:
        for m, mode in modes:
            m.training = mode


def _generated(
    generator: Generator, n: int, seed: int, batch_size: int, device: Device, keep: list[torch.Tensor]
) -> Iterator[torch.Tensor]:
    """n images from latents drawn all at once from a seeded torch.Generator: the same n images for equal weights.

    The first GRID_IMAGES are kept (on the CPU) for the sample grid.
    """
    z = generator.latent(n, generator=torch.Generator().manual_seed(seed))  # on the CPU: same draw on any device
    kept = 0
    for i in range(0, n, batch_size):
        images = generator(z[i : i + batch_size].to(device.torch_device)).float()
        if kept < GRID_IMAGES:
            keep.append(images[: GRID_IMAGES - kept].cpu())
            kept += keep[-1].shape[0]
        yield images


def save_grid(images: torch.Tensor, path: Path, nrow: int = 8, padding: int = 2) -> None:
    """An 8-wide grid PNG of images in [-1, 1]: torchvision's save_image(nrow=8, padding=2, normalize=True,
    value_range=(-1, 1)) pixel for pixel (RGB, black 2-pixel gaps), without importing torchvision (1.5 s a process)."""
    from PIL import Image

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        x = images[:GRID_IMAGES].detach().clone()
        if x.size(1) == 1:
            x = torch.cat((x, x, x), 1)
        x.clamp_(min=-1, max=1).sub_(-1).div_(2)
        if x.size(0) == 1:
            grid = x.squeeze(0)
        else:
            cols = min(nrow, x.size(0))
            rows = int(math.ceil(float(x.size(0)) / cols))
            height, width = int(x.size(2) + padding), int(x.size(3) + padding)
            grid = x.new_full((x.size(1), height * rows + padding, width * cols + padding), 0)
            for k in range(x.size(0)):
                row, col = divmod(k, cols)
                grid.narrow(1, row * height + padding, height - padding).narrow(
                    2, col * width + padding, width - padding).copy_(x[k])
        pixels = grid.mul(255).add_(0.5).clamp_(0, 255).permute(1, 2, 0).to("cpu", torch.uint8).numpy()
    Image.fromarray(pixels).save(path)


def evaluate_gan(
    generator: Generator,
    datasets: Datasets,
    quality: Quality,
    cache_dir: Path,
    device: Device,
    sample_grid: Path | None = None,
) -> dict[str, Any]:
    """FID of quality.fid_samples generated images (latent seed quality.fid_seed) against the training split.

    Returns {"fid", "fid_features", "fid_samples", "quality_seconds", "quality_setup_seconds"} plus
    "fid_classifier_accuracy" for classifier features: quality_seconds is generating, extracting and the Frechet
    math; quality_setup_seconds is `warm_up_fid` (one-time work, near zero after a process's first call).
    fid is NaN when the generator produced non-finite images (a diverged trial).
    The first 64 images go to `sample_grid` as an 8x8 PNG when a path is given.
    """
    kept: list[torch.Tensor] = []
    with eval_mode(generator):
        scored = fid_of_images(
            lambda batch: _generated(generator, quality.fid_samples, quality.fid_seed, batch, device, kept),
            datasets, quality, cache_dir, device,
        )
    if sample_grid is not None and kept:
        save_grid(torch.cat(kept), sample_grid)
    # the count asked for, as a trial's record has always said: a diverged generator's batches are not scored
    return {**scored, "fid_samples": quality.fid_samples}
