"""How many distinct configs a space holds (tuner.space.config_count): what decides whether a study redraws a
config a trial already ran (tuner.search._redraw) or, in a space with no more configs than trials, lets it run."""

from __future__ import annotations

import yaml

from tuner.space import config_count, parse_space

CONTEXT = {"cpus": 2, "gpus": 0, "device": "cpu", "precisions": ["fp32", "bf16"], "tf32_available": False}


def _space(params: str):
    text = f"""
description: count
defaults: {{workload: cnn, dataset: synthetic, budget: {{samples: 64}}, trials: 4}}
objectives: {{cnn: [{{metric: throughput, direction: max}}, {{metric: loss, direction: min}}]}}
params:
{params}
"""
    return parse_space(yaml.safe_load(text), source="count.yaml", name="count").resolve(CONTEXT)


def _drawn(space, n: int = 600) -> set[tuple]:
    """The distinct configs Optuna's random sampler draws from `space` in `n` trials: what a study can meet."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(n):
        trial = study.ask()
        seen.add(tuple(sorted((k, repr(v)) for k, v in space.sample(trial, CONTEXT).items())))
        study.tell(trial, 0.0)
    return seen


def test_a_conditional_space_counts_each_branch_once_as_a_sampler_meets_them():
    space = _space("""
  num_workers: {type: int, low: 0, high: 2}
  prefetch_factor: {type: int, low: 1, high: 2, when: {num_workers: ">0"}}
  precision: {type: categorical, choices: [fp32, bf16]}
""")
    # num_workers 0 draws no prefetch_factor; 1 and 2 draw one of two: (1 + 2 * 2) loaders, times 2 precisions
    assert config_count(space, CONTEXT) == (1 + 2 * 2) * 2 == len(_drawn(space))


def test_the_batch_split_counts_the_micro_batches_of_one_effective_batch():
    space = _space("  batch_size: {type: int, low: 16, high: 64}")
    assert config_count(space, CONTEXT) == len(_drawn(space)) == 3  # 16 x 4, 32 x 2, 64 x 1 of the own batch 64


def test_skipped_knobs_are_not_counted():
    space = _space("""
  num_workers: {type: int, low: 0, high: 2}
  precision: {type: categorical, choices: [fp32, bf16]}
""")
    assert config_count(space, CONTEXT, skip=("num_workers",)) == 2


def test_a_float_range_or_a_wide_space_is_many():
    assert config_count(_space("  beta1: {type: float, low: 0.1, high: 0.9}"), CONTEXT) is None
    assert config_count(_space("  beta1: {type: float, low: 0.1, high: 0.9, step: 0.2}"), CONTEXT) == 5
    assert config_count(_space("  threads: {type: int, low: 1, high: 64}\n  num_workers: {type: int, low: 0, high: 8}"),
                        CONTEXT, cap=100) is None
