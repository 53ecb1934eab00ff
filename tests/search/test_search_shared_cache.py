"""FID across the nodes of a cluster: every trial scores with the extractor and real statistics the driver built,
whatever its node's cache holds, so FIDs from different nodes compare. Nodes are simulated with cache folders."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import TensorDataset

from tuner.config import Quality
from tuner.data import Datasets
from tuner.device import resolve_device
from tuner.measure.fid import fid_of_images
from tuner.search import SearchOptions
from tuner.search._rungs import SchedulerPlan
from tuner.search._setup import StudySetup, shared_fid_cache, study_meta
from tuner.search._shared_cache import SharedFiles
from tuner.space import parse_space
from tuner.search._protocol import TrialOrder, record_of
from tuner.search._trial import TrialSetup, run_one
from tuner.study import Objective, Preflight, TrialResult

CPU = resolve_device("cpu")


def copy_of_tiny(seed: int, n_train: int = 48) -> Datasets:
    """The study's dataset as one node has it: same name and sizes, but its own copy of the pixels (another
    download, another decoder, another augmentation cache)."""
    g = torch.Generator().manual_seed(seed)
    make = lambda n: TensorDataset(torch.rand(n, 1, 16, 16, generator=g) * 2 - 1, torch.arange(n) % 10)
    return Datasets(make(n_train), make(8), channels=1, num_classes=10, name="tiny", synthetic=False)


def generated() -> list[torch.Tensor]:
    return [torch.rand(32, 1, 16, 16, generator=torch.Generator().manual_seed(7)) * 2 - 1]


def score(ds: Datasets, cache: Path) -> float:
    return fid_of_images(generated(), ds, Quality(), cache, CPU)["fid"]


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """The driver's cache after the pre-flight check built the extractor, and what it ships to the trials."""
    cache = tmp_path_factory.mktemp("driver") / ".cache"
    fid_driver = score(copy_of_tiny(0), cache)
    return SimpleNamespace(cache=cache, fid=fid_driver, shared=SharedFiles.collect(cache))


def test_a_node_with_another_extractor_scores_with_the_drivers_once_installed(tmp_path, driver):
    node = tmp_path / "node" / ".cache"
    own = score(copy_of_tiny(1), node)  # the node built its own classifier and statistics: another extractor
    assert not math.isclose(own, driver.fid, rel_tol=1e-6), "the simulated node should disagree before the fix"
    assert driver.shared.files and all(not Path(rel).name.startswith(".") for rel in driver.shared.files)
    assert driver.shared.install(node) == node
    assert score(copy_of_tiny(1), node) == pytest.approx(driver.fid, rel=1e-9)
    assert driver.shared.changed(node) == []


def test_a_node_with_an_empty_cache_gets_the_drivers_files_and_an_identical_one_is_not_rewritten(
        tmp_path, driver, monkeypatch):
    empty = tmp_path / "fresh" / ".cache"
    driver.shared.install(empty)
    assert SharedFiles.collect(empty).manifest == driver.shared.manifest
    monkeypatch.setattr("tuner.search._shared_cache.atomic_write",
                        lambda *a, **k: pytest.fail("rewrote a file the node already had"))
    driver.shared.install(driver.cache)  # the driver's own machine: nothing to write
    driver.shared.install(empty)


def test_a_driver_path_a_node_cannot_create_falls_back_to_its_temp_dir(tmp_path, driver, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "node-tmp"))
    (tmp_path / "not-a-dir").write_text("a file where the driver has a folder")
    used = driver.shared.install(tmp_path / "not-a-dir" / ".cache")
    assert used.parent == tmp_path / "node-tmp" / "tuner-cache"
    assert SharedFiles.collect(used).manifest == driver.shared.manifest


SPACE = parse_space({
    "defaults": {"workload": "cnn", "dataset": "synthetic", "budget": {"samples": 64}},
    "objectives": [{"metric": "throughput", "direction": "max"}, {"metric": "fid", "direction": "min"}],
    "params": {"batch_size": {"type": "categorical", "choices": [16, 32]}},
}, source="test", name="test")
OBJECTIVES = [Objective(metric="throughput", direction="max"), Objective(metric="fid", direction="min")]


def node_engine(n_train: int):
    """A trial on a node whose copy of the dataset has n_train training images; scores `generated()`."""

    def engine(cfg, *, cache_dir, out_dir=None, wall_limit_s=None, setup=None, **_):
        value = score(copy_of_tiny(1, n_train), Path(cache_dir))
        return TrialResult(state="complete", throughput=100.0, fid=value, train_seconds=0.1)

    return engine


def trial_on_node(tmp_path, node_cache, shared, engine):
    setup = TrialSetup(space=SPACE, base={"workload": "cnn", "dataset": "synthetic", "budget": {"samples": 64},
                                          "gpus": 0, "params": {"device": "cpu"}},
                       objectives=OBJECTIVES, study_dir=str(tmp_path / "study"), cache_dir=str(node_cache),
                       shared_files=shared)
    return record_of(run_one(TrialOrder(trial=0, params={"batch_size": 16}).to_config(), setup, engine=engine))


def test_trials_on_other_nodes_report_the_drivers_fid(tmp_path, driver):
    """The same generated images score the same FID on the driver and on a node whose dataset copy differs."""
    node = tmp_path / "node" / ".cache"
    score(copy_of_tiny(1), node)  # the node's cache already holds its own extractor
    alone = trial_on_node(tmp_path, node, None, node_engine(48))
    assert alone.state == "complete" and not math.isclose(alone.get("fid"), driver.fid, rel_tol=1e-6)
    shipped = trial_on_node(tmp_path, node, driver.shared, node_engine(48))
    assert shipped.state == "complete" and shipped.get("fid") == pytest.approx(driver.fid, rel=1e-9)


def test_a_trial_whose_node_rebuilds_the_extractor_is_an_error_not_a_fid(tmp_path, driver):
    """A node whose dataset has other sizes cannot use the driver's extractor and builds its own: its FID would
    compare with nothing, so the trial is recorded as an error saying why."""
    rec = trial_on_node(tmp_path, tmp_path / "odd-node", driver.shared, node_engine(40))
    assert rec.state == "error" and "rebuilt the study's FID cache" in rec.error and "fid/tiny-16px/" in rec.error


def test_the_driver_ships_its_fid_cache_and_study_json_records_its_hashes(tmp_path, driver):
    plan = SimpleNamespace(quality_settings=lambda: Quality(), cache_dir=driver.cache)
    shared = shared_fid_cache(plan)
    assert shared is not None and shared.manifest == driver.shared.manifest
    assert shared_fid_cache(SimpleNamespace(quality_settings=lambda: Quality(enabled=False),
                                            cache_dir=driver.cache)) is None  # a speed-only study ships nothing
    assert shared_fid_cache(SimpleNamespace(quality_settings=lambda: Quality(), cache_dir=tmp_path / "none")) is None
    setup = StudySetup(space=SPACE, context={"cpus": 2, "gpus": 0}, shared=shared)
    plan = SimpleNamespace(study="s", space=SPACE, objectives=OBJECTIVES, workload=SimpleNamespace(text="cnn"),
                           workload_options={}, dataset="synthetic", budget=SPACE.defaults.budget, trials=3,
                           sampler="tpe", seed=0, storage="sqlite://", confirm_trials=2,
                           confirm_repeats=2, study_dir=tmp_path / "s", scheduler=SchedulerPlan(), kept_trials=None,
                           preflight=Preflight(), options=SearchOptions(), target=None, horizon=None)
    cluster = SimpleNamespace(cpus=2, gpus=0, nodes=1)
    resources = SimpleNamespace(cpus_per_trial=2, gpus_per_trial=0, concurrency=1)
    meta = study_meta(plan, cluster, resources, None, setup)
    assert meta.fid_cache == driver.shared.manifest
    assert any(rel.endswith(".pt") for rel in meta.fid_cache) and all(len(h) == 64 for h in meta.fid_cache.values())
    assert meta.context == {"cpus": 2, "gpus": 0} and meta.domains["batch_size"]["choices"] == [16, 32]
