"""The noise-scale estimator on a planted gradient distribution whose answer is known, and the goodput arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.measure.noise_scale import NoiseScale
from tuner.analysis import efficiency, gain, sample_cost, scaled_lr


def planted_pairs(est: NoiseScale, pairs: int, *, b: int, group: int, grad: np.ndarray, sd: np.ndarray,
                  rng: np.random.Generator) -> None:
    """Per-sample gradients g_i = G + e_i, e_i ~ N(0, diag(sd^2)): `group` micro-batches of `b` samples per pair,
    their mean squared norm against the squared norm of their mean (as tuner.train.noise pairs them)."""
    for _ in range(pairs):
        per_sample = grad + rng.standard_normal((group, b, grad.size)) * sd
        micro = per_sample.mean(axis=1)
        small = float((micro ** 2).sum(axis=1).mean())
        big = float((micro.mean(axis=0) ** 2).sum())
        est.add(small, big, b, group * b)


@pytest.mark.parametrize("b, group", [(16, 4), (64, 2), (8, 8)])
def test_the_estimate_recovers_a_planted_noise_scale_within_10_percent(b: int, group: int) -> None:
    rng = np.random.default_rng(0)
    d = 200
    grad = rng.standard_normal(d)
    grad *= 1.0 / np.linalg.norm(grad)  # |G|^2 = 1
    sd = rng.uniform(0.5, 1.5, d)
    sd *= math.sqrt(300.0 / float((sd ** 2).sum()))  # tr(Sigma) = 300: B_simple = 300, above every batch used
    est = NoiseScale()
    planted_pairs(est, 400, b=b, group=group, grad=grad, sd=sd, rng=rng)
    found = est.estimate()
    assert found is not None
    assert found.trace == pytest.approx(300.0, rel=0.05)
    assert found.grad_sqr == pytest.approx(1.0, rel=0.10)
    assert est.value() == pytest.approx(300.0, rel=0.10)


def test_a_single_pair_would_be_far_off_but_the_averaged_parts_are_not() -> None:
    """Dividing each pair's parts and averaging the ratios (instead of averaging the parts first) is what the
    estimator must not do: single pairs read |G|^2 <= 0 or tiny, and their ratios scatter by orders of magnitude."""
    rng = np.random.default_rng(1)
    d = 50
    grad = np.full(d, 1.0 / math.sqrt(d))
    sd = np.full(d, math.sqrt(2000.0 / d))  # B_simple = 2000, far above B_big = 128
    ratios, est = [], NoiseScale()
    for _ in range(300):
        one = NoiseScale(min_pairs=1)
        planted_pairs(one, 1, b=32, group=4, grad=grad, sd=sd, rng=rng)
        e = one.estimate()
        assert e is not None
        ratios.append(e.trace / e.grad_sqr if e.grad_sqr > 0 else math.inf)
        est.add(*_parts_back(e, 32, 128), 32, 128)
    assert sum(r <= 0 or r > 1e4 or not math.isfinite(r) for r in ratios) > 30  # single pairs: often unusable
    assert est.value() == pytest.approx(2000.0, rel=0.35)


def _parts_back(e, b_small: float, b_big: float) -> tuple[float, float]:
    """(|G_small|^2, |G_big|^2) that give the estimate's parts back (so one pair's draw can be re-added)."""
    return e.grad_sqr + e.trace / b_small, e.grad_sqr + e.trace / b_big


def test_no_estimate_before_enough_pairs_nor_when_the_gradient_is_swamped() -> None:
    est = NoiseScale()
    est.add(2.0, 1.5, 8, 32)
    assert est.estimate() is None and est.value() is None
    swamped = NoiseScale(min_pairs=1)
    swamped.add(1.0, 0.2, 8, 32)  # |G|^2 estimate (32*0.2 - 8*1) / 24 < 0
    assert swamped.estimate() is not None and swamped.value() is None
    skipped = NoiseScale(min_pairs=1)
    skipped.add(float("inf"), 1.0, 8, 32)  # an fp16 overflow: not a pair
    assert skipped.pairs == 0
    with pytest.raises(ValueError):
        est.add(1.0, 1.0, 32, 8)


def test_efficiency_gain_sample_cost_and_lr_rules() -> None:
    # Pollux eq. 5: (phi + M0) / (phi + M)
    assert efficiency(64, 64, 900) == 1.0
    assert efficiency(256, 64, 900) == pytest.approx(964 / 1156)
    assert efficiency(256, 64, 0) == pytest.approx(0.25)  # no noise: a 4x batch makes a step worth one at M0
    assert efficiency(32, 64, 900) > 1.0
    assert sample_cost(256, 64, 900) == pytest.approx(1156 / 964)
    # AdaScale's gain: between 1 and M / M0
    assert gain(256, 64, 900) == pytest.approx(964 / 1156 * 4)
    assert 1.0 < gain(256, 64, 900) < 4.0
    assert gain(256, 64, 1e12) == pytest.approx(4.0)
    assert scaled_lr(1e-3, 256, 64, "linear") == pytest.approx(4e-3)
    assert scaled_lr(1e-3, 256, 64, "sqrt") == pytest.approx(2e-3)
    assert scaled_lr(1e-3, 256, 64, "adascale", 900) == pytest.approx(1e-3 * gain(256, 64, 900))
    with pytest.raises(ValueError):
        scaled_lr(1e-3, 256, 64, "adascale")
