"""`tuner search --address` on a real two-node Ray cluster started with `ray start` (tests/helpers/servers.py): trials
land on both nodes, the study's records and its FID cache are consistent, this checkout's tuner reaches the second
node through what the driver ships, and the user's workload file is imported from its original path where that
exists (here, one machine; Ray's copy of its folder on another node: tests/workload/test_loader.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.searchproc import finish, search
from tests.helpers.servers import start_ray_cluster
from tests.helpers.studies import load_trials

# A user's workload file: the built-in GAN at a tiny size, whose evaluate also says which copy of this module and
# of tuner the trial process imported (strings are kept as information in the record).
WORKLOAD = '''
import dataclasses

import tuner
from tuner.builtin.gan import make as gan


def make(dataset="synthetic", image_size=16, width=8):
    workload = gan(dataset=dataset, image_size=image_size, width=width)

    def evaluate(models, val_batches):
        return {**workload.evaluate(models, val_batches), "module_file": __file__, "tuner_file": tuner.__file__}

    return dataclasses.replace(workload, evaluate=evaluate)
'''

SPACE = """
description: a tiny GAN on two nodes
defaults: {workload: cnn, budget: {samples: 64}, trials: 4}
objectives: [{metric: throughput, direction: max}, {metric: quality}]
params:
  batch_size: {type: categorical, choices: [16, 32]}
  beta1: {type: float, low: 0.1, high: 0.9}
  num_workers: 0
  precision: fp32
  device: cpu
trial: {measure: {warmup_steps: 1, windows: 2}, quality: {fid_samples: 64}}
"""


@pytest.fixture
def cluster():
    c = start_ray_cluster()
    try:
        yield c
    finally:
        c.stop()


def test_a_study_joined_with_address_runs_on_both_nodes_with_one_fid_cache_and_the_shipped_module(cluster,
                                                                                                  tmp_path):
    user = tmp_path / "userproj"
    user.mkdir()
    module = user / "tinygan.py"
    module.write_text(WORKLOAD)
    space = tmp_path / "gan2.yaml"
    space.write_text(SPACE)
    reports = tmp_path / "reports"

    proc = search(["--space", str(space), "--workload", f"{module}:make", "--dataset", "synthetic",
                   "--address", cluster.address, "--concurrency", "2", "--cpus-per-trial", "1", "--confirm", "0",
                   "--format", "json"],
                  reports, cwd=user)  # from the user's folder: Ray puts the driver's folder on workers' paths
    out, err = finish(proc, timeout=420)
    assert proc.returncode == 0, err[-3000:]

    records = load_trials(reports / "gan2")
    assert len(records) == 4
    assert all(r["state"] == "complete" for r in records), [r["error"] for r in records]
    ran_on = {cluster.nodes.get(r["node"], r["node"]) for r in records}
    assert ran_on == {"node_head", "node_b"}, f"trials ran on {ran_on}, nodes {cluster.nodes}"

    # One FID feature classifier for the study, trained once and read by every trial on either node.
    assert len({r["fid_classifier_accuracy"] for r in records}) == 1
    assert {r["fid_features"] for r in records} == {"classifier"} and {r["fid_samples"] for r in records} == {64}
    assert len(list((reports / ".cache" / "fid").glob("*/classifier.pt"))) == 1
    assert all(isinstance(r["fid"], float) for r in records)

    # Every trial, on the second node too, imported the user's own file (its path exists on this one machine, so
    # what it finds beside itself by __file__ is there), and the copy of the driver's tuner Ray shipped.
    for r in records:
        assert Path(r["module_file"]) == module.resolve(), r["module_file"]
        assert "runtime_resources" in Path(r["tuner_file"]).parts, r["tuner_file"]
    assert any(cluster.nodes.get(r["node"]) == "node_b" for r in records)

    # `ray start` ran the trials at Ray's worker_niceness (15), below this process: the summary says so and how
    # to start the nodes at the user's own niceness.
    import os

    own = os.getpriority(os.PRIO_PROCESS, 0)
    said = [n for n in json.loads(out)["notes"] if "ran at niceness" in n]
    assert said == ([f"4 of 4 trials ran at niceness 15, above this process's {own} (Ray's worker_niceness on "
                     f"nodes `ray start` started): beside other work they yield the CPU to it and read slower than "
                     f"your own training would there; start each node's `ray start` with RAY_worker_niceness={own} "
                     f"in its environment"] if own < 15 else [])

    # The trials' CPU facts were asked of the nodes (both this machine here), not taken from the driver's flags.
    from tuner.search import cpu_facts

    context = json.loads((reports / "gan2" / "study.json").read_text())["context"]
    assert context["precisions"] == cpu_facts()["precisions"] and context["device"] == cpu_facts()["device"]
