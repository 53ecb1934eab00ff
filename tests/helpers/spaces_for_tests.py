"""A tiny search space for search tests: two knobs on synthetic data, seconds per trial."""


def tiny_space(trials: int) -> str:
    return f"""
description: two knobs, quick
defaults: {{workload: cnn, dataset: synthetic, budget: {{samples: 128}}, trials: {trials}}}
objectives:
  cnn: [{{metric: throughput, direction: max}}, {{metric: loss, direction: min}}]
params:
  batch_size: {{type: categorical, choices: [16, 32]}}
  beta1: {{type: float, low: 0.1, high: 0.9}}
  num_workers: 0
  precision: fp32
"""


def fake_engine_space(budget: str = "{samples: 64}", trials: int = 6) -> str:
    """Batch size and beta1, for studies whose trials a fake engine answers (the `trial_engine` fixture)."""
    return f"""
description: batch size and beta1 on a fake engine
defaults: {{workload: cnn, dataset: synthetic, budget: {budget}, trials: {trials}}}
objectives: [{{metric: throughput, direction: max}}, {{metric: loss, direction: min}}]
params:
  batch_size: {{type: categorical, choices: [16, 32, 64]}}
  beta1: {{type: float, low: 0.1, high: 0.9}}
"""
