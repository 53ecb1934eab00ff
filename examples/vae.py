"""A variational autoencoder on scikit-learn's digits, tuned by tuner: the GAN's sibling in generative training.

    tuner train --config examples/vae.yaml
    tuner search --space amp_loader --workload examples/vae.py:make --trials 6
"""

import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.nn import functional as F
from torch.utils.data import TensorDataset

import tuner


class VAE(nn.Module):
    def __init__(self, latent: int, hidden: int) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 2 * latent))
        self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, 64))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, logvar = self.encoder(x).chunk(2, dim=1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.decoder(z), mu, logvar


def negative_elbo(model: VAE, x: torch.Tensor) -> torch.Tensor:
    """Reconstruction (Bernoulli) + KL to the unit Gaussian, per image."""
    logits, mu, logvar = model(x)
    recon = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (recon + kl) / x.shape[0]


def digits() -> tuple[TensorDataset, TensorDataset]:
    x = torch.tensor(load_digits().data, dtype=torch.float32) / 16.0  # 1797 images of 8x8 in [0, 1]
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    return TensorDataset(x[perm[:1500]]), TensorDataset(x[perm[1500:]])


def evaluate(models: dict, val_batches) -> dict:
    total, n = 0.0, 0
    for (x,) in val_batches:
        total += float(negative_elbo(models["vae"], x)) * x.shape[0]
        n += x.shape[0]
    return {"val_loss": total / n}


def make(latent: int = 8, hidden: int = 128) -> tuner.Workload:
    return tuner.Workload(
        models={"vae": lambda: VAE(latent, hidden)},
        datasets=digits,
        loss=lambda models, batch: negative_elbo(models["vae"], batch[0]),
        evaluate=evaluate,
        quality=("val_loss", "min"),
        hyperparameters={"lr": 1e-3, "betas": (0.9, 0.999)},  # its own: Adam as pytorch/examples' VAE trains it
    )
