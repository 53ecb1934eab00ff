"""The Frechet distance of classifier features: torchmetrics' FrechetInceptionDistance arithmetic, without its import.

Importing torchmetrics costs 1.2-2.6 s of CPU beyond torch and torchvision (its package import pulls in
scipy.signal, 1.6 s of it; `python -X importtime`, 2 cores under load 3-4) in every process that scores a GAN: every
trial process, every confirmation re-run's fresh process, the pre-flight, every `tuner train`. Classifier features
need none of it, so this class keeps the same states under the same names and dtypes (real_features_sum,
..._cov_sum, ..._num_samples, fake_* likewise: cached `real-classifier.pt` files written through torchmetrics stay
valid) and runs torchmetrics 1.9's update and compute step for step, so a score is the same number either way.
Inception features still use torchmetrics itself (tuner.measure.fid.metric).
"""

from __future__ import annotations

import torch
from torch import nn


class Frechet:
    """Running float64 feature sums of real and generated images, and the Frechet distance between their Gaussians.

    Duck-types the part of FrechetInceptionDistance tuner uses: update(imgs, real), compute(), reset() (generated
    images only, as with reset_real_features=False), and the real_*/fake_* state attributes.
    """

    def __init__(self, features: nn.Module, num_features: int, device: torch.device) -> None:
        self.features = features
        self.orig_dtype = torch.float64
        self.real_features_sum, self.real_features_cov_sum, self.real_features_num_samples = _zeros(num_features,
                                                                                                  device)
        self.fake_features_sum, self.fake_features_cov_sum, self.fake_features_num_samples = _zeros(num_features,
                                                                                                  device)

    def update(self, imgs: torch.Tensor, real: bool) -> None:
        """Features of `imgs` (as the feature module wants them) added to the real or generated sums."""
        with torch.no_grad():
            features = self.features(imgs)
        self.orig_dtype = features.dtype
        features = features.double()
        if features.dim() == 1:
            features = features.unsqueeze(0)
        if real:
            self.real_features_sum += features.sum(dim=0)
            self.real_features_cov_sum += features.t().mm(features)
            self.real_features_num_samples += imgs.shape[0]
        else:
            self.fake_features_sum += features.sum(dim=0)
            self.fake_features_cov_sum += features.t().mm(features)
            self.fake_features_num_samples += imgs.shape[0]

    def reset(self) -> None:
        """Drop the generated images' sums; the real ones stay (they are the dataset's, loaded from the cache)."""
        n, device = self.fake_features_sum.shape[0], self.fake_features_sum.device
        self.fake_features_sum, self.fake_features_cov_sum, self.fake_features_num_samples = _zeros(n, device)

    def compute(self) -> torch.Tensor:
        if self.real_features_num_samples < 2 or self.fake_features_num_samples < 2:
            raise RuntimeError("More than one sample is required for both the real and fake distributed to compute FID")
        mean_real, cov_real = _moments(self.real_features_sum, self.real_features_cov_sum,
                                       self.real_features_num_samples)
        mean_fake, cov_fake = _moments(self.fake_features_sum, self.fake_features_cov_sum,
                                       self.fake_features_num_samples)
        return frechet_distance(mean_real.squeeze(0), cov_real, mean_fake.squeeze(0), cov_fake).to(self.orig_dtype)


def _zeros(n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Empty states as torchmetrics adds them: float64 sums, an int64 count."""
    return (torch.zeros(n).double().to(device), torch.zeros((n, n)).double().to(device),
            torch.tensor(0).long().to(device))


def _moments(total: torch.Tensor, cov_sum: torch.Tensor, n: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean (1, d) and unbiased covariance (d, d) from running sums, in torchmetrics' order of operations."""
    mean = (total / n).unsqueeze(0)
    cov_num = cov_sum - n * mean.t().mm(mean)
    return mean, cov_num / (n - 1)


def frechet_distance(mu1: torch.Tensor, sigma1: torch.Tensor, mu2: torch.Tensor, sigma2: torch.Tensor) -> torch.Tensor:
    """||mu1 - mu2||^2 + Tr(sigma1 + sigma2 - 2 sqrt(sigma1 sigma2)), as torchmetrics' `_compute_fid` computes it
    (the square root's trace from the eigenvalues of sigma1 @ sigma2)."""
    a = (mu1 - mu2).square().sum(dim=-1)
    b = sigma1.trace() + sigma2.trace()
    c = torch.linalg.eigvals(sigma1 @ sigma2).sqrt().real.sum(dim=-1)
    return a + b - 2 * c
