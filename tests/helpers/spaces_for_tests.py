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
