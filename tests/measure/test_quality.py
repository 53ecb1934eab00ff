"""Scoring trials: the built-in CNN's loss/accuracy on the held-out split in scoring mode, GAN FID that is
repeatable and tracks training."""

import copy
import math

import pytest
import torch
from PIL import Image
from torch import nn

from tuner.config import Quality
from tuner.device import resolve_device
from tuner.measure import fid
from tuner.measure.fid import unaugmented_train
from tuner.measure.quality import eval_mode, evaluate_gan, feature_classifier, save_grid, warm_up_fid
from tuner.models import Discriminator, Generator, SmallCNN
from tests.helpers.fakes import FakeCudaDevice

CPU = resolve_device("cpu")


def new_generator(seed=0):
    torch.manual_seed(seed)
    return Generator(nz=64, ngf=32, channels=1, image_size=32)


# --- cnn ---------------------------------------------------------------------------------------------------


def test_cnn_scores_on_the_held_out_split_in_eval_mode_and_fp32(digits, cache):
    """The built-in cnn's evaluate() under the trial's scoring mode (tuner.measure.quality.eval_mode)."""
    from torch.utils.data import DataLoader

    from tuner.builtin.cnn import make

    evaluate = make(dataset="digits").evaluate

    def score(model, batch_size=256):
        with eval_mode(model):
            batches = DataLoader(digits.val, batch_size=batch_size, shuffle=False, generator=torch.Generator())
            return evaluate({"net": model}, ((x.float(), torch.as_tensor(y)) for x, y in batches))

    trained, recorded_accuracy = feature_classifier(digits, cache, CPU)
    trained.train()
    out = score(trained)
    assert trained.training  # the caller's mode comes back
    assert out["accuracy"] == pytest.approx(recorded_accuracy)  # eval mode: BatchNorm uses running statistics
    assert out["loss"] < 0.3
    with torch.autocast("cpu", dtype=torch.bfloat16):  # an enclosing autocast does not lower the precision
        assert score(trained, batch_size=100)["loss"] == pytest.approx(out["loss"], abs=1e-6)

    torch.manual_seed(0)
    untrained = score(SmallCNN(channels=1, num_classes=10))
    assert untrained["accuracy"] < 0.3 and untrained["loss"] == pytest.approx(math.log(10), abs=0.3)


# --- gan ---------------------------------------------------------------------------------------------------


def test_same_generator_weights_score_the_same(digits, cache):
    g = new_generator()
    g.train()
    q = Quality(fid_samples=200)
    (cache / "fid" / "digits-32px" / "real-classifier.pt").unlink(missing_ok=True)
    rng = torch.get_rng_state()
    first = evaluate_gan(g, digits, q, cache, CPU)  # computes the real statistics
    second = evaluate_gan(copy.deepcopy(g), digits, q, cache, CPU)  # loads them from disk
    assert abs(first["fid"] - second["fid"]) <= 1e-6
    assert g.training  # restored after evaluation in eval mode
    assert torch.equal(torch.get_rng_state(), rng)  # the trial's own random stream is left alone
    assert first["fid_samples"] == 200 and first["fid_features"] == "classifier"
    assert first["fid_classifier_accuracy"] > 0.9 and first["quality_seconds"] > 0
    for out in (first, second):  # the scoring and the one-time work, timed apart (values not asserted: noisy)
        assert all(isinstance(out[k], float) and out[k] >= 0 for k in ("quality_seconds", "quality_setup_seconds"))
    other_seed = evaluate_gan(g, digits, Quality(fid_samples=200, fid_seed=7), cache, CPU)
    assert other_seed["fid"] != first["fid"]  # the seed really picks the latents


def test_warm_up_builds_the_cache_that_evaluate_gan_then_reuses(tmp_path, tiny, monkeypatch):
    ds, q = tiny(size=32), Quality(fid_samples=16)
    setup = warm_up_fid(ds, q, tmp_path, CPU)
    assert setup.fake_count == 0 and int(setup.metric.real_features_num_samples) == 48
    folder = tmp_path / "fid" / "tiny-32px"
    files = ("classifier.pt", "classifier.json", "real-classifier.pt")
    written = {f: (folder / f).stat().st_mtime_ns for f in files}

    def refuse(*a, **k):
        raise AssertionError("rebuilt although warm_up_fid cached it")

    monkeypatch.setattr(fid.classifier, "_train_classifier", refuse)
    monkeypatch.setattr(fid.metric, "unaugmented_train", refuse)
    out = evaluate_gan(new_generator(), ds, q, tmp_path, CPU)
    assert {f: (folder / f).stat().st_mtime_ns for f in files} == written
    assert out["fid_samples"] == 16 and math.isfinite(out["fid"])
    assert all(isinstance(out[k], float) and out[k] >= 0 for k in ("quality_seconds", "quality_setup_seconds"))


def test_sample_grid_is_an_8x8_png(digits, cache, tmp_path):
    grid = tmp_path / "trial" / "samples.png"
    evaluate_gan(new_generator(), digits, Quality(fid_samples=100), cache, FakeCudaDevice(), sample_grid=grid)
    with Image.open(grid) as img:
        assert img.format == "PNG" and img.size == (8 * 34 + 2, 8 * 34 + 2)  # 32px images, 2px padding


@pytest.mark.parametrize("n, channels, size", [(64, 1, 32), (70, 1, 16), (11, 3, 8), (1, 1, 8)])
def test_sample_grid_has_torchvision_save_images_pixels(tmp_path, n, channels, size):
    """save_grid draws what torchvision.utils.save_image(nrow=8, padding=2, normalize, value_range=(-1, 1)) drew
    (without importing torchvision): values beyond [-1, 1] clipped, a partial last row, one image, colour."""
    utils = pytest.importorskip("torchvision.utils")
    g = torch.Generator().manual_seed(n)
    images = torch.randn(n, channels, size, size, generator=g) * 0.8
    save_grid(images, tmp_path / "ours.png")
    utils.save_image(images[:64], str(tmp_path / "theirs.png"), nrow=8, normalize=True, value_range=(-1, 1))
    with Image.open(tmp_path / "ours.png") as ours, Image.open(tmp_path / "theirs.png") as theirs:
        assert (ours.mode, ours.size) == (theirs.mode, theirs.size)
        assert ours.tobytes() == theirs.tobytes()


def test_diverged_generator_scores_nan_without_crashing(digits, cache):
    g = new_generator()
    with torch.no_grad():
        g.net[0].weight.fill_(float("nan"))
    out = evaluate_gan(g, digits, Quality(fid_samples=64), cache, CPU)
    assert math.isnan(out["fid"]) and out["fid_samples"] == 64


def test_briefly_trained_dcgan_scores_lower_than_at_initialisation(digits, cache):
    g, d = new_generator(), Discriminator(ndf=32, channels=1, image_size=32)
    q = Quality(fid_samples=500)
    at_init = evaluate_gan(g, digits, q, cache, CPU)["fid"]

    train = unaugmented_train(digits)
    real = torch.stack([train[i][0] for i in range(len(train))])
    opt_g = torch.optim.Adam(g.parameters(), 2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), 2e-4, betas=(0.5, 0.999))
    bce, rng, bs = nn.BCEWithLogitsLoss(), torch.Generator().manual_seed(1), 64
    ones, zeros = torch.ones(bs), torch.zeros(bs)
    for _ in range(160):  # ~10 s on 2 idle CPU cores; FID ~770 -> ~260
        x = real[torch.randint(0, len(real), (bs,), generator=rng)]
        fake = g(g.latent(bs, generator=rng))
        loss_d = bce(d(x), ones) + bce(d(fake.detach()), zeros)
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        loss_g = bce(d(fake), ones)
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()

    trained = evaluate_gan(g, digits, q, cache, CPU)["fid"]
    assert trained < 0.8 * at_init, (at_init, trained)
