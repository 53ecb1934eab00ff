"""FID plumbing: feature classifier and real statistics cached per dataset, real vs noise, Inception never downloads."""

import json
import math

import pytest
import torch
from torch.utils.data import DataLoader

from tuner.config import Quality
from tuner.data import load_datasets
from tuner.device import resolve_device
from tuner.errors import WeightsError
from tuner.measure import fid
from tuner.measure.fid import (
    INCEPTION_FILE,
    check_fid_weights,
    feature_classifier,
    fid_of_images,
    prepare_fid,
    warm_up_fid,
)

CPU = resolve_device("cpu")


def val_batches(ds):
    return (x for x, _ in DataLoader(ds.val, batch_size=128))


def test_held_out_digits_score_far_lower_than_noise(digits, cache):
    q = Quality()
    real = fid_of_images(val_batches(digits), digits, q, cache, CPU)
    n = real["fid_samples"]
    assert n == len(digits.val)
    g = torch.Generator().manual_seed(0)
    noise = fid_of_images([torch.rand(n, 1, 32, 32, generator=g) * 2 - 1], digits, q, cache, CPU)
    assert noise["fid_samples"] == n  # equal N: FID's bias depends on N
    assert real["fid"] * 5 < noise["fid"], (real["fid"], noise["fid"])
    assert real["fid_features"] == "classifier" and real["fid_classifier_accuracy"] > 0.9
    assert real["quality_seconds"] > 0 and real["quality_setup_seconds"] >= 0


def test_classifier_and_real_stats_are_cached_per_dataset(digits, cache, monkeypatch):
    fid_of_images(val_batches(digits), digits, Quality(), cache, CPU)
    folder = cache / "fid" / "digits-32px"
    info = json.loads((folder / "classifier.json").read_text())
    assert 0.9 < info["accuracy"] <= 1
    assert (folder / "classifier.pt").is_file() and (folder / "real-classifier.pt").is_file()

    # A warm cache trains nothing and reads no training image.
    def refuse(*a, **k):
        raise AssertionError("recomputed although cached")

    monkeypatch.setattr(fid.classifier, "_train_classifier", refuse)
    monkeypatch.setattr(fid.metric, "unaugmented_train", refuse)
    again = fid_of_images(val_batches(digits), digits, Quality(), cache, CPU)
    assert again["fid_classifier_accuracy"] == info["accuracy"]


def test_corrupt_or_missing_classifier_is_retrained_identically(tmp_path, tiny):
    ds = tiny()
    model, acc = feature_classifier(ds, tmp_path, CPU)
    assert not model.training
    folder = tmp_path / "fid" / "tiny-16px"
    first = torch.load(folder / "classifier.pt")
    (folder / "classifier.pt").write_bytes(b"truncated")
    model2, acc2 = feature_classifier(ds, tmp_path, CPU)
    second = torch.load(folder / "classifier.pt")
    assert acc2 == acc and json.loads((folder / "classifier.json").read_text())["accuracy"] == acc
    assert all(torch.allclose(first[k].float(), second[k].float(), atol=1e-6) for k in first)  # seeded training
    (folder / "classifier.json").unlink()
    feature_classifier(ds, tmp_path, CPU)
    assert (folder / "classifier.json").is_file()
    assert not list(folder.glob("*.tmp"))  # atomic writes leave no temp files behind


def test_different_datasets_get_separate_caches(tmp_path, tiny):
    feature_classifier(tiny("folder:/data/a b"), tmp_path, CPU)
    feature_classifier(tiny("folder:/data/a_b"), tmp_path, CPU)
    assert len(list((tmp_path / "fid").iterdir())) == 2


def test_warm_up_leaves_the_score_unchanged(digits, cache):
    """The probe image warm_up_fid sends through the extractor is dropped; the real statistics stay."""
    q, batches = Quality(), list(val_batches(digits))
    plain = prepare_fid(digits, q, cache, CPU)
    warm = warm_up_fid(digits, q, cache, CPU)
    assert warm.fake_count == 0 and int(warm.metric.fake_features_num_samples) == 0
    assert not warm.metric.fake_features_cov_sum.any()
    for name in ("real_features_sum", "real_features_cov_sum", "real_features_num_samples"):
        assert torch.equal(getattr(warm.metric, name), getattr(plain.metric, name))
    for x in batches:
        plain.add_fake(x)
        warm.add_fake(x)
    assert warm.compute() == plain.compute()


def test_real_statistics_ignore_training_augmentation(digits, cache):
    plain = load_datasets("digits", 32, cache, train_augment=False)
    unaug = fid.unaugmented_train(digits)
    for i in (0, 700):
        assert torch.equal(unaug[i][0], plain.train[i][0])
    assert not torch.equal(digits.train[0][0], digits.train[0][0])  # the trial's own split still augments


# --- inception ---------------------------------------------------------------------------------------------


def write_random_inception(path, monkeypatch):
    """torch-fidelity's InceptionV3 built without its weights (no download), saved as a state dict."""
    fe = pytest.importorskip("torch_fidelity.feature_extractor_inceptionv3")
    with monkeypatch.context() as m:
        m.setattr(fe, "load_state_dict_from_url", lambda *a, **k: {})
        m.setattr(fe.FeatureExtractorInceptionV3, "load_state_dict", lambda self, sd, *a, **k: None)
        net = fe.FeatureExtractorInceptionV3("inception-v3-compat", ["2048"])
    torch.save(net.state_dict(), path)
    return path


@pytest.fixture
def no_download(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("tried to download")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", refuse)
    monkeypatch.setattr(torch.hub, "download_url_to_file", refuse)
    fe = pytest.importorskip("torch_fidelity.feature_extractor_inceptionv3")
    monkeypatch.setattr(fe, "load_state_dict_from_url", refuse)


def test_inception_features_load_a_local_weights_file(tmp_path, tiny, monkeypatch, no_download):
    weights = write_random_inception(tmp_path / "inception.pth", monkeypatch)
    ds = tiny(n_train=12, size=32)
    q = Quality(fid_features="inception", fid_weights=weights, fid_samples=16)
    check_fid_weights(q)
    g = torch.Generator().manual_seed(1)
    out = fid_of_images([torch.rand(12, 1, 32, 32, generator=g) * 2 - 1], ds, q, tmp_path / "cache", CPU)
    assert out["fid_features"] == "inception" and "fid_classifier_accuracy" not in out
    assert out["fid_samples"] == 12 and math.isfinite(out["fid"])
    assert (tmp_path / "cache" / "fid" / "tiny-32px" / "real-inception.pt").is_file()


def test_inception_weights_are_found_in_the_torch_hub_cache(tmp_path, monkeypatch):
    """Whatever the host's own hub cache holds (a GPU host may have the weights, or no torch-fidelity): the hub dir
    is a temp dir (torch.hub.set_dir, undone by monkeypatch) and the package is a stub, so only the lookup is tested."""
    import sys
    import types

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.setattr(torch.hub, "_hub_dir", None)
    torch.hub.set_dir(str(tmp_path / "hub"))
    monkeypatch.setitem(sys.modules, "torch_fidelity", types.ModuleType("torch_fidelity"))
    q = Quality(fid_features="inception")
    with pytest.raises(WeightsError) as err:
        check_fid_weights(q)
    where = tmp_path / "hub" / "checkpoints" / INCEPTION_FILE
    assert str(where) in str(err.value) and "fid_weights" in str(err.value) and "--fid-weights" in str(err.value)
    where.parent.mkdir(parents=True)
    where.write_bytes(b"present")
    check_fid_weights(q)  # found: no error
    assert fid.inception_weights_path(q) == where


def test_missing_or_broken_inception_weights_fail_clearly(tmp_path, tiny, no_download):
    missing = tmp_path / "nowhere" / "inception.pth"
    q = Quality(fid_features="inception", fid_weights=missing)
    with pytest.raises(WeightsError) as err:
        check_fid_weights(q)
    assert str(missing) in str(err.value) and INCEPTION_FILE in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(WeightsError):
        fid_of_images([torch.zeros(2, 1, 16, 16)], tiny(), q, tmp_path, CPU)
    missing.parent.mkdir()
    missing.write_bytes(b"not a state dict")
    with pytest.raises(WeightsError, match="not torch-fidelity's Inception"):
        fid_of_images([torch.zeros(2, 1, 16, 16)], tiny(), q, tmp_path, CPU)
    check_fid_weights(Quality(fid_weights=missing))  # classifier features need no weights file
