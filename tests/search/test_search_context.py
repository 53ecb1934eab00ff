"""The sampling context of a study (resources + device facts) and its domains, fixed for the study's life."""

from __future__ import annotations

from tuner.search import SearchOptions
from tuner.search._context import combine_facts, cpu_precision_notes, device_facts_for, trial_context
from tuner.space import study_space
from tuner.search._resources import ClusterInfo, resolve_resources
from tuner.space import load_space
from tuner.study import StudyMeta
from tuner.device import cpu_has_bf16, cpu_native_precisions


def test_cpu_trials_are_offered_fp32_and_bf16_where_this_cpu_has_it():
    res = resolve_resources(SearchOptions(), ClusterInfo(2, 0, 1, 2, 0))
    facts, notes = device_facts_for(res, ClusterInfo(2, 0, 1, 2, 0))
    assert facts["precisions"] == (["fp32", "bf16"] if cpu_has_bf16() else ["fp32"])
    assert facts["tf32_available"] is False and notes == []
    assert trial_context(res, facts) == {"cpus": 2, "gpus": 0, **facts}


ZEN4 = {"avx2", "avx512f", "avx512_bf16"}
ZEN3 = {"avx2", "fma", "sha_ni"}


def test_the_default_study_offers_bf16_on_a_cpu_with_native_bf16_and_says_why_not_elsewhere():
    """The default space's native precision on two CPUs of the same kind: one with AVX512-BF16 searches fp32 and
    bf16 (never fp16), one without keeps fp32 and gets one line naming the missing CPU feature; a space that
    lists bf16 without `native` searches it anyway (forced), with no note."""
    space = load_space("amp_loader")
    for flags, offered in ((ZEN4, ["fp32", "bf16"]), (ZEN3, ["fp32"])):
        ctx = {"cpus": 2, "gpus": 0, "device": "cpu", "tf32_available": False,
               "precisions": cpu_native_precisions(flags, "x86_64")}
        assert study_space(space, ctx).space.params["precision"].choices == offered
        notes = cpu_precision_notes(space, ctx, flags, "x86_64")
        if "bf16" in offered:
            assert notes == []
        else:
            assert len(notes) == 1 and "bf16 is not offered" in notes[0]
            assert "no avx512_bf16 or amx_bf16 CPU feature" in notes[0]
    listed = space.params["precision"].model_copy(update={"native": False, "choices": ["fp32", "bf16"]})
    forced = space.model_copy(update={"params": {**space.params, "precision": listed}})
    ctx = {"cpus": 2, "gpus": 0, "device": "cpu", "tf32_available": False, "precisions": ["fp32"]}
    assert study_space(forced, ctx).space.params["precision"].choices == ["fp32", "bf16"]
    assert cpu_precision_notes(forced, ctx, ZEN3, "x86_64") == []
    gpu = {"cpus": 2, "gpus": 1, "device": "cuda", "tf32_available": False, "precisions": ["fp32", "fp16"]}
    assert cpu_precision_notes(space, gpu, ZEN3, "x86_64") == []  # a GPU's precisions are the GPU's


def test_gpu_nodes_offer_only_what_all_of_them_run_natively():
    h100 = {"device": "cuda (NVIDIA H100)", "precisions": ["fp32", "fp16", "bf16"], "tf32_available": True}
    v100 = {"device": "cuda (Tesla V100)", "precisions": ["fp32", "fp16"], "tf32_available": False}
    assert combine_facts([h100, h100]) == h100
    mixed = combine_facts([h100, v100])
    assert mixed["precisions"] == ["fp32", "fp16"] and mixed["tf32_available"] is False
    assert mixed["device"] == "cuda (NVIDIA H100) + cuda (Tesla V100)"


def test_a_clusters_cpu_nodes_offer_bf16_only_where_every_node_runs_it_natively():
    """Joined with --address from a laptop with native bf16, a study's CPU trials run on the nodes: their CPUs
    decide, and one node without native bf16 leaves fp32 alone; no answer at all offers fp32 alone too."""
    from tuner.search._context import FALLBACK_CPU_FACTS

    zen4 = {"device": "cpu (x86_64)", "precisions": cpu_native_precisions(ZEN4, "x86_64"), "tf32_available": False}
    zen3 = {"device": "cpu (x86_64)", "precisions": cpu_native_precisions(ZEN3, "x86_64"), "tf32_available": False}
    assert combine_facts([zen4, zen4], FALLBACK_CPU_FACTS)["precisions"] == ["fp32", "bf16"]
    assert combine_facts([zen4, zen3], FALLBACK_CPU_FACTS) == {**zen3, "precisions": ["fp32"]}
    assert combine_facts([], FALLBACK_CPU_FACTS)["precisions"] == ["fp32"]


H100 = {"cpus": 16, "gpus": 1, "device": "cuda (H100)", "precisions": ["fp32", "fp16", "bf16"], "tf32_available": True}
LAPTOP = {"cpus": 2, "gpus": 0, "device": "cpu", "precisions": ["fp32"], "tf32_available": False}


def test_a_resumed_study_keeps_the_domains_it_started_with_and_says_so():
    """Optuna needs one distribution per param for a study's life: resuming on a 2-core CPU a study started on an
    H100 node samples from the H100 node's domains (stored in study.json), with a warning naming the difference;
    the kept effective batch is a note, not a warning."""
    space = load_space("amp_loader")
    first = study_space(space, H100)
    kept = ["effective batch kept at the workload's own 64: batch_size is its micro-batch (16, 32, 64) and "
            "accumulation_steps = 64 / batch_size; add effective_batch: {type: int, low, high} to the space to "
            "change the effective batch"]  # said at the start of every study of the space (issue 40)
    assert first.space.params["num_workers"].high == 16 and first.context == H100
    assert (first.notes, first.warnings) == (kept, [])
    meta = StudyMeta(name="s", context=H100, domains=first.space.definition()["params"])
    again = study_space(space, LAPTOP, meta)
    assert again.space.params == first.space.params and again.context == H100 and again.notes == kept
    assert len(again.warnings) == 1 and "num_workers: int [0, 16] (here: int [0, 2])" in again.warnings[0]
    assert "precision: one of fp32, bf16, fp16 (here: one of fp32)" in again.warnings[0]
    same = study_space(space, H100, meta)
    assert same.space.params == first.space.params and (same.notes, same.warnings) == (kept, [])
    old = study_space(space, LAPTOP, StudyMeta(name="old"))  # a study from before domains were kept
    assert old.space.params["num_workers"].high == 2 and old.context == LAPTOP
    assert (old.notes, old.warnings) == (kept, [])


def test_a_study_prints_the_kept_effective_batch_as_a_note_and_a_changed_domain_as_a_warning():
    """The kept effective batch is information: it printed as `warning:` (notes and warnings were one list)."""
    import io

    from rich.console import Console

    from tuner.search._setup import StudySetup

    space = load_space("amp_loader")
    first = study_space(space, H100)
    again = study_space(space, LAPTOP, StudyMeta(name="s", context=H100, domains=first.space.definition()["params"]))
    console = Console(file=io.StringIO(), width=1000)
    StudySetup(space=again.space, context=again.context, notes=again.notes, warnings=again.warnings).tell(console)
    lines = console.file.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("note: effective batch kept at the workload's own 64")
    assert lines[1].startswith("warning: resuming with the domains this study started with")




def test_why_bf16_is_not_offered_on_this_cpu_is_a_note_not_a_warning(monkeypatch, request):
    """On a CPU without native bf16 (planted flags) a new study's line on bf16 is information: it printed as
    `warning:` beside the real warnings."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    import tuner.device
    from tuner.search._setup import prepare_study

    monkeypatch.setattr(tuner.device, "cpu_flags", lambda: frozenset(ZEN3))
    tuner.device.cpu_has_bf16.cache_clear()  # read again from the planted flags, and from the real ones after
    request.addfinalizer(tuner.device.cpu_has_bf16.cache_clear)
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    cluster = ClusterInfo(2, 0, 1, 2, 0)
    setup = prepare_study(SimpleNamespace(space=load_space("amp_loader"), meta=None,
                                          options=SimpleNamespace(address=None)), cluster,
                          resolve_resources(SearchOptions(), cluster), None)
    assert setup.warnings == []
    assert [line.split(":")[0] for line in setup.notes] == ["effective batch kept at the workload's own 64",
                                                             "bf16 is not offered on this CPU"]
    console = Console(file=io.StringIO(), width=1000)
    setup.tell(console)
    assert [line.split(":")[0] for line in console.file.getvalue().splitlines()] == ["note", "note"]
