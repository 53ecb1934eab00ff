"""A trial's noise-scale pass (tuner.train.noise) on a planted model whose per-sample gradients are known."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import TensorDataset

from tuner import Phase, Workload
from tuner.config import parse_config
from tuner.device import resolve_device
from tuner.train import run_trial
from tuner.train.noise import MULTI_PHASE, measure_noise_scale


def planted(n: int = 4096, d: int = 32, noise_scale: float = 60.0) -> tuple[Workload, TensorDataset, float]:
    """loss = mean over the batch of |w - x_i|^2 / 2 at w = 0: the per-sample gradient is -x_i, so the true gradient
    is minus the data's mean and Sigma its covariance; B_simple = tr(cov) / |mean|^2 of the data as drawn."""
    g = torch.Generator().manual_seed(0)
    mean = torch.full((d,), 1.0 / d ** 0.5)
    sd = (noise_scale / d) ** 0.5
    x = mean + sd * torch.randn(n, d, generator=g)
    data = TensorDataset(x)
    planted_answer = float(x.var(0).sum() / x.mean(0).pow(2).sum())

    class W(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.zeros(d))

    def loss(models, batch):
        return 0.5 * (models["w"].w - batch[0]).pow(2).sum(1).mean()

    return Workload(models={"w": W}, datasets=lambda: (data, data), loss=loss), data, planted_answer


def config(**params):
    return parse_config({"workload": "cnn", "dataset": "synthetic", "budget": {"samples": 160},
                         "params": {"batch_size": 16, **params}, "measure": {"ceiling_seconds": 1.0},
                         "quality": {"enabled": False}})


def test_the_pass_reads_a_planted_noise_scale_within_a_third():
    workload, data, answer = planted()
    models = {"w": workload.models["w"]()}
    found, why = measure_noise_scale(config(), resolve_device("cpu"), workload, data, models, seconds=60.0)
    assert why is None and found is not None
    assert found.pairs == 16
    assert 55 < answer < 65
    assert abs(found.value() / answer - 1) < 1 / 3
    assert not models["w"].w.any()  # no optimizer step: the weights stay as training left them


def test_a_workload_of_several_phases_gets_no_noise_scale_and_says_why():
    workload, data, _ = planted()
    two = Workload(models=workload.models, datasets=workload.datasets,
                   phases=[Phase("a", lambda m, b, s: workload.loss(m, b), ("w",)),
                           Phase("b", lambda m, b, s: workload.loss(m, b), ("w",))])
    found, why = measure_noise_scale(config(), resolve_device("cpu"), two, data, {"w": two.models["w"]()}, 60.0)
    assert found is None and why == MULTI_PHASE


def test_a_trial_records_its_effective_batch_and_noise_scale_or_why_not(tmp_path):
    cfg = parse_config({"workload": "cnn", "dataset": "synthetic", "workload_options": {"image_size": 16},
                        "budget": {"samples": 160}, "params": {"batch_size": 8, "accumulation_steps": 2},
                        "measure": {"warmup_steps": 1, "windows": 3, "ceiling_seconds": 0.5},
                        "quality": {"enabled": False}})
    res = run_trial(cfg, cache_dir=tmp_path)
    assert res.state == "complete"
    assert res.metrics["effective_batch"] == 16
    assert res.metrics["noise_seconds"] >= 0
    assert (res.metrics.get("noise_scale") or 0) > 0 or res.metrics.get("noise_scale_skipped")


def test_a_search_trial_without_the_pass_keeps_its_effective_batch_and_says_why(tmp_path):
    """Issue 55: a study's search trials other than the baseline leave the pass out (their own noise scale went
    unread); the effective batch, which their efficiency needs, stays."""
    from tuner.train.noise import NOT_READ

    cfg = parse_config({"workload": "cnn", "dataset": "synthetic", "workload_options": {"image_size": 16},
                        "budget": {"samples": 160}, "params": {"batch_size": 8, "accumulation_steps": 2},
                        "measure": {"warmup_steps": 1, "windows": 3, "ceiling_seconds": 0.5},
                        "quality": {"enabled": False}})
    res = run_trial(cfg, cache_dir=tmp_path, measure_noise=False)
    assert res.state == "complete" and res.metrics["effective_batch"] == 16
    assert "noise_scale" not in res.metrics and "noise_seconds" not in res.metrics
    assert res.metrics["noise_scale_skipped"] == NOT_READ


def test_a_dataset_smaller_than_the_pass_is_read_again_newly_shuffled():
    """200 samples hold 12 batches of 16, three pairs' worth: the pass goes on into further epochs (digits' training
    split holds 22 batches of 64: one epoch gave a trial 5 pairs, not 16)."""
    workload, data, _ = planted(n=200)
    found, why = measure_noise_scale(config(), resolve_device("cpu"), workload, data,
                                     {"w": workload.models["w"]()}, seconds=60.0)
    assert why is None and found is not None and found.pairs == 16


def ticking(step):
    t = [0.0]

    def clock():
        t[0] += step
        return t[0]

    return clock


def test_a_short_cap_still_reads_the_pairs_an_estimate_needs_within_noise_seconds():
    """A 15 s budget's cap is 0.75 s: a loaded machine read 2 of the 4 pairs there and the baseline recorded no
    noise scale. The pass reads MIN_PAIRS where they fit NOISE_SECONDS, and no further."""
    from tuner.measure.noise_scale import MIN_PAIRS
    from tuner.train.noise import NOISE_SECONDS

    workload, data, _ = planted()
    models = {"w": workload.models["w"]()}
    found, why = measure_noise_scale(config(), resolve_device("cpu"), workload, data, models, seconds=0.5,
                                     clock=ticking(0.3))  # a pair every 0.3 s: 1 pair within the cap
    assert why is None and found is not None and found.pairs == MIN_PAIRS
    found, why = measure_noise_scale(config(), resolve_device("cpu"), workload, data, models, seconds=0.5,
                                     clock=ticking(NOISE_SECONDS / 3))  # too slow even so: said, not guessed
    assert found is None and why == (f"a pair of 4 micro-batches took 1 s: the {MIN_PAIRS} pairs an estimate "
                                     f"needs do not fit {NOISE_SECONDS:g} s")


def test_the_same_models_read_under_different_loads_give_the_same_noise_scale():
    """The pass reads a planned number of pairs, not as many as fit its cap: three identical reference runs of the
    goodput benchmark read 358, 218 and 381 when a loaded machine fitted fewer pairs. Pairs taking 0.05 s or 0.06 s
    (20% slower, the noise between two rounds here) both plan 8 within a 0.75 s cap, so the estimate is the same."""
    workload, data, _ = planted()
    models = {"w": workload.models["w"]()}
    quiet, _ = measure_noise_scale(config(), resolve_device("cpu"), workload, data, models, seconds=0.75,
                                   clock=ticking(0.05))
    loaded, _ = measure_noise_scale(config(), resolve_device("cpu"), workload, data, models, seconds=0.75,
                                    clock=ticking(0.06))
    assert quiet is not None and loaded is not None
    assert quiet.pairs == loaded.pairs == 8
    assert quiet.value() == loaded.value()


def test_a_pace_too_slow_for_the_pairs_skips_the_pass_before_its_first_pair():
    """A new user's 2.4 s steps beside a busy process: the pass spent 33.6 s on its first pair against a 3 s cap (the
    cap is checked between pairs), and their 40 s baseline trial ran 119.5 s. From the training's pace the pass
    knows beforehand that the pairs an estimate needs cannot fit, and reads none."""
    from tuner.train.noise import GROUP, NOISE_SECONDS

    workload, data, _ = planted()
    calls = []
    counted = Workload(models=workload.models, datasets=workload.datasets,
                       loss=lambda m, b: calls.append(1) or workload.loss(m, b))
    models = {"w": counted.models["w"]()}
    slow = NOISE_SECONDS / GROUP  # a pair of 1 x NOISE_SECONDS: even half of it leaves no room for MIN_PAIRS
    found, why = measure_noise_scale(config(), resolve_device("cpu"), counted, data, models, seconds=60.0,
                                     step_seconds=slow)
    assert found is None and not calls
    assert why is not None and "do not fit" in why and f"{GROUP * slow:.2g} s" in why
    fast = NOISE_SECONDS / GROUP / 8  # 4 pairs of an eighth of the cap each: they fit, the pass runs
    found, why = measure_noise_scale(config(), resolve_device("cpu"), counted, data, models, seconds=60.0,
                                     step_seconds=fast)
    assert why is None and found is not None and calls

