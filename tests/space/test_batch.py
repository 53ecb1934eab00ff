"""The effective batch in a space (issue 40): kept fixed by default and split into micro-batch x accumulation,
changed only where a space says `effective_batch:`."""

from __future__ import annotations

import optuna
import pytest

from tuner.cli import main
from tuner.errors import ConfigError
from tuner.space import knob_notes, load_space, parse_space

BASE = {"workload": "cnn", "dataset": "synthetic", "budget": {"samples": 128}}
CPU = {"cpus": 2, "gpus": 0, "device": "cpu", "precisions": ["fp32"], "tf32_available": False}
HEAD = """
description: batch
defaults: {workload: cnn, dataset: synthetic, budget: {samples: 128}, trials: 3}
objectives: [{metric: throughput, direction: max}]
"""


def space_of(text: str):
    import yaml

    return parse_space(yaml.safe_load(HEAD + text), source="s.yaml", name="s")


def configs(space, n=200, seed=3, sampler=None):
    """`n` trials' configs as the study samples them (random draws, and TPE's after its start-up trials)."""
    from tuner.search._searcher import SpaceFunction

    study = optuna.create_study(directions=["maximize"],
                                sampler=sampler or optuna.samplers.RandomSampler(seed=seed))
    fn = SpaceFunction(space.resolve(CPU), CPU)  # what the study runs: its draws and the constants it returns
    out = []
    for i in range(n):
        trial = study.ask()
        constants = fn(trial) or {}
        params = {**trial.params, **constants}
        out.append(space.trial_config(params, BASE))
        study.tell(trial, [float(i % 7)])
    return out


@pytest.mark.parametrize("name", ["amp_loader", "amp_loader_compile", "optimizer"])
def test_the_bundled_spaces_keep_the_workloads_effective_batch_in_every_sampled_config(name):
    space = load_space(name)
    cfgs = configs(space) + configs(space, n=40, sampler=optuna.samplers.TPESampler(seed=1, n_startup_trials=10))
    assert {c.params.effective_batch for c in cfgs} == {64}  # tuner's default batch 64 x 1: the baseline's
    assert len({c.params.batch_size for c in cfgs}) > 1  # the split is searched
    assert space.baseline_point(CPU)["accumulation_steps"] == 1 and space.baseline_point(CPU)["batch_size"] == 64


def test_the_workloads_own_effective_batch_comes_from_the_spaces_fixed_values():
    space = space_of("params:\n  batch_size: {type: int, low: 8, high: 256, log: true}\n"
                     "  accumulation_steps: 3\n  num_workers: {type: int, low: 0, high: 1}\n")
    cfgs = configs(space, n=80)
    assert {c.params.effective_batch for c in cfgs} == {192}
    assert {c.params.batch_size for c in cfgs} <= {8, 12, 16, 24, 32, 48, 64, 96, 192}
    assert any("kept at the workload's own 192" in n for n in knob_notes(space, CPU))


def test_an_explicit_effective_batch_stays_within_its_bounds_and_is_split_exactly():
    space = space_of("effective_batch: {type: int, low: 96, high: 500, log: true}\n"
                     "params:\n  batch_size: {type: int, low: 16, high: 128, log: true}\n"
                     "  accumulation_steps: {type: int, low: 1, high: 8}\n")
    cfgs = configs(space, n=150)
    effective = {c.params.effective_batch for c in cfgs}
    assert min(effective) >= 96 and max(effective) <= 500 and len(effective) > 10
    assert all(16 <= c.params.batch_size <= 128 and 1 <= c.params.accumulation_steps <= 8 for c in cfgs)
    choices = space_of("effective_batch: {type: categorical, choices: [128, 256]}\n"
                       "params:\n  batch_size: {type: categorical, choices: [32, 64]}\n")
    assert {c.params.effective_batch for c in configs(choices, n=60)} == {128, 256}
    fixed = space_of("effective_batch: 256\nparams:\n  batch_size: {type: int, low: 32, high: 256, log: true}\n")
    assert {c.params.effective_batch for c in configs(fixed, n=40)} == {256}
    assert fixed.baseline_point(CPU) == {"batch_size": 64, "accumulation_steps": 4, "_micro_batch": 64}
    assert fixed.trial_config(fixed.baseline_point(CPU), BASE).params.effective_batch == 256


def test_a_fixed_accumulation_steps_sets_the_split_micro_batch_is_effective_over_accumulation():
    """A space that fixes accumulation_steps keeps it: the micro-batch is the effective batch / accumulation_steps
    (it drew any divisor, and accumulation_steps followed, overriding the value the space fixed)."""
    fixed = space_of("effective_batch: 256\nparams:\n  batch_size: {type: int, low: 8, high: 256, log: true}\n"
                     "  accumulation_steps: 4\n")
    assert {(c.params.batch_size, c.params.accumulation_steps) for c in configs(fixed, n=40)} == {(64, 4)}
    ranged = space_of("effective_batch: {type: int, low: 96, high: 400, log: true}\nparams:\n"
                      "  batch_size: {type: int, low: 8, high: 256, log: true}\n  accumulation_steps: 4\n")
    cfgs = configs(ranged, n=60)
    assert {c.params.accumulation_steps for c in cfgs} == {4}
    assert all(c.params.batch_size * 4 == c.params.effective_batch for c in cfgs)
    assert len({c.params.effective_batch for c in cfgs}) > 10
    kept = space_of("params:\n  batch_size: {type: int, low: 8, high: 256, log: true}\n  accumulation_steps: 3\n")
    assert {(c.params.batch_size, c.params.accumulation_steps) for c in configs(kept, n=20)} == {(64, 3)}


@pytest.mark.parametrize(("text", "says"), [
    ("effective_batch: {type: float, low: 64, high: 128}\nparams:\n  batch_size: {type: int, low: 8, high: 64}\n",
     "effective_batch: give a whole number"),
    ("effective_batch: 0\nparams:\n  batch_size: {type: int, low: 8, high: 64}\n",
     "effective_batch: 0 is not an effective batch"),
    ("effective_batch: 100\nparams:\n  batch_size: {type: categorical, choices: [32, 64]}\n",
     "effective_batch: 100 cannot be split"),
    ("effective_batch: {type: int, low: 64, high: 128}\nparams:\n  batch_size: 32\n  num_workers: {type: int, "
     "low: 0, high: 1}\n", "searching the effective batch needs batch_size searched"),
    ("params:\n  effective_batch: {type: int, low: 64, high: 128}\n  batch_size: {type: int, low: 8, high: 64}\n",
     "effective_batch goes at the top level"),
    ("params:\n  batch_size: {type: categorical, choices: [48, 96]}\n",
     "no micro-batch in its domain splits the workload's effective batch 64"),
    ("effective_batch: 100\nparams:\n  batch_size: {type: int, low: 8, high: 256, log: true}\n"
     "  accumulation_steps: 3\n", "effective_batch 100 is not a multiple of the fixed accumulation_steps 3"),
])
def test_a_bad_effective_batch_is_one_clear_line_and_exit_2(tmp_path, capsys, text, says):
    with pytest.raises(ConfigError, match=says):
        space_of(text)
    path = tmp_path / "bad.yaml"
    path.write_text(HEAD + text)
    assert main(["spaces", "show", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]


def test_accumulation_alone_keeps_its_old_meaning_and_says_so():
    space = space_of("params:\n  batch_size: 32\n  accumulation_steps: {type: int, low: 1, high: 4}\n")
    assert {c.params.effective_batch for c in configs(space, n=40)} == {32, 64, 96, 128}
    assert any("the effective batch changes with it" in n for n in knob_notes(space, CPU))


def test_the_loader_probes_cover_the_micro_batches_a_kept_effective_batch_runs():
    from tuner.search._probe_batches import candidate_batches

    assert candidate_batches(load_space("amp_loader"), CPU) == [16, 32, 64]  # not 256: no trial of 64 runs it
    wide = space_of("params:\n  batch_size: {type: int, low: 1, high: 64, log: true}\n")
    assert candidate_batches(wide, CPU) == [1, 8, 64]  # 1, 2, 4, ..., 64: the ends and the middle
