"""Inception v3 features (fid_features: inception) from a weights file already on disk; never downloaded.

A study must not stall or fail halfway on a download from a compute node, so the file is looked for where
torch-fidelity would have put it (or where fid_weights says) and its absence is refused before the study starts.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tuner.config import Quality
from tuner.errors import WeightsError

# The file torch-fidelity (and so torchmetrics) would download; torch.hub keeps downloads in get_dir()/checkpoints.
INCEPTION_FILE = "weights-inception-2015-12-05-6726825d.pth"
INCEPTION_DIM = 2048


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
