"""The sampling context of a study (resources + device facts) and its domains, fixed for the study's life."""

from __future__ import annotations

from tuner.search import SearchOptions
from tuner.search._context import combine_facts, device_facts_for, trial_context
from tuner.space import study_space
from tuner.search._resources import ClusterInfo, resolve_resources
from tuner.space import load_space
from tuner.study import StudyMeta


def test_cpu_trials_are_offered_fp32_alone():
    res = resolve_resources(SearchOptions(), ClusterInfo(2, 0, 1, 2, 0))
    facts, notes = device_facts_for(res, ClusterInfo(2, 0, 1, 2, 0))
    assert facts["precisions"] == ["fp32"] and facts["tf32_available"] is False and notes == []
    assert trial_context(res, facts) == {"cpus": 2, "gpus": 0, **facts}


def test_gpu_nodes_offer_only_what_all_of_them_run_natively():
    h100 = {"device": "cuda (NVIDIA H100)", "precisions": ["fp32", "fp16", "bf16"], "tf32_available": True}
    v100 = {"device": "cuda (Tesla V100)", "precisions": ["fp32", "fp16"], "tf32_available": False}
    assert combine_facts([h100, h100]) == h100
    mixed = combine_facts([h100, v100])
    assert mixed["precisions"] == ["fp32", "fp16"] and mixed["tf32_available"] is False
    assert mixed["device"] == "cuda (NVIDIA H100) + cuda (Tesla V100)"


H100 = {"cpus": 16, "gpus": 1, "device": "cuda (H100)", "precisions": ["fp32", "fp16", "bf16"], "tf32_available": True}
LAPTOP = {"cpus": 2, "gpus": 0, "device": "cpu", "precisions": ["fp32"], "tf32_available": False}


def test_a_resumed_study_keeps_the_domains_it_started_with_and_says_so():
    """Optuna needs one distribution per param for a study's life: resuming on a 2-core CPU a study started on an
    H100 node samples from the H100 node's domains (stored in study.json), with a warning naming the difference."""
    space = load_space("amp_loader")
    first, ctx, notes = study_space(space, H100)
    kept = ["effective batch kept at the workload's own 64: batch_size is its micro-batch (16, 32, 64) and "
            "accumulation_steps = 64 / batch_size; add effective_batch: {type: int, low, high} to the space to "
            "change the effective batch"]  # said at the start of every study of the space (issue 40)
    assert first.params["num_workers"].high == 16 and ctx == H100 and notes == kept
    meta = StudyMeta(name="s", context=H100, domains=first.definition()["params"])
    again, ctx, notes = study_space(space, LAPTOP, meta)
    assert again.params == first.params and ctx == H100
    assert len(notes) == 2 and notes[0] == kept[0] and "num_workers: int [0, 16] (here: int [0, 2])" in notes[1]
    assert "precision: one of fp32, bf16, fp16 (here: one of fp32)" in notes[1]
    same, _, notes = study_space(space, H100, meta)
    assert same.params == first.params and notes == kept
    old, ctx, notes = study_space(space, LAPTOP, StudyMeta(name="old"))  # a study from before domains were kept
    assert old.params["num_workers"].high == 2 and ctx == LAPTOP and notes == kept
