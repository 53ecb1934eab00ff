"""Dataset specs, the cheap pre-flight check, and each format loaded from tiny files the tests write."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch

from tuner.data import Datasets, check_dataset, digits, load_datasets, parse_dataset_spec
from tuner.errors import DatasetError
from tuner.files import locked

from tests.helpers.datafiles import write_cifar, write_mnist, write_tree  # noqa: E402


def assert_images(ds: Datasets, channels: int, size: int) -> None:
    assert ds.channels == channels
    for split in (ds.train, ds.val):
        x, y = split[0]
        assert isinstance(y, int)
        assert x.dtype == torch.float32 and tuple(x.shape) == (channels, size, size)
        assert x.min() >= -1.0 and x.max() <= 1.0


# --- spec parsing -------------------------------------------------------------------------------------------


def test_parse_plain_and_dir_specs(tmp_path, monkeypatch):
    assert parse_dataset_spec("digits").kind == "digits" and parse_dataset_spec("digits").path is None
    assert parse_dataset_spec(" synthetic ").kind == "synthetic"
    monkeypatch.chdir(tmp_path)
    spec = parse_dataset_spec("mnist:data/m")
    assert spec.kind == "mnist" and spec.path == (tmp_path / "data/m").resolve() and spec.path.is_absolute()
    assert parse_dataset_spec("fashion-mnist:/x").kind == "fashion_mnist"
    assert parse_dataset_spec("cifar10:/x").path == Path("/x")
    assert parse_dataset_spec("folder:/x/y").name == "folder:/x/y"


@pytest.mark.parametrize("spec", ["imagenet", "mnist", "mnist:", "cifar10:  ", "digits:/tmp", ""])
def test_parse_refuses_bad_specs_naming_accepted_forms(spec):
    with pytest.raises(DatasetError) as err:
        parse_dataset_spec(spec)
    msg = str(err.value)
    assert "\n" not in msg
    assert "mnist:DIR" in msg or "takes no DIR" in msg


# --- check_dataset --------------------------------------------------------------------------------------------


def test_check_missing_dir_names_path(tmp_path):
    missing = tmp_path / "nope"
    for kind in ("mnist", "fashion_mnist", "cifar10", "folder"):
        with pytest.raises(DatasetError, match=str(missing)):
            check_dataset(f"{kind}:{missing}")


def test_check_mnist_names_expected_file_and_fix(tmp_path):
    (tmp_path / "MNIST" / "raw").mkdir(parents=True)
    with pytest.raises(DatasetError) as err:
        check_dataset(f"mnist:{tmp_path}")
    msg = str(err.value)
    assert str(tmp_path / "MNIST/raw/train-images-idx3-ubyte") in msg and "never downloads" in msg
    (tmp_path / "MNIST/raw/train-images-idx3-ubyte.gz").write_bytes(b"x")
    with pytest.raises(DatasetError, match="gunzip"):
        check_dataset(f"mnist:{tmp_path}")


def test_check_mnist_pointed_at_raw_folder_says_where_to_point(tmp_path):
    write_mnist(tmp_path)
    with pytest.raises(DatasetError, match="MNIST/raw"):
        check_dataset(f"mnist:{tmp_path / 'MNIST' / 'raw'}")
    check_dataset(f"mnist:{tmp_path}")  # the right folder passes
    with pytest.raises(DatasetError, match="FashionMNIST"):
        check_dataset(f"fashion_mnist:{tmp_path}")


def test_check_cifar_needs_meta(tmp_path):
    write_cifar(tmp_path)
    check_dataset(f"cifar10:{tmp_path}")
    (tmp_path / "cifar-10-batches-py" / "batches.meta").unlink()
    with pytest.raises(DatasetError, match="batches.meta"):
        check_dataset(f"cifar10:{tmp_path}")


def test_check_folder_empty_or_imageless(tmp_path):
    with pytest.raises(DatasetError, match="class folders"):
        check_dataset(f"folder:{tmp_path}")
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "notes.txt").write_text("x")
    with pytest.raises(DatasetError, match="no images"):
        check_dataset(f"folder:{tmp_path}")


# --- formats -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind,sub", [("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST")])
def test_mnist_formats_load_resized(tmp_path, kind, sub):
    write_mnist(tmp_path, sub)
    ds = load_datasets(f"{kind}:{tmp_path}", image_size=16, cache_dir=tmp_path / "cache")
    assert (len(ds.train), len(ds.val)) == (12, 5)  # train = train split, val = test split
    assert ds.num_classes == 10 and ds.name == f"{kind}:{tmp_path}" and not ds.synthetic
    assert_images(ds, 1, 16)
    assert [ds.train[i][1] for i in range(3)] == [0, 1, 2]


def test_corrupt_idx_is_dataset_error(tmp_path):
    write_mnist(tmp_path)
    (tmp_path / "MNIST/raw/t10k-images-idx3-ubyte").write_bytes(b"\x00\x00\x00\x00garbage")
    with pytest.raises(DatasetError, match="t10k-images-idx3-ubyte"):
        load_datasets(f"mnist:{tmp_path}", 16, tmp_path / "cache")


def test_cifar10_loads_tiny_pickles_without_md5(tmp_path):
    write_cifar(tmp_path)
    ds = load_datasets(f"cifar10:{tmp_path}", image_size=8, cache_dir=tmp_path / "cache")
    assert (len(ds.train), len(ds.val)) == (15, 4) and ds.num_classes == 10
    assert_images(ds, 3, 8)


def test_corrupt_cifar_pickle_is_dataset_error(tmp_path):
    write_cifar(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").write_bytes(b"not a pickle")
    with pytest.raises(DatasetError, match="cifar-10-batches-py"):
        load_datasets(f"cifar10:{tmp_path}", 8, tmp_path / "cache")


def test_folder_without_split_holds_out_fixed_fifth(tmp_path):
    write_tree(tmp_path, {"cat": 10, "dog": 10})
    a = load_datasets(f"folder:{tmp_path}", 12, tmp_path / "cache", seed=0)
    b = load_datasets(f"folder:{tmp_path}", 12, tmp_path / "cache", seed=7)
    assert (len(a.train), len(a.val)) == (16, 4) and a.num_classes == 2
    assert a.val.indices == b.val.indices  # same split whatever the seed
    assert not set(a.val.indices) & set(a.train.indices)
    assert_images(a, 3, 12)


def test_folder_with_train_val_and_grayscale(tmp_path):
    write_tree(tmp_path / "train", {"a": 3, "b": 3, "c": 2}, mode="L")
    write_tree(tmp_path / "val", {"a": 1, "c": 1}, mode="L")  # no "b": labels must still follow train
    ds = load_datasets(f"folder:{tmp_path}", 10, tmp_path / "cache")
    assert (len(ds.train), len(ds.val)) == (8, 2) and ds.num_classes == 3
    assert sorted(ds.val[i][1] for i in range(2)) == [0, 2]
    assert_images(ds, 1, 10)


def test_synthetic_is_flagged_seeded_and_in_range(tmp_path):
    a = load_datasets("synthetic", 8, tmp_path)
    assert a.synthetic and a.num_classes == 10 and len(a.train) > len(a.val) > 0
    assert_images(a, 1, 8)
    assert torch.equal(a.train[3][0], load_datasets("synthetic", 8, tmp_path).train[3][0])
    assert not torch.equal(a.train[3][0], load_datasets("synthetic", 8, tmp_path, seed=1).train[3][0])


# --- digits: written once into the cache, then read back ----------------------------------------------------


@pytest.fixture(scope="module")
def digits_cache(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    load_datasets("digits", 12, cache)
    return cache


def _tree_files(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*.png")}


def test_digits_cache_written_once_and_reused(digits_cache):
    final = digits_cache / "datasets" / "digits-12"
    before = _tree_files(final)
    assert len(before) == 1797
    ds = load_datasets("digits", 12, digits_cache, seed=5)
    assert _tree_files(final) == before  # not rewritten
    assert (len(ds.train), len(ds.val)) == (1797 - 359, 359)
    assert ds.name == "digits" and ds.num_classes == 10 and not ds.synthetic
    assert not [p for p in final.parent.iterdir() if p.name.startswith(".") and p.name != ".lock"]  # no temp dir
    assert_images(ds, 1, 12)


def test_digits_split_fixed_and_val_not_augmented(digits_cache):
    a = load_datasets("digits", 12, digits_cache, seed=0)
    b = load_datasets("digits", 12, digits_cache, seed=3)
    assert a.val.samples == b.val.samples  # type: ignore[attr-defined]
    assert torch.equal(a.val[0][0], a.val[0][0])
    torch.manual_seed(0)
    draws = [a.train[0][0] for _ in range(4)]
    assert any(not torch.equal(draws[0], d) for d in draws[1:])  # augmentation is on for train
    plain = load_datasets("digits", 12, digits_cache, train_augment=False)
    assert torch.equal(plain.train[0][0], plain.train[0][0])


def test_digits_reads_what_torchvision_imagefolder_and_transforms_read(digits_cache):
    """digits reads its PNG tree with PIL alone: the same samples, classes, labels and tensors as torchvision's
    ImageFolder with Grayscale, ToTensor, Normalize and (train) RandomAffine, the jitter's draws included."""
    tv = pytest.importorskip("torchvision")
    T = tv.transforms
    final = digits.cache_folder(digits_cache, 12)
    tail = [T.ToTensor(), T.Normalize((0.5,), (0.5,))]
    jitter = T.RandomAffine(degrees=8, translate=(0.06, 0.06), scale=(0.94, 1.06))
    want = {
        "train": tv.datasets.ImageFolder(str(final / "train"), transform=T.Compose([T.Grayscale(1), jitter, *tail])),
        "plain": tv.datasets.ImageFolder(str(final / "train"), transform=T.Compose([T.Grayscale(1), *tail])),
        "val": tv.datasets.ImageFolder(str(final / "val"), transform=T.Compose([T.Grayscale(1), *tail])),
    }
    ours, plain = load_datasets("digits", 12, digits_cache), load_datasets("digits", 12, digits_cache,
                                                                            train_augment=False)
    got = {"train": ours.train, "plain": plain.train, "val": ours.val}
    jittered = 0
    for split, theirs in want.items():
        mine = got[split]
        assert len(mine) == len(theirs) and mine.classes == theirs.classes  # type: ignore[attr-defined]
        assert mine.samples == theirs.samples and mine.targets == theirs.targets  # type: ignore[attr-defined]
        for i in range(0, len(theirs), 7):
            torch.manual_seed(i)  # the jitter draws from the global RNG: the same draws for both
            x, y = mine[i]
            torch.manual_seed(i)
            tx, ty = theirs[i]
            assert y == ty and x.dtype == tx.dtype and torch.equal(x, tx), (split, i)
            if split == "train":
                jittered += not torch.equal(x, plain.train[i][0])
    assert jittered > 100  # the planted comparison did exercise the jitter


def test_digits_concurrent_writers_leave_one_complete_cache(tmp_path):
    errors: list[BaseException] = []

    def load() -> None:
        try:
            load_datasets("digits", 8, tmp_path)
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=load) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(p.name for p in (tmp_path / "datasets").iterdir()) == [".lock", "digits-8"]  # no temp dir
    assert len(_tree_files(tmp_path / "datasets" / "digits-8")) == 1797


def test_digits_build_waits_for_the_cache_lock_and_reuses_what_the_holder_built(tmp_path):
    final = digits.cache_folder(tmp_path, 8)
    errors: list[BaseException] = []

    def load() -> None:
        try:
            load_datasets("digits", 8, tmp_path)
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    with locked(tmp_path / "datasets"):
        waiter = threading.Thread(target=load)
        waiter.start()
        time.sleep(0.5)
        assert waiter.is_alive() and [p.name for p in final.parent.iterdir()] == [".lock"]  # blocked, wrote nothing
        digits.write_cache(final, 8)  # another builder finishes while the waiter waits
        built = _tree_files(final)
    waiter.join()
    assert not errors
    assert _tree_files(final) == built  # the waiter saw the finished cache and did not rebuild it


def test_unwritable_cache_is_dataset_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DatasetError, match="cache"):
        load_datasets("digits", 8, blocker)
