"""Classifier-feature FID without torchmetrics: the same number as torchmetrics' FrechetInceptionDistance, and real
statistics cached by torchmetrics (before tuner did the arithmetic itself) still load and score the same."""

import pytest
import torch
from torch import nn

from tuner.config import Quality
from tuner.device import resolve_device
from tuner.measure import fid
from tuner.measure.fid import ClassifierFeatures, feature_classifier, prepare_fid
from tuner.measure.fid.frechet import Frechet

tm_fid = pytest.importorskip("torchmetrics.image.fid")

CPU = resolve_device("cpu")
STATES = [f"{side}_features_{s}" for side in ("real", "fake") for s in ("sum", "cov_sum", "num_samples")]


class Planted(nn.Module):
    """'Features' that are the images themselves, flattened: lets a test plant the features exactly."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.num_features = d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1).double()


def torchmetrics_fid(features: nn.Module) -> "tm_fid.FrechetInceptionDistance":
    return tm_fid.FrechetInceptionDistance(feature=features, reset_real_features=False, normalize=True,
                                           sync_on_compute=False)


def test_planted_features_give_torchmetrics_fid_and_states():
    g = torch.Generator().manual_seed(0)
    d = 12
    real = [torch.randn(n, d, generator=g) for n in (100, 77, 3)]
    fake = [torch.randn(n, d, generator=g) * 1.3 + 0.4 for n in (64, 50)]
    ours, theirs = Frechet(Planted(d), d, torch.device("cpu")), torchmetrics_fid(Planted(d))
    for m in (ours, theirs):
        for x in real:
            m.update(x, real=True)
        for x in fake:
            m.update(x, real=False)
    for name in STATES:
        a, b = getattr(ours, name), getattr(theirs, name)
        assert a.dtype == b.dtype and torch.equal(a, b), name
    want = float(theirs.compute())
    assert want > 0.1
    assert float(ours.compute()) == pytest.approx(want, rel=1e-9)

    # reset drops the generated images only (reset_real_features=False), in both
    ours.reset()
    theirs.reset()
    for m in (ours, theirs):
        m.update(fake[0], real=False)
    assert int(ours.fake_features_num_samples) == 64 and int(ours.real_features_num_samples) == 180
    assert float(ours.compute()) == pytest.approx(float(theirs.compute()), rel=1e-9)


def test_too_few_samples_is_refused_like_torchmetrics():
    ours = Frechet(Planted(3), 3, torch.device("cpu"))
    ours.update(torch.randn(5, 3), real=True)
    ours.update(torch.randn(1, 3), real=False)
    with pytest.raises(RuntimeError, match="More than one sample"):
        ours.compute()


def test_real_statistics_cached_by_torchmetrics_load_and_score_the_same(tmp_path, tiny, monkeypatch):
    """A `real-classifier.pt` written by the torchmetrics-based code (same key, states from torchmetrics) is read
    as it is, and a generated set scores what torchmetrics scores with those states."""
    ds = tiny()
    q = Quality()
    prepare_fid(ds, q, tmp_path, CPU)  # trains the classifier, writes tuner's own real statistics
    path = next((tmp_path / "fid").glob("*/real-classifier.pt"))
    ours_saved = torch.load(path, weights_only=True)

    classifier, _ = feature_classifier(ds, tmp_path, CPU)
    theirs = torchmetrics_fid(ClassifierFeatures(classifier))
    with torch.no_grad():
        for x in fid.real.image_batches(fid.real.real_subset(fid.unaugmented_train(ds)), 250):
            theirs.update(((x + 1) / 2).clamp_(0, 1), real=True)
    old = {"key": ours_saved["key"], **{n: getattr(theirs, n).detach().cpu() for n in STATES[:3]}}
    for name in STATES[:3]:  # the old code's cache holds what tuner now computes, dtypes included
        assert old[name].dtype == ours_saved[name].dtype and torch.equal(old[name], ours_saved[name]), name
    old["real_features_sum"] = old["real_features_sum"] * 1.01  # tell the loaded file apart from a recomputed one
    theirs.real_features_sum = old["real_features_sum"]
    torch.save(old, path)

    def refuse(*a, **k):
        raise AssertionError("recomputed although cached")

    monkeypatch.setattr(fid.metric, "unaugmented_train", refuse)
    setup = prepare_fid(ds, q, tmp_path, CPU)
    g = torch.Generator().manual_seed(1)
    images = torch.rand(40, 1, 16, 16, generator=g) * 2 - 1
    setup.add_fake(images)
    with torch.no_grad():
        theirs.update(((images + 1) / 2).clamp_(0, 1), real=False)
    assert setup.compute() == pytest.approx(float(theirs.compute()), rel=1e-9)
