"""Numerics parity: does a numerics knob (bf16 / fp16 autocast, TF32, torch.compile) change what a model learns?

A numerics knob does not change the algorithm, only its rounding. So the same steps from the same seed on the same
batches are trained twice, in fp32 (the reference) and under the knob, and the gap between the two loss
trajectories is judged against the gap between two fp32 runs that differ only in their seed: a knob whose gap stays
within the seed-to-seed gap costs nothing a user could notice; one whose gap leaves it for good drifts, from the
step where it left; one whose loss stops being finite diverged.

The statistic: the trajectories are cut into `windows` equal windows of steps and each window's mean loss is
compared (single steps are too noisy, a GAN's above all). The seed noise is the largest seed gap over the second
half of the windows, of every other seed run (at the start two seeds differ by their initialisation, which says
nothing about rounding). A
knob drifts from the first window after which every window's gap exceeds `tolerance` x that seed noise; its size is
the last window's gap relative to the reference's loss there. Pure arithmetic: _arms.py runs the arms.

Why these choices (measured on this project's CPU, benchmarks/parity.py): one other seed is a noisy yardstick: a
third seed judged as if it were a knob read 1.4-2.4x the second seed's *mean* gap (charlm, 50-200 steps), so the mean
and a tolerance of 1-2 flagged a change of seed as a drift; against the *largest* gap it read 0.05-1.4x in twelve
cases (CNN and charlm, 50-200 steps, either seed as the yardstick), so a tolerance of 2 leaves a margin. bf16 read
0.02-0.1x (CNN) and ~0x (charlm): far inside; the planted defects (a model that rounds or overflows under autocast)
far outside. One yardstick seed still let 1 of 12 changes of seed read as a drift (charlm, 200 steps, a later
run), so the arms (_arms.py) train two yardstick seeds and the noise is the larger (benchmarks/parity.py, row 16).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

State = Literal["within seed noise", "drifts", "diverged"]
WINDOWS = 8  # windows of steps compared: enough to see a drift start, few enough that each mean is smooth
TOLERANCE = 2.0  # a knob's gap may reach twice the seed-to-seed gap and still count as noise (see above)
YARDSTICK_SEEDS = 2  # fp32 runs with the next seeds, the noise their larger gap: one under-stated it (see above)


@dataclass(frozen=True)
class ParityVerdict:
    """What a numerics knob did to the loss trajectory, against fp32 and against a change of seed."""

    knob: str  # "precision=bf16", "compile=default", ...
    steps: int
    state: State
    gap: float | None  # the knob's gap to fp32 in the last window, relative to fp32's loss there
    seed_gap: float | None  # the seed-to-seed gap (the second half's largest), relative likewise
    from_step: int | None = None  # drifts: the first step of the window it drifted from; diverged: the step

    def text(self) -> str:
        """One line for the study's start, the report and the export's header."""
        if self.state == "diverged":
            return f"{self.knob}: diverged at step {self.from_step} of {self.steps} (fp32 trained on)"
        seed = f"seed-to-seed {_pct(self.seed_gap)}"
        if self.state == "drifts":
            return (f"{self.knob}: drifts by {_pct(self.gap)} of the loss from step {self.from_step} "
                    f"({seed}; {self.steps} steps against fp32)")
        return f"{self.knob}: within seed noise ({_pct(self.gap)} against fp32, {seed}; {self.steps} steps)"


def _pct(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 10:
        return f"{x:.3g}x"  # a gap of 131x the loss, not 1.3e+04%
    return f"{x * 100:.2g}%" if x < 1 else f"{x * 100:.0f}%"  # 240%, not 2.4e+02%


def _window_means(values: Sequence[float], windows: int) -> list[float]:
    n = len(values)
    edges = [round(i * n / windows) for i in range(windows + 1)]
    return [sum(values[a:b]) / (b - a) for a, b in zip(edges, edges[1:]) if b > a]


def judge(knob: str, reference: Sequence[float], under_knob: Sequence[float], other_seed: Sequence[float],
          *more_seeds: Sequence[float], windows: int = WINDOWS, tolerance: float = TOLERANCE) -> ParityVerdict:
    """The verdict on loss trajectories of equal length: fp32, the knob (same seed and batches), and fp32 with
    another seed (and `more_seeds`: the seed noise is the largest gap of any of them). A trajectory shorter than
    `windows` steps is compared step by step."""
    bad = next((i for i, v in enumerate(under_knob) if not math.isfinite(v)), None)
    if bad is not None and bad < len(reference) and all(math.isfinite(v) for v in reference[: bad + 1]):
        return ParityVerdict(knob, len(reference), "diverged", None, None, from_step=bad + 1)
    seeds = (other_seed, *more_seeds)
    steps = min(len(reference), len(under_knob), *(len(o) for o in seeds))
    if steps == 0:
        raise ValueError("parity needs at least one step of each run")
    w = min(windows, steps)
    ref, mine = (_window_means(t[:steps], w) for t in (reference, under_knob))
    scale = [max(abs(r), 1e-12) for r in ref]
    gaps = [abs(m - r) / s for m, r, s in zip(mine, ref, scale)]
    noise = 0.0
    for other in seeds:
        seed_gaps = [abs(o - r) / s for o, r, s in zip(_window_means(other[:steps], w), ref, scale)]
        noise = max(noise, *seed_gaps[len(seed_gaps) // 2:])
    start = None
    for i in range(len(gaps) - 1, -1, -1):  # the earliest window from which every later gap is beyond the noise
        if gaps[i] > tolerance * noise:
            start = i
        else:
            break
    if start is None:
        return ParityVerdict(knob, steps, "within seed noise", gaps[-1], noise)
    first_step = round(start * steps / w) + 1
    return ParityVerdict(knob, steps, "drifts", gaps[-1], noise, from_step=first_step)
