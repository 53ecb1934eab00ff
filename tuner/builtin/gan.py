"""The built-in DCGAN workload: two phases (D then G, one Adam each) on the public API, scored by FID.

Its optimizer is DCGAN's own, declared as any workload declares its own: Adam, lr 2e-4, betas (0.5, 0.999).

`workload_options`: image_size (a power of two >= 16; 32 by default, 64 for pytorch/examples' size), width (the
generator's and discriminator's base channel count, 32 by default, 64 in pytorch/examples), nz (latent size),
target_eval_samples (a study with a target: its evaluations during training read the FID of this many generated
images, 128 by default, so K can be fine; the trial's quality at the end reads quality.fid_samples; none: all).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tuner.builtin._data import TARGET_EVAL_SAMPLES, SpecData
from tuner.workload import Phase, Shared, Workload, trial_context


def make(dataset: str = "digits", image_size: int = 32, width: int = 32, nz: int = 64,
         target_eval_samples: int | None = TARGET_EVAL_SAMPLES) -> Workload:
    from tuner.models import check_image_size

    check_image_size(image_size)
    data = SpecData(dataset, image_size)
    bce = nn.BCEWithLogitsLoss()

    def generator() -> nn.Module:
        from tuner.models import Generator

        return Generator(nz=nz, ngf=width, channels=data.get().channels, image_size=image_size)

    def discriminator() -> nn.Module:
        from tuner.models import Discriminator

        return Discriminator(ndf=width, channels=data.get().channels, image_size=image_size)

    def d_loss(models: Any, batch: Any, shared: Shared) -> torch.Tensor:
        real = batch[0]
        z = torch.randn(real.shape[0], nz, 1, 1, device=real.device)
        shared["z"] = z
        if shared.count == 1 and trial_context().world_size == 1:
            # The textbook step: one G forward, its graph kept for the G phase. With accumulation its graph would
            # live for every micro-batch at once (memory growing with accumulation_steps), and under DDP G must run
            # in its own phase to be synchronized there: then G runs again in the G phase instead.
            fake = models["g"](z)
            shared["fake"] = fake
        else:
            with torch.no_grad():
                fake = models["g"](z)
        logits_real, logits_fake = models["d"](real), models["d"](fake.detach())
        return bce(logits_real, torch.ones_like(logits_real)) + bce(logits_fake, torch.zeros_like(logits_fake))

    def g_loss(models: Any, batch: Any, shared: Shared) -> torch.Tensor:
        fake = shared.pop("fake", None)
        if fake is None:
            fake = models["g"](shared["z"])
        logits = models["d"](fake)
        return bce(logits, torch.ones_like(logits))

    def evaluate(models: Any, val_batches: Any) -> dict[str, Any]:
        """FID of generated images against the training split (tuner.measure.fid), and an 8x8 sample grid; a
        time-to-target evaluation (trial_context().eval_subset) generates that many images, the end fid_samples."""
        from tuner.config import Quality
        from tuner.measure.quality import evaluate_gan

        ctx = trial_context()
        quality = ctx.quality or Quality()
        if ctx.eval_subset is not None:  # a time-to-target evaluation: FID over as many images as its subset
            quality = quality.model_copy(update={"fid_samples": max(16, min(quality.fid_samples, ctx.eval_subset))})
        elif ctx.preflight:  # only the keys are checked: a small N keeps the check quick
            quality = quality.model_copy(update={"fid_samples": min(quality.fid_samples, 64)})
        scored_all = ctx.eval_subset is None and not ctx.preflight
        grid = ctx.out_dir / "samples.png" if ctx.out_dir is not None and scored_all else None
        device = next(models["g"].parameters()).device
        from tuner.device import device_for

        out = evaluate_gan(models["g"], data.get(), quality, ctx.cache_dir, device_for(device), sample_grid=grid)
        if grid is not None and grid.is_file():
            out["sample_grid"] = str(grid)
        return out

    return Workload(
        models={"g": generator, "d": discriminator},
        datasets=data.splits,
        phases=[Phase("d", d_loss, ["d"]), Phase("g", g_loss, ["g"])],
        evaluate=evaluate,
        quality=("fid", "min"),
        hyperparameters={"lr": 2e-4, "betas": (0.5, 0.999)},  # DCGAN's (Radford et al.; pytorch/examples)
        target_eval_samples=target_eval_samples,
        name="gan",
        info={"model": f"DCGAN {image_size}x{image_size}, width {width}, nz {nz}", "dataset": dataset},
    )
