"""The gradient noise scale: the effective batch beyond which a larger batch buys little progress per sample, so a
faster config with a larger batch is not called better when it needs more samples to learn as much.

Pure arithmetic (no torch): tuner.train.noise measures the squared gradient norms, this module averages them into
a noise scale; tuner.analysis.goodput turns it into efficiency, goodput and the lr rules (the study package is below
this one, and the views need them).

Noise scale (McCandlish et al. 2018, arXiv 1812.06162, appendix A.1): B_simple = tr(Sigma) / |G|^2, with G the
true gradient and Sigma the per-sample gradient covariance. A gradient averaged over B samples has
E|G_B|^2 = |G|^2 + tr(Sigma) / B, so two batch sizes B_small < B_big give unbiased estimates of both parts:

    |G|^2     ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
    tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)

Each single pair is very noisy (either part can come out negative), so the two parts are averaged over every pair
separately and divided only then (as AdaptDL's gradient_noise_scale.py does with its EMAs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

MIN_PAIRS = 4  # fewer (B_small, B_big) pairs than this: no estimate (one pair's parts are noise-dominated)


@dataclass(frozen=True)
class NoiseEstimate:
    """The averaged parts and their ratio. `noise_scale` None: the averaged |G|^2 is not positive (the gradient
    noise swamps the true gradient at these batch sizes: more pairs, or larger batches, are needed)."""

    grad_sqr: float  # |G|^2
    trace: float  # tr(Sigma)
    pairs: int

    @property
    def noise_scale(self) -> float | None:
        if self.grad_sqr <= 0 or self.trace <= 0 or not math.isfinite(self.grad_sqr / self.trace):
            return None
        return self.trace / self.grad_sqr


@dataclass
class NoiseScale:
    """Accumulates (|G_small|^2, |G_big|^2, B_small, B_big) pairs; `estimate()` averages each part over them."""

    min_pairs: int = MIN_PAIRS
    _sqr: list[float] = field(default_factory=list)
    _trace: list[float] = field(default_factory=list)

    def add(self, small_sqr: float, big_sqr: float, b_small: float, b_big: float) -> None:
        """One pair. `small_sqr` may be the mean of several |G_small|^2 of the same size (the micro-batches of one
        big batch): the formulas are linear in it. A non-finite pair (an fp16 overflow) is skipped."""
        if not b_big > b_small > 0:
            raise ValueError(f"need 0 < B_small < B_big, got {b_small} and {b_big}")
        if not (math.isfinite(small_sqr) and math.isfinite(big_sqr)):
            return
        self._sqr.append((b_big * big_sqr - b_small * small_sqr) / (b_big - b_small))
        self._trace.append((small_sqr - big_sqr) / (1.0 / b_small - 1.0 / b_big))

    @property
    def pairs(self) -> int:
        return len(self._sqr)

    def estimate(self, first: int | None = None) -> NoiseEstimate | None:
        """The averages (over the `first` pairs only, when given: what a shorter pass would have read), or None
        until `min_pairs` pairs were added."""
        n = self.pairs if first is None else min(first, self.pairs)
        if n < self.min_pairs:
            return None
        return NoiseEstimate(grad_sqr=sum(self._sqr[:n]) / n, trace=sum(self._trace[:n]) / n, pairs=n)

    def value(self) -> float | None:
        """B_simple, or None (too few pairs, or no positive estimate yet)."""
        est = self.estimate()
        return est.noise_scale if est is not None else None
