"""Loader knobs by probes: which loaders and batch sizes are probed, the rule that picks a loader from planted
ceilings, the sampler that no longer searches loader knobs, the probe measurement itself, and a study with it."""

from __future__ import annotations

import dataclasses
import json

import optuna
import pytest
import yaml

from tests.helpers.fakes import ceilings_on_a_ticking_clock
from tests.helpers.studies import load_trials
from tests.helpers.spacesearch import SpaceSearch
from tuner.cli import main
from tuner.measure.ceiling import CeilingCache
from tuner.search._loader_probe import candidate_loaders, choose, predicted
from tuner.search._probe import configs_left, probe_batch, probed_knobs
from tuner.search._probe_batches import candidate_batches, choice_of
from tuner.search._searcher import SpaceFunction
from tuner.space import parse_space
from tuner.study import LoaderProbe, Preflight, ProbeChoice, ProbePlan

SPACE = """
description: probe test
defaults: {workload: cnn, dataset: synthetic, workload_options: {image_size: 16}, budget: {samples: 96}, trials: 3}
objectives: [{metric: throughput, direction: max}, {metric: quality}]
params:
  batch_size: {type: int, low: 16, high: 64, log: true}
  num_workers: {type: int, low: 0, high: 4}
  prefetch_factor: {type: int, low: 1, high: 8, when: {num_workers: ">0"}}
  persistent_workers: {type: bool, when: {num_workers: ">0"}}
  pin_memory: {type: bool, when: {gpus: ">0"}}
  precision: fp32
trial: {measure: {warmup_steps: 1, windows: 2, window_min_steps: 1}}
"""
CPU_CONTEXT = {"cpus": 2, "gpus": 0, "device": "cpu", "precisions": ["fp32"], "tf32_available": False}


def parse(text, name="probe"):
    return parse_space(yaml.safe_load(text), source=f"{name}.yaml", name=name)


def space():
    return parse(SPACE)


def test_loader_knobs_the_study_searches_are_probed_and_pinning_only_with_a_gpu():
    s = space()
    assert probed_knobs(s, s.reachable(CPU_CONTEXT)) == ["num_workers", "prefetch_factor", "persistent_workers"]
    assert "pin_memory" in probed_knobs(s, s.reachable({**CPU_CONTEXT, "gpus": 1}))


def test_batch_sizes_probed_are_the_ends_and_the_geometric_middle():
    assert candidate_batches(space(), CPU_CONTEXT) == [16, 32, 64]
    cat = parse(SPACE.replace("{type: int, low: 16, high: 64, log: true}",
                              "{type: categorical, choices: [8, 16, 32, 64, 128]}"))
    # the study keeps the workload's effective batch (64): its micro-batches are the choices dividing 64, so 128,
    # which no trial runs, is not probed (issue 40)
    assert candidate_batches(cat, CPU_CONTEXT) == [8, 32, 64]


def test_loaders_probed_are_worker_counts_by_powers_of_two_with_the_prefetch_extremes():
    loaders = candidate_loaders(space(), ["num_workers", "prefetch_factor", "persistent_workers"])
    assert loaders[0] == {"num_workers": 0}
    with_workers = loaders[1:]
    assert sorted({lo["num_workers"] for lo in with_workers}) == [1, 2, 4]
    assert all(lo["prefetch_factor"] in (1, 8) and lo["persistent_workers"] is True for lo in with_workers)
    assert len(loaders) == 1 + 3 * 2
    # trials on a CPU: each worker count with the smallest prefetch only (a deeper queue reads the same rate)
    on_cpu = candidate_loaders(space(), ["num_workers", "prefetch_factor", "persistent_workers"], on_cpu=True)
    assert on_cpu == [{"num_workers": 0}] + [{"num_workers": n, "prefetch_factor": 1, "persistent_workers": True}
                                             for n in (1, 2, 4)]


def test_prediction_overlaps_loading_with_workers_and_serializes_it_without():
    assert predicted(1000, 5000, workers=2) == 1000
    assert predicted(1000, 500, workers=2) == 500
    assert predicted(1000, 1000, workers=0) == pytest.approx(500)


def probes(nw0, nw2):
    return [LoaderProbe(loader={"num_workers": 0}, input_ceiling=nw0),
            LoaderProbe(loader={"num_workers": 2, "prefetch_factor": 2}, input_ceiling=nw2)]


def test_the_cheapest_loader_that_feeds_the_model_wins():
    # In-process loading 20x faster than the model: 5% lost to serial loading, within tolerance: no workers.
    assert choose(1000, probes(20000, 5000), on_cpu=False) == {"num_workers": 0}
    # Loading 5x faster than the model: serial loading loses 17%: workers.
    assert choose(1000, probes(5000, 5000), on_cpu=False) == {"num_workers": 2, "prefetch_factor": 2}
    # The loader cannot keep up either way: the faster one.
    assert choose(1000, probes(200, 600), on_cpu=False)["num_workers"] == 2


def test_on_a_cpu_workers_load_on_the_cores_the_model_computes_on_so_the_two_take_turns():
    # The efficiency grid's probes at batch 16 on 2 cores, and what the grid measured end to end: 1573 / 923 / 1055.
    compute, inputs = 2005, {0: 6107, 1: 2384, 2: 4144}
    expected = {0: 1509, 1: 1089, 2: 1351}
    for workers, inp in inputs.items():
        assert predicted(compute, inp, workers, on_cpu=True) == pytest.approx(expected[workers], abs=1)
    found = [LoaderProbe(loader={"num_workers": w}, input_ceiling=i) for w, i in inputs.items()]
    assert choose(compute, found, on_cpu=True) == {"num_workers": 0}
    assert choose(compute, found, on_cpu=False) == {"num_workers": 1}  # beside a GPU, one worker would overlap


def test_on_a_cpu_no_worker_is_taken_when_loading_in_process_keeps_the_model_compute_bound():
    # The default study's probes at batch 64: in-process loading predicted at 81% of the compute ceiling; two
    # workers would predict 8% more, but the study measured them 9% slower (they take the model's cores).
    found = [LoaderProbe(loader={"num_workers": 0}, input_ceiling=6680),
             LoaderProbe(loader={"num_workers": 2, "prefetch_factor": 1}, input_ceiling=10840)]
    assert predicted(1566, 6680, 0, on_cpu=True) / 1566 > 0.8
    assert choose(1566, found, on_cpu=True) == {"num_workers": 0}
    assert choose(1566, found, on_cpu=False)["num_workers"] == 2  # beside a GPU they would overlap


def test_unmeasured_probes_fall_back_to_the_cheapest_loader():
    assert choose(None, probes(None, None), on_cpu=True) == {"num_workers": 0}


def test_a_plan_gives_the_loader_of_the_nearest_probed_batch_size_on_a_log_scale():
    plan = ProbePlan(knobs=["num_workers"], choices=[
        ProbeChoice(batch_size=16, loader={"num_workers": 2}), ProbeChoice(batch_size=256, loader={"num_workers": 0})])
    assert plan.loader_for(20) == {"num_workers": 2} and plan.loader_for(200) == {"num_workers": 0}
    assert plan.loader_for(63) == {"num_workers": 2} and plan.loader_for(65) == {"num_workers": 0}  # sqrt(16*256)=64


def test_the_sampler_no_longer_draws_loader_knobs_and_the_baseline_keeps_its_own():
    s = space()
    knobs = probed_knobs(s, s.reachable(CPU_CONTEXT))
    plan = ProbePlan(knobs=knobs, choices=[ProbeChoice(batch_size=32, loader={"num_workers": 1, "prefetch_factor": 4,
                                                                                "persistent_workers": True})])
    fn = SpaceFunction(s, CPU_CONTEXT, plan)
    study = optuna.create_study(directions=["maximize"])
    study.enqueue_trial({"batch_size": 64, "num_workers": 0})  # the baseline: tuner's default knobs
    first = study.ask()
    # accumulation_steps follows from the split of the effective batch (64 here): a one-point draw (issue 40)
    assert fn(first) == {"num_workers": 0} and first.params == {"batch_size": 64, "accumulation_steps": 1}
    second = study.ask()
    constants = fn(second)
    assert constants == {"num_workers": 1, "prefetch_factor": 4, "persistent_workers": True}
    assert set(second.params) == {"batch_size", "accumulation_steps"}  # only what changes the model
    assert second.params["batch_size"] * second.params["accumulation_steps"] == 64
    assert SpaceFunction(s, CPU_CONTEXT)(study.ask()) is None  # no plan: loader knobs are sampled as before


LOADER_ONLY = SPACE.replace("batch_size: {type: int, low: 16, high: 64, log: true}", "batch_size: 32")


def test_when_the_probes_decide_every_searched_knob_only_the_distinct_configs_are_left():
    s = parse(LOADER_ONLY)
    knobs = probed_knobs(s, s.reachable(CPU_CONTEXT))
    baseline = s.baseline_point(CPU_CONTEXT)
    in_process = ProbePlan(knobs=knobs, choices=[ProbeChoice(batch_size=32, loader={"num_workers": 0})])
    assert len(configs_left(s, CPU_CONTEXT, in_process, baseline)) == 1  # the probes picked tuner's defaults
    workers = ProbePlan(knobs=knobs, choices=[ProbeChoice(batch_size=32, loader={"num_workers": 2,
                                                                                   "prefetch_factor": 1})])
    left = configs_left(s, CPU_CONTEXT, workers, baseline)
    assert [c["num_workers"] for c in left] == [0, 2]  # the baseline, then the probes' pick
    assert len(configs_left(s, CPU_CONTEXT, workers, None)) == 1  # a study without a baseline
    # a knob left to the sampler (the batch size): nothing is capped
    assert configs_left(space(), CPU_CONTEXT, workers, baseline) is None


def search_ok(tmp_path, capsys, space_text: str, study: str, *args: str):
    """`tuner search` of this space (written to a file) without confirmation; it must succeed: (reports, stderr)."""
    code, _, err, _, reports = SpaceSearch(tmp_path, capsys).run(space_text, "--study", study, "--confirm", "0",
                                                                 *args, name=f"{study}.yaml")
    assert code == 0, err
    return reports, err


@pytest.fixture
def probes_on_a_ticking_clock(monkeypatch):
    """The probes' ceilings on a ticking clock (as the trial tests' ceilings): what these tests check is what the
    probes measure and keep, not this machine's speed. The study's probes run in this process (a local CPU study),
    so the patch reaches them."""
    ceilings_on_a_ticking_clock(monkeypatch, "tuner.train.probe")


def test_probing_measures_the_compute_ceiling_and_each_loaders_input_ceiling_through_the_cache(
        tmp_path, probes_on_a_ticking_clock):
    cfg = {"workload": "cnn", "dataset": "synthetic", "workload_options": {"image_size": 16},
           "budget": {"samples": 64}, "params": {"batch_size": 16, "device": "cpu"}, "quality": {"enabled": False},
           "measure": {"window_min_steps": 1}}  # ceilings of 1-step windows: room for them at any load
    # the worker loader first: probing stops after the in-process loaders only when none with workers is left
    loaders = [{"num_workers": 1, "prefetch_factor": 2}, {"num_workers": 0}]
    cache = CeilingCache(tmp_path / "ceilings.json")
    found = probe_batch(json.dumps(cfg), loaders, 0.5, str(cache.path), str(tmp_path / "cache"))
    assert found["compute"] > 0 and len(found["inputs"]) == 2 and all(v > 0 for v in found["inputs"])
    stored = json.loads(cache.path.read_text())
    # the two input ceilings, which trials with these knobs reuse; not the compute ceiling of an untrained model
    assert sorted(v["kind"] for v in stored.values()) == ["input", "input"]
    again = probe_batch(json.dumps(cfg), loaders, 0.5, str(cache.path), str(tmp_path / "cache"))
    assert again["inputs"] == found["inputs"] and again["compute"] > 0


@pytest.mark.ray
def test_a_study_probes_first_and_its_trials_use_the_chosen_loaders(ray_session, tmp_path, capsys,
                                                                    probes_on_a_ticking_clock):
    reports, err = search_ok(tmp_path, capsys, SPACE, "p")
    assert "probing loader knobs (num_workers, prefetch_factor, persistent_workers)" in err
    plan = ProbePlan.model_validate_json((reports / "p" / "probes.json").read_text())
    assert [c.batch_size for c in plan.choices] == [16, 32, 64]
    # every loader probed (on the CPU each worker count with its smallest prefetch), or only the in-process one
    # where it already feeds the model
    assert all(len(c.probes) in (1, 4) and c.compute_ceiling for c in plan.choices)  # CPU: smallest prefetch
    records = {r["trial"]: r for r in load_trials(reports / "p")}
    assert records[0]["params"]["num_workers"] == 0  # the baseline: tuner's defaults
    for n, r in records.items():
        if n > 0:
            expected = plan.loader_for(r["params"]["batch_size"])
            assert {k: r["params"].get(k) for k in expected} == expected
            # the probed loader's input ceiling, from the cache; the compute ceiling is measured only for the
            # trials whose verdict is read (none with --confirm 0), and the record says so
            # (a trial at a batch size the probes measured; the others have none to share)
            probed = r["params"]["batch_size"] in [c.batch_size for c in plan.choices]
            assert bool(r.get("input_ceiling")) == probed
            assert r.get("compute_ceiling") is None and r["ceiling_skipped"].startswith("not measured")
    # resumed with more trials, the study keeps the plan it began with (no new probes)
    before = (reports / "p" / "probes.json").read_text()
    assert main(["search", "--study", "p", "--reports-dir", str(reports), "--resume", "--trials", "4",
                 "--confirm", "0"]) == 0
    assert "probing" not in capsys.readouterr().err and (reports / "p" / "probes.json").read_text() == before
    # a damaged probes.json is refused in one line, before anything runs or is rewritten
    probes, meta = reports / "p" / "probes.json", reports / "p" / "study.json"
    probes.write_text('{"knobs": 3}')
    meta_before = meta.read_text()
    assert main(["search", "--study", "p", "--reports-dir", str(reports), "--resume", "--trials", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "probes.json: not the loader probes tuner wrote" in err[0] and "delete it" in err[0]
    assert probes.read_text() == '{"knobs": 3}' and meta.read_text() == meta_before


def test_the_report_names_the_loaders_the_probes_chose(make_study):
    from tuner.report.view import study_footer
    from tuner.analysis import open_study

    root = make_study()
    s = open_study(root, "gan-demo")
    assert s.loader_plan() is None and not any("probes" in line for line in study_footer(s))
    plan = ProbePlan(knobs=["num_workers"], seconds=12.0, choices=[
        ProbeChoice(batch_size=16, loader={"num_workers": 2}), ProbeChoice(batch_size=256, loader={"num_workers": 0})])
    s.folder.probes_path.write_text(plan.model_dump_json())
    footer = study_footer(open_study(root, "gan-demo"))
    assert "loader knobs by probes (12 s, before the trials): batch 16: num_workers 2; batch 256: num_workers 0" \
        in footer


def test_probes_stop_after_in_process_loading_on_a_cpu_only_where_the_rule_would_keep_it():
    from tuner.search._loader_probe import _in_process_suffices

    zero, one, two = {"num_workers": 0}, {"num_workers": 1, "prefetch_factor": 2}, {"num_workers": 2}
    # 1/(1/1000 + 1/5000) = 833 >= 80% of 1000: `choose` keeps in-process loading whatever the workers measure
    assert _in_process_suffices(1000.0, [zero], [5000.0], [one, two])
    assert choose(1000.0, [LoaderProbe(loader=zero, input_ceiling=5000.0)], on_cpu=True) == zero
    assert not _in_process_suffices(1000.0, [zero], [3000.0], [one, two])  # 750 < 800: probe the workers
    assert not _in_process_suffices(1000.0, [zero], [5000.0], [{"num_workers": 0, "pin_memory": True}, one])
    assert not _in_process_suffices(None, [zero], [5000.0], [one])


def test_loaders_are_not_probed_once_none_left_can_change_the_choice():
    from tuner.search._loader_probe import loaders_decided

    zero, one, two = {"num_workers": 0}, {"num_workers": 1, "prefetch_factor": 2}, {"num_workers": 2}
    # no compute ceiling (a step too slow for the deadline): `choose` takes the cheapest loader, on any device
    assert loaders_decided(None, [zero], [3000.0], [one, two], on_cpu=False)
    assert choose(None, [LoaderProbe(loader=lo, input_ceiling=9e9) for lo in (zero, one, two)], on_cpu=False) == zero
    assert not loaders_decided(None, [one], [3000.0], [zero], on_cpu=True)  # a cheaper one is left: probe it
    # on a CPU, in-process loading at 80% of the compute ceiling keeps it (as before)
    assert loaders_decided(1000.0, [zero], [5000.0], [one, two], on_cpu=True)
    # on a CPU no loader is predicted above the compute ceiling: one worker at 95% of it cannot be beaten by 5%
    assert loaders_decided(1000.0, [zero, one], [3000.0, 30000.0], [two], on_cpu=True)
    probes = [LoaderProbe(loader=zero, input_ceiling=3000.0), LoaderProbe(loader=one, input_ceiling=30000.0),
              LoaderProbe(loader=two, input_ceiling=1e12)]
    assert choose(1000.0, probes, on_cpu=True) == one  # what the skipped probe would have left unchanged
    assert not loaders_decided(1000.0, [zero, one], [3000.0, 8000.0], [two], on_cpu=True)  # 889 < 950: probe on
    # on a GPU workers overlap compute: a costlier loader can still reach the compute ceiling, so probe on
    assert not loaders_decided(1000.0, [zero, one], [3000.0, 30000.0], [two], on_cpu=False)


def test_a_batch_size_without_a_compute_reading_is_not_probed_further(tmp_path, monkeypatch):
    """The defaults' compute reading gives nothing (planted): the speed knobs' readings and the loaders with
    workers are skipped, the in-process loader's input ceiling is still read (for the cache), and the choice is
    what it would have been: tuner's defaults and the cheapest loader."""
    import tuner.train.probe as train_probe

    read = []

    def planted(point, device, workload, train_set, models, seconds, cache, *, kinds, stable=None, **_):
        read.append((kinds[0], {k: v for k, v in point.params.model_dump().items()
                                if k in ("num_workers", "channels_last")}))
        return {"compute": None} if kinds == ("compute",) else {"input": 5000.0}

    monkeypatch.setattr(train_probe, "ceilings", planted)
    monkeypatch.setattr(train_probe, "measure_ceiling", lambda *a, **k: None)  # the untimed warm-up
    cfg = {"workload": "cnn", "dataset": "synthetic", "workload_options": {"image_size": 16},
           "budget": {"samples": 64}, "params": {"batch_size": 16, "device": "cpu"}, "quality": {"enabled": False}}
    loaders = [{"num_workers": 0}, {"num_workers": 1, "prefetch_factor": 2}, {"num_workers": 2, "prefetch_factor": 2}]
    speeds = [{}, {"channels_last": True}]
    found = probe_batch(json.dumps(cfg), loaders, 0.5, None, str(tmp_path / "cache"), speeds)
    assert [k for k, _ in read] == ["compute", "input"] and read[1][1]["num_workers"] == 0
    choice = choice_of(16, loaders, found, speeds)
    assert choice.loader == {"num_workers": 0} and choice.speed == {} and choice.compute_ceiling is None


def test_a_local_cpu_study_probes_in_its_own_process_with_a_trials_threads(tmp_path, monkeypatch):
    """The probes of a local study of CPU trials run in the study's process (a Ray task started a fresh process
    that paid the imports and the workload's set-up again), with the CPU threads a trial's Ray worker gets, and
    the process's threads come back afterwards; GPU trials and a cluster's trials keep the Ray task."""
    import os
    from types import SimpleNamespace

    import torch

    from tuner.search._options import SearchOptions, trial_base
    from tuner.search._plan import plan_search
    from tuner.search._probe import plan_loaders, probes_in_process
    from tuner.search._resources import Resources

    seen = []

    def fake_probe(cfg_json, loaders, seconds, cache_path, cache_dir, speeds=None, max_seconds=None):
        seen.append((os.getpid(), torch.get_num_threads()))
        return {"compute": 1000.0, "computes": [1000.0] * len(speeds or [{}]), "image": True,
                "inputs": [5000.0] * len(loaders), "device": "cpu (x86_64)"}

    monkeypatch.setattr("tuner.search._probe.probe_batch", fake_probe)
    path = tmp_path / "probe.yaml"
    path.write_text(SPACE)
    plan = plan_search(SearchOptions(space=str(path), study="p", reports_dir=tmp_path / "reports"))
    plan.folder.path.mkdir(parents=True)
    one_cpu = Resources(cpus_per_trial=1, gpus_per_trial=0, concurrency=1)
    context = {**CPU_CONTEXT, "cpus": 1}
    threads_before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        found = plan_loaders(plan, plan.space.resolve(context), context, trial_base(plan, 0, "cpu"), one_cpu, None)
        assert torch.get_num_threads() == 2  # restored
    finally:
        torch.set_num_threads(threads_before)
    assert found is not None and [c.batch_size for c in found.choices] == [16, 32, 64]
    assert seen == [(os.getpid(), 1)] * 3  # here, with the trial's one CPU thread
    assert probes_in_process(plan, one_cpu)
    assert not probes_in_process(plan, Resources(cpus_per_trial=4, gpus_per_trial=1, concurrency=1))
    assert not probes_in_process(SimpleNamespace(options=SimpleNamespace(address="10.0.0.1:6379")), one_cpu)


def test_a_batch_size_whose_model_was_not_read_says_why_in_the_probe_line(tmp_path, monkeypatch):
    """A model whose steps do not fit a probe reading (a second-long step; planted: no compute reading) is shown
    as not read, with why and what was kept, never as 'model takes - samples/s'."""
    from io import StringIO

    from rich.console import Console

    from tuner.search._options import SearchOptions, trial_base
    from tuner.search._plan import plan_search
    from tuner.search._probe import plan_loaders
    from tuner.search._resources import Resources

    def no_compute(cfg_json, loaders, seconds, cache_path, cache_dir, speeds=None, max_seconds=None):
        return {"compute": None, "computes": [None] * len(speeds or [{}]), "image": True,
                "inputs": [5000.0] + [None] * (len(loaders) - 1), "device": "cpu (x86_64)"}

    monkeypatch.setattr("tuner.search._probe.probe_batch", no_compute)
    path = tmp_path / "probe.yaml"
    path.write_text(SPACE)
    plan = plan_search(SearchOptions(space=str(path), study="p", reports_dir=tmp_path / "reports"))
    plan.folder.path.mkdir(parents=True)
    out = StringIO()
    context = {**CPU_CONTEXT, "cpus": 1}
    found = plan_loaders(plan, plan.space.resolve(context), context, trial_base(plan, 0, "cpu"),
                         Resources(cpus_per_trial=1, gpus_per_trial=0, concurrency=1), Console(file=out, width=300))
    text = out.getvalue()
    assert "samples/s" not in text and "model takes -" not in text
    assert text.count("model not read (its steps do not fit a probe reading of at most 3 s; the cheapest loader "
                      "kept); loader: num_workers 0") == 3
    assert all(c.loader == {"num_workers": 0} for c in found.choices)


def _plan_with_preflight(tmp_path, preflight):
    from tuner.search._options import SearchOptions
    from tuner.search._plan import plan_search

    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "probe.yaml"
    path.write_text(SPACE)
    plan = plan_search(SearchOptions(space=str(path), study="p", reports_dir=tmp_path / "reports"))
    plan.folder.path.mkdir(parents=True)
    return dataclasses.replace(plan, preflight=Preflight.model_validate(preflight))


def _recording_probe(monkeypatch) -> list[int]:
    """A fake probe_batch that reads every batch size as compute 1000 and inputs 5000 samples/s; returns the list
    of batch sizes it was asked for."""
    probed: list[int] = []

    def fake_probe(cfg_json, loaders, seconds, cache_path, cache_dir, speeds=None, max_seconds=None):
        probed.append(json.loads(cfg_json)["params"]["batch_size"])
        return {"compute": 1000.0, "computes": [1000.0] * len(speeds or [{}]), "image": True,
                "inputs": [5000.0] * len(loaders), "device": "cpu (x86_64)"}

    monkeypatch.setattr("tuner.search._probe.probe_batch", fake_probe)
    return probed


def test_a_batch_size_the_preflight_timed_too_slow_for_a_reading_is_not_set_up(tmp_path, monkeypatch):
    """Planted pre-flight: the baseline's batch 32 steps in 0.01 s, the space's largest micro-batch (64 x 4
    accumulation) in 8 s, 2 s a micro-batch: not even the longest reading a cut one is read again for (3 s here,
    the trials' budget being short; this space's windows of one step need 6 s) can hold it, so batch 64 is not probed at all, its line says not read and
    why, and it keeps what probing it concluded (the cheapest loader, tuner's defaults); batches 16 and 32 are
    probed as before."""
    from io import StringIO

    from rich.console import Console

    from tuner.search._options import trial_base
    from tuner.search._probe import plan_loaders
    from tuner.search._resources import Resources

    probed = _recording_probe(monkeypatch)
    plan = _plan_with_preflight(tmp_path, {
        "step_seconds": 0.01, "step_samples": 32, "batch_size": 32, "accumulation_steps": 1, "device": "cpu (x86_64)",
        "heaviest": {"batch_size": 64, "accumulation_steps": 4, "step_seconds": 8.0, "step_samples": 256}})
    out = StringIO()
    context = {**CPU_CONTEXT, "cpus": 1}
    found = plan_loaders(plan, plan.space.resolve(context), context, trial_base(plan, 0, "cpu"),
                         Resources(cpus_per_trial=1, gpus_per_trial=0, concurrency=1), Console(file=out, width=300))
    assert probed == [16, 32]
    last = found.choices[-1]
    assert last.batch_size == 64 and last.compute_ceiling is None and last.loader == {"num_workers": 0}
    assert last.speed == {} and last.preflight_step_s == pytest.approx(2.0)
    assert "batch 64: model not read (its steps do not fit a probe reading of at most 3 s: one took 2 s in the " \
           "pre-flight, so this batch size was not set up; the cheapest loader kept); loader: num_workers 0" \
           in out.getvalue()
    assert found.device == "cpu (x86_64)"
    stored = ProbePlan.model_validate_json(plan.folder.probes_path.read_text())
    assert stored.choices[-1].preflight_step_s == pytest.approx(2.0)


def test_a_batch_size_whose_preflight_step_fits_a_reading_is_still_read(tmp_path, monkeypatch):
    """Planted pre-flight whose steps fit (the largest micro-batch 0.05 s; and one a little too slow, 0.13 s,
    within the margin: the pre-flight's step is one noisy step, so the reading decides; this space's windows
    hold one step), or whose too slow step is the baseline's: every batch size is probed."""
    from tuner.search._options import trial_base
    from tuner.config import Measure
    from tuner.search._probe import plan_loaders
    from tuner.search._probe_batches import preflight_steps, too_slow_to_read
    from tuner.search._resources import Resources

    probed = _recording_probe(monkeypatch)
    context = {**CPU_CONTEXT, "cpus": 1}
    for heavy_step in (0.05, 0.13):
        probed.clear()
        plan = _plan_with_preflight(tmp_path / str(heavy_step), {
            "step_seconds": 0.01, "step_samples": 32, "batch_size": 32, "accumulation_steps": 1,
            "heaviest": {"batch_size": 64, "accumulation_steps": 1, "step_seconds": heavy_step, "step_samples": 64}})
        found = plan_loaders(plan, plan.space.resolve(context), context, trial_base(plan, 0, "cpu"),
                             Resources(cpus_per_trial=1, gpus_per_trial=0, concurrency=1), None)
        assert probed == [16, 32, 64]
        assert all(c.preflight_step_s is None and c.compute_ceiling == 1000.0 for c in found.choices)
    # the baseline's batch is probed even where the pre-flight timed its step too slow (a moment's load there)
    probed.clear()
    plan = _plan_with_preflight(tmp_path / "slow-baseline", {
        "step_seconds": 3.0, "step_samples": 32, "batch_size": 32, "accumulation_steps": 1,
        "heaviest": {"batch_size": 64, "accumulation_steps": 1, "step_seconds": 0.05, "step_samples": 64}})
    plan_loaders(plan, plan.space.resolve(context), context, trial_base(plan, 0, "cpu"),
                 Resources(cpus_per_trial=1, gpus_per_trial=0, concurrency=1), None)
    assert probed == [16, 32, 64]
    # nor is a heaviest that only accumulates more at the baseline's batch skipped
    assert preflight_steps(Preflight.model_validate({"batch_size": 32, "heaviest": {
        "batch_size": 32, "accumulation_steps": 4, "step_seconds": 9.0, "step_samples": 128}})) == {}
    # tuner's default windows of 3 steps: a warm-up and 2 windows, 7 steps of 0.13 s, miss 0.75 s but fit 1.5 x it
    assert not too_slow_to_read(0.13, 0.75, Measure()) and too_slow_to_read(0.17, 0.75, Measure())
    # where a cut reading may be read again for up to 3 s, a step of 0.6 s (7 steps: 4.2 s) is still set up, within
    # the margin, and one of 1 s (7 s) is not
    assert not too_slow_to_read(0.6, 0.75, Measure(), 3.0) and too_slow_to_read(1.0, 0.75, Measure(), 3.0)


def test_a_model_whose_step_takes_a_second_is_read_where_its_trials_train_for_minutes(tmp_path, monkeypatch):
    """A cut reading is read again for up to 5% of a trial's training where that is longer than 4 times the
    deadline (3 s): a 1 s step needs 7 s, so a 200 s budget (10 s) lets the probes read it where a 20 s one
    (still 3 s) leaves it to the trials; a samples budget counts its trial's seconds at the pre-flight's pace.
    The probes get that longest reading, and a batch size whose pre-flight step fits it is set up (this space's
    windows of one step: a 2 s step needs 6 s, which 1.5 times 3 s cannot hold)."""
    from tuner.config import Budget
    from tuner.search._options import trial_base
    from tuner.search._probe import longest_reading, plan_loaders
    from tuner.search._resources import Resources

    timed = {"step_seconds": 1.0, "step_samples": 32, "batch_size": 32, "accumulation_steps": 1}
    plan = _plan_with_preflight(tmp_path / "samples", timed)  # budget: 96 samples, 3 s at 1 s per 32
    assert longest_reading(plan, 0.75) == pytest.approx(3.0)
    long = dataclasses.replace(plan, budget=Budget(seconds=200))
    assert longest_reading(long, 0.75) == pytest.approx(10.0)
    assert longest_reading(dataclasses.replace(plan, budget=Budget(seconds=20)), 0.75) == pytest.approx(3.0)
    assert longest_reading(dataclasses.replace(plan, budget=Budget(samples=32 * 400)), 0.75) == pytest.approx(20.0)
    assert longest_reading(dataclasses.replace(long, preflight=Preflight()), 0.75) == pytest.approx(10.0)
    assert longest_reading(dataclasses.replace(plan, preflight=Preflight()), 0.75) == pytest.approx(3.0)

    asked: list[tuple[int, float]] = []

    def fake_probe(cfg_json, loaders, seconds, cache_path, cache_dir, speeds=None, max_seconds=None):
        asked.append((json.loads(cfg_json)["params"]["batch_size"], max_seconds))
        return {"compute": 30.0, "computes": [30.0] * len(speeds or [{}]), "image": True,
                "inputs": [5000.0] * len(loaders), "device": "cpu (x86_64)"}

    monkeypatch.setattr("tuner.search._probe.probe_batch", fake_probe)
    context = {**CPU_CONTEXT, "cpus": 1}
    heavy = {**timed, "heaviest": {"batch_size": 64, "accumulation_steps": 1, "step_seconds": 2.0, "step_samples": 64}}
    for budget, longest, probed in ((Budget(seconds=200), 10.0, [16, 32, 64]), (Budget(seconds=20), 3.0, [16, 32])):
        asked.clear()
        folder = tmp_path / f"heavy-{budget.seconds:.0f}"
        plan = dataclasses.replace(_plan_with_preflight(folder, heavy), budget=budget)
        plan_loaders(plan, plan.space.resolve(context), context, trial_base(plan, 0, "cpu"),
                     Resources(cpus_per_trial=1, gpus_per_trial=0, concurrency=1), None)
        assert [b for b, _ in asked] == probed  # batch 64's 2 s step fits 10 s (set up), not 3 s
        assert all(m == pytest.approx(longest) for _, m in asked)


def test_a_batch_size_not_set_up_keeps_the_choice_probing_it_concluded():
    """What the pre-flight skip gives equals what probing the batch size concluded when its model could not be
    read (the old path: no compute reading, the cheapest loader's input ceiling read, the rest not probed): the
    same loader, speed knobs and compute ceiling, on a CPU and on a GPU's candidates."""
    from tuner.search._probe_batches import not_set_up
    from tuner.search._speed_probe import candidate_speeds

    knobs = ["num_workers", "prefetch_factor", "persistent_workers", "pin_memory", "channels_last"]
    s = parse(SPACE.replace("  precision: fp32", "  precision: fp32\n  channels_last: {type: bool}"))
    speeds = candidate_speeds(s, knobs)
    assert speeds == [{}, {"channels_last": True}]
    for on_cpu in (True, False):
        loaders = candidate_loaders(s, knobs, on_cpu=on_cpu)
        probed = {"compute": None, "computes": [None, None], "image": True, "inputs": [4000.0],
                  "device": "cpu (x86_64)" if on_cpu else "cuda:0 (H100)"}
        old = choice_of(256, loaders[:1], probed, speeds)
        new = not_set_up(256, loaders, speeds, 0.4, True, probed["device"])
        assert (new.loader, new.speed, new.compute_ceiling) == (old.loader, old.speed, old.compute_ceiling)
        assert new.loader == loaders[0] and new.speed == {} and new.knobs() == old.knobs()


def test_the_preflight_keeps_the_step_of_each_batch_size_it_timed_for_the_probes(tmp_path, monkeypatch):
    """check_plan times the baseline's batch (64) and the space's largest micro-batch (128 x 2 accumulation, of
    the explicit effective batch 256) on the trials' device (planted step times: 1 ms per sample); the probes read
    one micro-batch's step at the largest from it."""
    import sys

    from tuner.device import resolve_device

    monkeypatch.setattr(sys.modules["tuner.train.preflight"], "_train_steps", lambda workload, models, train_set, cfg, device:
                        0.001 * cfg.params.batch_size * cfg.params.accumulation_steps)
    from tuner.search._check import check_plan
    from tuner.search._options import SearchOptions
    from tuner.search._plan import plan_search
    from tuner.search._probe_batches import preflight_steps

    path = tmp_path / "probe.yaml"
    path.write_text("effective_batch: {type: categorical, choices: [64, 256]}\n" + SPACE.replace(
        "high: 64, log: true}", "high: 128, log: true}\n  accumulation_steps: {type: int, low: 1, high: 2}").replace(
        "budget: {samples: 96}", "budget: {seconds: 30}"))
    plan = plan_search(SearchOptions(space=str(path), study="p", reports_dir=tmp_path / "reports"))
    plan = check_plan(plan, resolve_device("cpu"))
    steps = preflight_steps(plan.preflight)
    assert steps == pytest.approx({128: 0.128})  # the baseline's batch (64) is probed whatever its step
    assert plan.preflight.heaviest.accumulation_steps == 2 and plan.preflight.batch_size == 64


@pytest.mark.ray
def test_a_study_whose_knobs_the_probes_all_decide_runs_each_distinct_config_once(ray_session, tmp_path, capsys,
                                                                                  probes_on_a_ticking_clock):
    reports, err = search_ok(tmp_path, capsys, LOADER_ONLY, "l", "--trials", "4")
    records = load_trials(reports / "l")
    configs = [{k: r["params"].get(k) for k in ("num_workers", "prefetch_factor")} for r in records]
    assert 1 <= len(records) < 4 and len({json.dumps(c, sort_keys=True) for c in configs}) == len(records)
    assert "the probes decided every knob this space searches" in err and f"so {len(records)} trial" in err
    assert json.loads((reports / "l" / "study.json").read_text())["trials"] == len(records)
    # the study is whole: a resume has nothing left to run
    assert main(["search", "--study", "l", "--reports-dir", str(reports), "--resume", "--confirm", "0"]) == 0
    assert "nothing to run" in capsys.readouterr().err and len(load_trials(reports / "l")) == len(records)
