"""channels_last, cudnn_benchmark and optimizer_impl by compute-ceiling probes: which settings are probed, the rule
that picks them per batch size from planted readings (nothing timing-dependent), and what the plan hands trials."""

from __future__ import annotations

import yaml

from tuner.knobs import glibc
from tuner.search._probe import probed_knobs
from tuner.search._probe_batches import choice_of
from tuner.search._speed_probe import SPEED_GAIN, candidate_speeds
from tuner.space import load_space, parse_space
from tuner.study import ProbePlan

SPACE = """
description: speed probe test
defaults: {workload: cnn, dataset: synthetic, workload_options: {image_size: 16}, budget: {samples: 96}, trials: 3}
objectives: [{metric: throughput, direction: max}]
params:
  batch_size: {type: int, low: 16, high: 256, log: true}
  num_workers: {type: int, low: 0, high: 2}
  channels_last: {type: bool}
  cudnn_benchmark: {type: bool, when: {gpus: ">0"}}
  optimizer_impl: {type: categorical, choices: [default, foreach, fused], when: {gpus: ">0"}}
"""
CPU = {"cpus": 2, "gpus": 0, "device": "cpu", "precisions": ["fp32"], "tf32_available": False}
GPU = {**CPU, "gpus": 1, "device": "cuda (fake)", "tf32_available": True}
LOADERS = [{"num_workers": 0}]


def space():
    return parse_space(yaml.safe_load(SPACE), source="speed.yaml", name="speed")


def test_the_compute_side_speed_knobs_are_probed_where_the_trials_can_use_them():
    s = space()
    assert probed_knobs(s, s.reachable(CPU)) == ["num_workers", "channels_last"]
    gpu = probed_knobs(s, s.reachable(GPU))
    assert gpu == ["num_workers", "channels_last", "cudnn_benchmark", "optimizer_impl"]
    assert candidate_speeds(s, gpu) == [{}, {"channels_last": True}, {"cudnn_benchmark": True},
                                        {"optimizer_impl": "foreach"}, {"optimizer_impl": "fused"}]
    assert candidate_speeds(s, probed_knobs(s, s.reachable(CPU))) == [{}, {"channels_last": True}]


def found(default, channels_last, image=True):
    return {"compute": default, "computes": [default, channels_last], "inputs": [1e6], "device": "cpu", "image": image}


def test_channels_last_is_chosen_per_batch_size_where_it_beats_the_defaults():
    speeds = [{}, {"channels_last": True}]
    small = choice_of(16, LOADERS, found(1000.0, 1000.0 * (1 + SPEED_GAIN / 2)), speeds)  # within the gain: noise
    large = choice_of(256, LOADERS, found(400.0, 520.0), speeds)  # 1.3x
    assert small.speed == {} and large.speed == {"channels_last": True}
    assert large.compute_ceiling == 520.0 and large.speedups() == ["channels_last True x1.30"]
    plan = ProbePlan(knobs=["num_workers", "channels_last"], choices=[small, large])
    assert plan.loader_for(16) == {"num_workers": 0}
    assert plan.loader_for(200) == {"num_workers": 0, "channels_last": True}  # what the trial near 256 trains with
    assert "batch 256: num_workers 0, channels_last True" in plan.describe()
    again = ProbePlan.model_validate_json(plan.model_dump_json())  # probes.json keeps the readings
    assert again.choices[1].speed_probes[1].compute_ceiling == 520.0 and again.loader_for(256) == plan.loader_for(256)


def test_a_slower_or_unmeasured_setting_is_never_chosen_and_a_model_without_convolutions_is_not_probed():
    speeds = [{}, {"channels_last": True}, {"optimizer_impl": "foreach"}, {"optimizer_impl": "fused"}]
    c = choice_of(64, LOADERS, {"compute": 500.0, "computes": [500.0, 300.0, None, 560.0], "inputs": [1e6],
                                "device": "cuda (fake)", "image": True}, speeds)
    assert c.speed == {"optimizer_impl": "fused"}
    flat = choice_of(64, LOADERS, found(500.0, None, image=False), speeds[:2])
    assert flat.speed == {} and flat.notes == ["channels_last: not probed, the models have no 4-D weights"]


def test_the_bundled_amp_loader_space_searches_the_speed_knobs_only_where_they_exist():
    from tuner.space._load import knob_notes

    s = load_space("amp_loader")
    assert {"channels_last", "cudnn_benchmark", "optimizer_impl"} <= set(s.searched)
    cpu = knob_notes(s, CPU)
    assert "cudnn_benchmark: dropped, no CUDA device" in cpu and "pin_memory: dropped, no CUDA device" in cpu
    assert any(line.startswith("channels_last: kept") for line in cpu)
    assert any(line.startswith("optimizer_impl: dropped") for line in cpu)
    assert any(line.startswith("threads: kept") for line in cpu)
    assert any(line.startswith("omp_wait_policy: kept") and "fresh process" in line for line in cpu)
    malloc = next(line for line in cpu if line.startswith("malloc:"))
    assert ("fresh process" in malloc and "MALLOC_MMAP_THRESHOLD_" in malloc) if glibc() else "no glibc" in malloc
    gpu = knob_notes(s, GPU)
    # the CPU's threading and allocator knobs are the CPU trials' (issue 58); every other knob is searched on a GPU
    assert {line.split(":")[0] for line in gpu if "dropped" in line} == {"threads", "omp_wait_policy", "malloc"}


def test_a_space_searching_cudnn_benchmark_without_a_gpu_condition_is_refused_in_one_line():
    import pytest

    from tuner.errors import ConfigError

    with pytest.raises(ConfigError, match=r'params.cudnn_benchmark.when: add gpus: ">0" \(cudnn_benchmark exists only'):
        parse_space(yaml.safe_load(SPACE.replace('cudnn_benchmark: {type: bool, when: {gpus: ">0"}}',
                                                 "cudnn_benchmark: {type: bool}")), source="s.yaml", name="s")


def test_spaces_show_says_which_knobs_this_cpu_machine_keeps_and_why(monkeypatch, capsys):
    from tuner.cli import main
    from tuner.search._resources import ClusterInfo, NodeInfo

    monkeypatch.setattr("tuner.search._resources.local_cluster", lambda: ClusterInfo.of([NodeInfo(2.0, 0.0)]))
    assert main(["spaces", "show", "amp_loader"]) == 0
    out = capsys.readouterr().out
    assert "#   cudnn_benchmark: dropped, no CUDA device" in out
    assert "#   channels_last: kept, decided by compute-ceiling probes" in out


def test_the_report_says_speed_knobs_by_probes_and_each_params_role(make_study):
    from rich.console import Console

    from tuner.report.view import study_footer, trial_panel
    from tuner.analysis import open_study
    from tuner.study import ProbeChoice

    root = make_study()
    s = open_study(root, "gan-demo")
    plan = ProbePlan(knobs=["num_workers", "channels_last"], seconds=9.0, choices=[
        ProbeChoice(batch_size=64, loader={"num_workers": 0}, speed={"channels_last": True})])
    s.folder.probes_path.write_text(plan.model_dump_json())
    s = open_study(root, "gan-demo")
    assert "speed knobs by probes (9 s, before the trials): batch 64: num_workers 0, channels_last True" \
        in study_footer(s)
    console = Console(width=200, record=True)
    for part in trial_panel(s, s.records[0]):
        console.print(part)
    text = console.export_text()
    assert "batch_size" in text and "changes what is learned" in text


def test_probe_batch_reads_the_compute_ceiling_once_per_speed_setting(tmp_path):
    """The shape of what a probe returns (its readings depend on the machine's load: not asserted)."""
    import json

    from tuner.search._probe import probe_batch

    cfg = {"workload": "cnn", "dataset": "synthetic", "workload_options": {"image_size": 16},
           "budget": {"samples": 64}, "params": {"batch_size": 16, "device": "cpu"}, "quality": {"enabled": False},
           "measure": {"window_min_steps": 1}}
    speeds = [{}, {"channels_last": True}, {"optimizer_impl": "foreach"}]
    found = probe_batch(json.dumps(cfg), [{"num_workers": 0}], 0.5, None, str(tmp_path / "cache"), speeds)
    assert len(found["computes"]) == 3 and found["compute"] == found["computes"][0] and found["image"] is True
    assert len(found["inputs"]) == 1


import pytest  # noqa: E402


@pytest.mark.ray
def test_a_study_probes_channels_last_and_its_trials_train_with_the_choice(ray_session, space_search):
    import json

    from tests.helpers.studies import load_trials

    code, out, err, _, reports = space_search.run(
        SPACE.replace("high: 256", "high: 32").replace("trials: 3", "trials: 2")
        + "trial: {measure: {warmup_steps: 1, windows: 2, window_min_steps: 1}}\n", "--study", "s", "--confirm", "0",
        name="speed.yaml")
    assert code == 0, err
    assert "probing speed knobs (num_workers, channels_last)" in err and "compute: " in err
    plan = ProbePlan.model_validate_json((reports / "s" / "probes.json").read_text())
    assert all([p.knobs for p in c.speed_probes] == [{}, {"channels_last": True}] for c in plan.choices)
    records = {r["trial"]: r for r in load_trials(reports / "s")}
    assert records[0]["params"].get("channels_last", False) is False  # the baseline: tuner's defaults
    if "channels_last" in plan.unread:  # a loaded machine: no batch size read a ceiling, so it went to the trials
        assert "not read at any batch size" in err and "the trials search" in err  # and the study says so
        return
    for n, r in records.items():
        if n > 0:
            want = plan.loader_for(r["params"]["batch_size"]).get("channels_last", False)
            assert r["params"].get("channels_last", False) == want
    assert json.dumps(plan.model_dump())  # kept as JSON


def test_the_compute_readings_at_one_batch_size_step_on_one_batch_taken_once(tmp_path, monkeypatch):
    """Every compute reading at a batch size steps on the same batch, taken once there (a fresh loader's first
    batch per reading was the same batch each time), and the readings still come back. An untimed warm-up comes
    first only where the defaults are read once: with speed settings to compare they are read again last and
    the better reading counts, so a cold first reading gives way by itself."""
    import json

    import tuner.train.ceilings as train_ceilings
    import tuner.train.probe as train_probe
    from tuner.search._probe import probe_batch

    taken, stepped = [], []
    real_first = train_ceilings.first_batch

    def counted(*args, **kwargs):
        taken.append(1)
        return real_first(*args, **kwargs)

    def planted(step, batch, *args, **kwargs):
        stepped.append(batch)
        return 1000.0

    monkeypatch.setattr(train_probe, "first_batch", counted)
    monkeypatch.setattr(train_ceilings, "first_batch", counted)
    monkeypatch.setattr(train_ceilings, "compute_ceiling", planted)
    cfg = {"workload": "cnn", "dataset": "synthetic", "workload_options": {"image_size": 16},
           "budget": {"samples": 64}, "params": {"batch_size": 16, "device": "cpu"}, "quality": {"enabled": False},
           "measure": {"window_min_steps": 1}}
    speeds = [{}, {"channels_last": True}]
    found = probe_batch(json.dumps(cfg), [{"num_workers": 0}], 0.5, None, str(tmp_path / "cache"), speeds)
    assert found["computes"] == [1000.0, 1000.0]
    # defaults, channels_last, defaults again; channels_last read equal to the defaults (within CLOSE): it and the
    # defaults once more (issue 52 item 5)
    assert len(taken) == 1 and len(stepped) == 5
    assert all(b is stepped[0] for b in stepped)
    taken.clear(), stepped.clear()
    found = probe_batch(json.dumps(cfg), [{"num_workers": 0}], 0.5, None, str(tmp_path / "cache"), [{}])
    assert found["computes"] == [1000.0]
    assert len(taken) == 1 and len(stepped) == 2  # the untimed warm-up, then the defaults' one reading


def test_a_speed_setting_read_close_to_the_defaults_is_read_again_interleaved_and_keeps_its_best(monkeypatch, tmp_path):
    """Issue 52 item 5: one reading per setting under load chose by a moment's load. A setting within 10% of the
    defaults is read again in reverse order with the defaults once more; probes.json keeps every reading."""
    import json

    from tuner.search._probe import probe_batch
    import tuner.train.probe as probe

    planted = {"channels_last": [1040.0, 1100.0], "threads": [700.0], "default": [1000.0, 980.0, 990.0]}
    order = []

    def fake(point, *a, **k):
        p = point.params
        key = "channels_last" if p.channels_last else "threads" if p.threads == 1 else "default"
        order.append(key)
        return {"compute": planted[key].pop(0)}

    monkeypatch.setattr(probe, "ceilings", fake)
    cfg = {"workload": "cnn", "dataset": "synthetic", "workload_options": {"image_size": 8}, "budget": {"samples": 64},
           "params": {"batch_size": 16, "device": "cpu"}, "quality": {"enabled": False}}
    speeds = [{}, {"channels_last": True}, {"threads": 1}]
    found = probe_batch(json.dumps(cfg), [], 0.5, None, str(tmp_path), speeds)
    assert order == ["default", "channels_last", "threads", "default", "channels_last", "default"]
    assert found["computes"] == [1000.0, 1100.0, 700.0]  # each its best reading; threads 1 (0.7x) not read again
    choice = choice_of(16, [], {**found, "inputs": []}, speeds)
    assert choice.speed == {"channels_last": True}  # 1.10x once read again: 1.04x on one reading was no gain
    assert choice.speed_probes[1].readings == [1040.0, 1100.0] and choice.speed_probes[1].spread == 0.0545
    assert "channels_last True x1.10 (best of 2, spread 5%)" in choice.speedups()
