"""Issue 40 item 5: the study spends trials only where quality is in question. A numerics knob whose every value
parity found within seed noise is decided by compute probes like a speed knob (one that drifts stays with the
trials), and an exact split of the kept effective batch (no batch statistics) is decided by the probes too; what
is left to the trials is what changes what is learned. Planted verdicts and readings: nothing timing-dependent."""

from __future__ import annotations

import json

import optuna
import pytest
import yaml

from tests.helpers.studies import load_trials
from tests.helpers.userworkloads import GOOD, write
from tuner.search._probe import configs_left, probed_knobs
from tuner.search._probe_batches import choice_of
from tuner.search._speed_probe import SPEED_GAIN, candidate_speeds, within_noise
from tuner.search._split_probe import choose_split
from tuner.search._searcher import SpaceFunction
from tuner.space import parse_space
from tuner.study import KnobParity, LoaderProbe, ProbeChoice, ProbePlan, StudyParity

SPACE = """
description: roles
defaults: {workload: cnn, dataset: synthetic, workload_options: {image_size: 16}, budget: {samples: 96}, trials: 3}
objectives: [{metric: throughput, direction: max}, {metric: quality}]
params:
  batch_size: {type: int, low: 16, high: 64, log: true}
  precision: {type: categorical, choices: [fp32, bf16, fp16], native: true}
  tf32: {type: bool, when: {precision: fp32, tf32_available: true}}
  channels_last: {type: bool}
  beta1: {type: float, low: 0.0, high: 0.9}
"""
H100 = {"cpus": 16, "gpus": 1, "device": "cuda (H100)", "precisions": ["fp32", "fp16", "bf16"], "tf32_available": True}


def space():
    return parse_space(yaml.safe_load(SPACE), source="roles.yaml", name="roles").resolve(H100)


def verdict(knobs, state):
    return KnobParity(knobs=knobs, state=state, text=f"{knobs}: {state}")


def parity(*verdicts, error=None):
    return StudyParity(steps=100, verdicts=list(verdicts), error=error)


def test_a_numerics_knob_joins_the_probes_only_when_every_value_is_within_seed_noise():
    both = parity(verdict({"precision": "bf16"}, "within seed noise"), verdict({"precision": "fp16"}, "within seed noise"),
                  verdict({"tf32": True}, "within seed noise"))
    assert within_noise(both) == {"precision": ["bf16", "fp16"], "tf32": [True]}
    # fp16 drifts: precision stays with the trials (their quality decides it), TF32 is still probed
    fp16_drifts = parity(verdict({"precision": "bf16"}, "within seed noise"), verdict({"precision": "fp16"}, "drifts"),
                         verdict({"tf32": True}, "within seed noise"))
    assert within_noise(fp16_drifts) == {"tf32": [True]}
    assert within_noise(parity(verdict({"precision": "bf16"}, "diverged"))) == {}
    assert within_noise(parity(error="the workload raised")) == {} and within_noise(None) == {}
    # compile is a numerics knob too, but its compile time does not fit a probe: never decided there
    assert within_noise(parity(verdict({"compile": "default"}, "within seed noise"))) == {}


def test_the_probes_read_the_passed_values_and_the_sampler_no_longer_draws_them():
    s = space()
    numerics = within_noise(parity(verdict({"precision": "bf16"}, "within seed noise"),
                                   verdict({"precision": "fp16"}, "within seed noise")))
    knobs = probed_knobs(s, s.reachable(H100), numerics)
    assert "precision" in knobs and "tf32" not in knobs and "beta1" not in knobs
    assert probed_knobs(s, s.reachable(H100)) == ["channels_last"]  # without parity's word: only the speed knob
    assert candidate_speeds(s, knobs, numerics) == [{}, {"channels_last": True}, {"precision": "bf16"},
                                                    {"precision": "fp16"}]
    plan = ProbePlan(knobs=knobs, choices=[ProbeChoice(batch_size=b, speed={"precision": "bf16"})
                                            for b in (16, 32, 64)])
    fn = SpaceFunction(s, H100, plan)
    trial = optuna.create_study().ask()
    assert fn(trial) == {"precision": "bf16"}
    assert "precision" not in trial.params and "beta1" in trial.params  # the trials search what is learned


def test_a_faster_passed_precision_is_chosen_and_tf32_is_dropped_under_it():
    speeds = [{}, {"precision": "bf16"}, {"precision": "fp16"}, {"tf32": True}]
    found = {"compute": 1000.0, "computes": [1000.0, 1900.0, 2000.0, 1300.0], "inputs": [None], "device": "cuda"}
    choice = choice_of(64, [{"num_workers": 0}], found, speeds)
    assert choice.speed == {"precision": "fp16"}  # the fastest; TF32 rounds fp32 matmuls only
    found["computes"] = [1000.0, 1000.0 * (1 + SPEED_GAIN / 2), 900.0, 1300.0]
    assert choice_of(64, [{"num_workers": 0}], found, speeds).speed == {"tf32": True}  # bf16 not fast enough


def rated(batch, rate):
    return ProbeChoice(batch_size=batch, compute_ceiling=rate, loader={"num_workers": 0},
                        probes=[LoaderProbe(loader={"num_workers": 0}, predicted=rate)])


def test_an_exact_split_goes_to_the_fastest_micro_batch_the_workloads_own_within_tolerance():
    choices = [rated(16, 1000.0), rated(32, 1500.0), rated(64, 1480.0)]
    assert choose_split(choices, 64, own=64) == {"batch_size": 64, "accumulation_steps": 1}  # within 5%: its own
    assert choose_split(choices, 64, own=16) == {"batch_size": 64, "accumulation_steps": 1}  # else the largest
    choices[2] = rated(64, 1200.0)
    assert choose_split(choices, 64, own=64) == {"batch_size": 32, "accumulation_steps": 2}
    assert choose_split([rated(16, None), rated(64, None)], 64, own=64) is None  # nothing read: the trials search it


def test_a_chosen_split_is_every_trials_and_a_space_left_with_nothing_learned_runs_only_distinct_configs():
    s = parse_space(yaml.safe_load(SPACE.replace("  beta1: {type: float, low: 0.0, high: 0.9}\n", "")),
                    source="roles.yaml", name="roles").resolve(H100)
    plan = ProbePlan(knobs=["channels_last", "precision", "tf32", "batch_size", "accumulation_steps"],
                      choices=[ProbeChoice(batch_size=16, speed={"precision": "bf16"}),
                               ProbeChoice(batch_size=32, speed={"channels_last": True})],
                      split={"batch_size": 32, "accumulation_steps": 2})
    assert plan.loader_for(16) == plan.loader_for(None) == {"batch_size": 32, "accumulation_steps": 2,
                                                             "channels_last": True}
    trial = optuna.create_study().ask()
    assert SpaceFunction(s, H100, plan)(trial) == plan.loader_for(None) and trial.params == {}
    baseline = s.baseline_point(H100)
    left = configs_left(s, H100, plan, baseline)
    assert left is not None and len(left) == 2  # the baseline's and the probes' pick: quality scored on those only
    assert {(c["batch_size"], c["accumulation_steps"]) for c in left} == {(64, 1), (32, 2)}


NO_BATCHNORM = """
description: split of a model without batch statistics
objectives: [{metric: throughput, direction: max}, {metric: quality}]
params:
  batch_size: {type: int, low: 16, high: 64, log: true}
  accumulation_steps: {type: int, low: 1, high: 4}
trial: {measure: {warmup_steps: 1, windows: 2, window_min_steps: 1}}
"""


@pytest.mark.ray
def test_a_study_of_a_model_without_batch_statistics_lets_the_probes_split_its_batch(ray_session, tmp_path,
                                                                                    space_search):
    """A real study (the user's MLP: no BatchNorm): the pre-flight finds no batch statistics, so the probes read
    every split of the effective batch 64 and keep one; the sampler has nothing left, so the study runs the
    baseline's config and the probes' pick (one trial where they agree), not --trials copies."""
    wl = write(tmp_path / "wl", GOOD)
    code, _, err, _, reports = space_search.run(NO_BATCHNORM, "--workload", f"{wl}:make", "--study", "s", "--trials",
                                                "4", "--budget-samples", "128", "--confirm", "0", name="split.yaml")
    assert code == 0, err
    plan = ProbePlan.model_validate_json((reports / "s" / "probes.json").read_text())
    assert [c.batch_size for c in plan.choices] == [16, 32, 64]  # every micro-batch of the split
    assert plan.split is not None and plan.split["batch_size"] * plan.split["accumulation_steps"] == 64
    assert f"split: {plan.split['batch_size']} x {plan.split['accumulation_steps']} for every trial" in err
    records = load_trials(reports / "s")
    assert 1 <= len(records) <= 2 and "the probes decided every knob this space searches" in err
    picked = [r for r in records if r["trial"] > 0] or records
    assert all({k: r["params"][k] for k in plan.split} == plan.split for r in picked)
    assert json.loads((reports / "s" / "study.json").read_text())["preflight"]["batch_statistics"] == []


CPU_BF16 = {"cpus": 2, "gpus": 0, "device": "cpu (x86_64)", "precisions": ["fp32", "bf16"], "tf32_available": False}


def test_compute_knobs_no_batch_size_could_read_go_back_to_the_trials(tmp_path):
    """A model whose every step is too slow for a probe reading (a ResNet-18 at 64x64 on 2 CPUs: 0.4 s a step
    against a 15 s budget's 0.75 s reading) gives the probes no compute ceiling anywhere: channels_last and a
    precision parity passed would stay at their defaults untried, so they go back to the sampler, and the loader
    (the cheapest: no faster one can be predicted) stays the probes'."""
    from tuner.search._probe import run_probes

    s = parse_space(yaml.safe_load(SPACE), source="roles.yaml", name="roles").resolve(CPU_BF16)
    numerics = within_noise(parity(verdict({"precision": "bf16"}, "within seed noise")))
    knobs = probed_knobs(s, s.reachable(CPU_BF16), numerics)
    assert {"channels_last", "precision"} <= set(knobs)
    base = {"workload": "cnn", "dataset": "synthetic", "budget": {"seconds": 15}}
    slow = {16: 2.0, 32: 4.0, 64: 8.0}  # the pre-flight's steps: none fits a 0.75 s reading, nothing is set up
    plan = run_probes(s, CPU_BF16, base, knobs, None, None, tmp_path, seconds=0.75, on_cpu=True, timed=slow,
                      numerics=numerics)
    assert [c.batch_size for c in plan.choices] == [16, 32, 64] and all(c.compute_ceiling is None for c in plan.choices)
    assert set(plan.unread) == {"channels_last", "precision"}
    assert not set(plan.unread) & set(plan.knobs)
    trial = optuna.create_study().ask()
    SpaceFunction(s, CPU_BF16, plan)(trial)
    assert {"channels_last", "precision"} <= set(trial.params)  # the trials search them


def test_channels_last_stays_at_its_default_where_the_models_have_no_4d_weights_though_nothing_was_read():
    """An MLP (a VAE on digits) on a busy machine: the probes set its batch sizes up, found no 4-D weight, and read
    no compute ceiling. precision goes back to the trials; channels_last does not (on such models NHWC changes
    nothing a trial could measure, and sampling it wasted trials of a VAE study beside a competing process)."""
    from tuner.search._speed_probe import NO_4D_WEIGHTS, given_back
    from tuner.study import ProbeChoice

    choices = [ProbeChoice(batch_size=b, compute_ceiling=None, notes=[NO_4D_WEIGHTS]) for b in (16, 32)]
    assert given_back(["channels_last", "precision", "num_workers"], choices) == ["precision"]
    images = [ProbeChoice(batch_size=16, compute_ceiling=None)]
    assert given_back(["channels_last", "precision"], images) == ["channels_last", "precision"]
