"""Per-trial resources on a cluster (Ray's node list faked): CPUs of GPU trials from the GPU nodes, shared GPUs."""

from __future__ import annotations

import pytest

from tuner.errors import DeviceError
from tuner.search import SearchOptions
from tuner.search._resources import ClusterInfo, NodeInfo, ray_cluster, resolve_resources


def fake_ray_nodes(monkeypatch, nodes):
    import ray

    listed = [{"Alive": alive, "NodeID": f"node-{i}", "Resources": res} for i, (res, alive) in enumerate(nodes)]
    monkeypatch.setattr(ray, "nodes", lambda: listed)


def test_gpu_trials_take_their_cpus_from_the_gpu_nodes(monkeypatch):
    """A 4-core head without GPUs and a 64-core worker with 8 GPUs: each GPU trial gets 8 CPUs (not the head's
    4 / 8 GPUs = 1), eight run at once, and --cpus-per-trial 8 is accepted."""
    fake_ray_nodes(monkeypatch, [({"CPU": 4.0, "memory": 1e10}, True), ({"CPU": 64.0, "GPU": 8.0}, True),
                                 ({"CPU": 128.0, "GPU": 8.0}, False)])  # a dead node counts for nothing
    cluster = ray_cluster()
    assert (cluster.cpus, cluster.gpus, cluster.nodes) == (68, 8, 2)
    res = resolve_resources(SearchOptions(), cluster)
    assert (res.cpus_per_trial, res.gpus_per_trial, res.concurrency, res.warnings) == (8, 1, 8, [])
    assert res.cpus_per_process == 8  # what a space's `cpus` is for these trials
    assert resolve_resources(SearchOptions(cpus_per_trial=8), cluster).cpus_per_trial == 8
    wide = resolve_resources(SearchOptions(cpus_per_trial=32), cluster)
    assert (wide.cpus_per_trial, wide.concurrency) == (32, 2)  # only two 32-CPU trials fit on the GPU node
    with pytest.raises(DeviceError, match=r"--cpus-per-trial 65 is more than the 64 CPUs of any node with 1 GPU"):
        resolve_resources(SearchOptions(cpus_per_trial=65), cluster)
    ddp = resolve_resources(SearchOptions(gpus_per_trial=4), cluster)
    assert (ddp.cpus_per_trial, ddp.concurrency, ddp.ddp_workers, ddp.cpus_per_process) == (32, 2, 4, 7)
    with pytest.raises(DeviceError, match=r"--gpus-per-trial 16 is more than the 8 GPU\(s\) of any node"):
        resolve_resources(SearchOptions(gpus_per_trial=16), cluster)


def test_gpu_nodes_of_different_shapes_give_every_trial_what_the_tightest_one_can():
    cluster = ClusterInfo.of([NodeInfo(8), NodeInfo(32, 4), NodeInfo(96, 8)])  # 8 and 12 CPUs per GPU
    res = resolve_resources(SearchOptions(), cluster)
    assert (res.cpus_per_trial, res.concurrency) == (8, 12)


@pytest.mark.parametrize("nodes", [[NodeInfo(16, 1)], [NodeInfo(4), NodeInfo(64, 8)], [NodeInfo(12, 2)]])
def test_fractional_gpus_are_shared_as_asked_and_every_share_fits(nodes):
    """--gpus-per-trial 0.5: two trials per GPU, each with half of that GPU's CPUs (so both fit on the node), and
    a warning that their timings distort each other."""
    cluster = ClusterInfo.of(nodes)
    res = resolve_resources(SearchOptions(gpus_per_trial=0.5), cluster)
    gpus = sum(n.gpus for n in nodes)
    assert res.concurrency == 2 * gpus
    for node in cluster.gpu_nodes():
        assert res.cpus_per_trial * 2 * node.gpus <= node.cpus  # every share of every GPU fits on its node
    assert res.cpus_per_trial >= 1 and res.gpus_per_trial == 0.5
    assert len(res.warnings) == 1 and "2 trials on one GPU" in res.warnings[0] and "distort" in res.warnings[0]
    assert res.gpus_per_process == 1  # a share of a GPU is still one device to the trial


def test_cpu_trials_may_ask_for_the_cpus_of_the_largest_node():
    cluster = ClusterInfo.of([NodeInfo(4), NodeInfo(64)])
    assert resolve_resources(SearchOptions(), cluster).cpus_per_trial == 4  # fits on every node
    big = resolve_resources(SearchOptions(cpus_per_trial=32), cluster)
    assert (big.cpus_per_trial, big.concurrency) == (32, 1)
    with pytest.raises(DeviceError, match="--cpus-per-trial 65 is more than the 64 CPUs of any node"):
        resolve_resources(SearchOptions(cpus_per_trial=65), cluster)


@pytest.mark.parametrize(("nodes", "options", "trials", "said"), [
    ([NodeInfo(2)], {"concurrency": 1000}, 12, "2 at a time (--concurrency 1000, but the CPUs hold 2), each on 1 CPUs"),
    ([NodeInfo(2)], {"concurrency": 1000}, 1, "1 at a time (--concurrency 1000, but the study has 1), each on 1 CPUs"),
    ([NodeInfo(16, 2)], {"concurrency": 8}, 12,
     "2 at a time (--concurrency 8, but the GPUs and CPUs hold 2), each on 1 GPU + 8 CPUs"),
    ([NodeInfo(8), NodeInfo(8)], {"concurrency": 5, "cpus_per_trial": 2}, 12, "5 at a time, each on 2 CPUs"),
    ([NodeInfo(2)], {}, 12, "1 at a time, each on 2 CPUs"),
])
def test_the_summary_says_how_many_trials_really_run_at_once(nodes, options, trials, said):
    """--concurrency 1000 on 2 CPUs: the summary said "1000 at a time"; Ray runs the two that fit."""
    assert resolve_resources(SearchOptions(**options), ClusterInfo.of(nodes)).describe(trials) == said
