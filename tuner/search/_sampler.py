"""The Optuna sampler a study builds for `--sampler` (tpe, nsga2, random), its seed and its trial count: one
construction, which `tuner search` (tuner.search._runner) and the benchmarks (tuner.search.toolkit) share."""

from __future__ import annotations

from typing import Any


def make_sampler(name: str, seed: int, trials: int, startup: int | None) -> Any:
    """The Optuna sampler `tuner search` uses (also what the efficiency benchmark asks)."""
    import optuna

    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "nsga2":
        population = max(4, min(50, trials // 3))
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=population)
    n_startup = startup if startup is not None else max(3, min(10, trials // 3))
    return optuna.samplers.TPESampler(seed=seed, constant_liar=True, n_startup_trials=n_startup, multivariate=True)
