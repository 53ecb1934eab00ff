"""A target set from the baseline (`--target baseline`): the baseline (the workload's own settings) trains a
reference budget, a third of the trials' (reference_budget), with the same evaluations, a few seeds of it, and the
target is the median of the qualities they settle at (derive_target for one seed, derive_seeds_target for the
study's); and a study's default K between evaluations (default_eval_every).
"""

from __future__ import annotations

import math

from tuner.config import Budget, ReferenceSeed, Target
from tuner.target._curve import CurvePoint, first_reached

SMOOTH_EVALS = 3  # a derived target is the mean of the baseline's last this many evaluations
CAP_FACTOR = 3.0  # a trial not at the target by this many times the baseline's time to target ends `not reached`
EVAL_SHARE = 0.2  # a study's default K keeps each evaluation within this share of training's time ...
EVALS_PER_REFERENCE = 20  # ... and is no finer than this many evaluations over the reference run
TARGET_SEEDS = 3  # seeds of the baseline's reference run a derived target is read from by default (--target-seeds)
FLAT_SHARE = 0.01  # a seed whose settled quality is within this share of its first evaluation's did not learn


def default_eval_every(effective_batch: int, budget: Budget, samples_per_s: float | None,
                       score_s: float | None) -> int:
    """The samples between a target study's evaluations (K) when none is given, from the pre-flight's measured
    pace (the baseline's samples/s) and scoring time, in whole optimizer steps of the baseline: the finest K whose
    evaluation costs at most EVAL_SHARE of the training between two (K >= score_s x samples/s / EVAL_SHARE), and no
    finer than EVALS_PER_REFERENCE evaluations over the reference run (reference_budget). benchmarks/ttt_choices.py
    measured the trade: a fixed 25 steps cost 12-13% on the built-in CNN and GAN, 0.5% on charlm, and left 2-6
    evaluations before the target in short studies. Without a measured pace: EVAL_EVERY_STEPS steps."""
    import math

    from tuner.config import EVAL_EVERY_STEPS

    if not samples_per_s or samples_per_s <= 0 or score_s is None:
        return effective_batch * EVAL_EVERY_STEPS
    ref = reference_budget(budget)
    reference = ref.samples if ref.samples is not None else (ref.seconds or 0.0) * samples_per_s
    k = max(score_s * samples_per_s / EVAL_SHARE, reference / EVALS_PER_REFERENCE)
    return effective_batch * max(1, math.ceil(k / effective_batch - 1e-9))


def reference_budget(budget: Budget) -> Budget:
    """What the baseline trains to derive a target: 1/CAP_FACTOR of the trials' budget B. Trained the whole of B,
    the baseline set a target it met only at the end of B (trial 0, the same settings, missed it on a busy machine:
    0 of 5 trials of a CNN study at B = 8 s reached it), and its cap (3x that time, about 3B) never applied. At
    B/3 the cap is about B and a trial's budget gives the baseline's settings 3x the time they needed."""
    if budget.seconds is not None:
        return Budget(seconds=budget.seconds / CAP_FACTOR)
    assert budget.samples is not None
    return Budget(samples=max(1, round(budget.samples / CAP_FACTOR)))


def derive_target(curve: list[CurvePoint], pending: Target) -> Target | None:
    """The target a baseline's quality curve sets: the mean of its last SMOOTH_EVALS evaluations with a reading,
    in `pending`'s metric, direction and K (None: the baseline read no quality).

    Smoothed because a single evaluation is noisy (a GAN's FID moved 30% between seeds of one config): the last
    reading alone would let one lucky (or unlucky) evaluation set how hard the study's target is. The mean, not
    the best of them, so the target is the quality the baseline settles at, not its luckiest moment; and since one
    of the readings averaged is at least as good as their mean, the baseline itself meets the target within the
    budget it trained (reference_budget), so its time to target, the figure every trial is compared with, always
    exists."""
    last = [p for p in curve if p.quality is not None and math.isfinite(p.quality)][-SMOOTH_EVALS:]
    if not last:
        return None
    value = sum(p.quality for p in last) / len(last)  # type: ignore[misc]
    derived = pending.model_copy(update={"value": value, "source": "baseline",
                                         "evaluations": [p.as_list() for p in last]})
    hit = first_reached(curve, derived)
    if hit is not None and hit.seconds > 0:
        derived = derived.model_copy(update={"cap_seconds": CAP_FACTOR * hit.seconds})
    return derived


def derive_seeds_target(curves: list[tuple[int, list[CurvePoint]]], pending: Target) -> Target | None:
    """The target several seeds of the baseline's reference run set (issue 51): the median of what each settles at
    (derive_target: the mean of its last SMOOTH_EVALS evaluations), `curves` being (seed, curve) pairs. From one
    seed the target moved 10-20% when the seed changed (benchmarks/ttt_choices.py, rows ttc-n-spread and
    ttc-n-luck), so how hard the study's target was depended on one draw. The median, not the mean, so one seed far
    off (a divergence, a lucky run) does not move it; each seed's reading and the spread are kept
    (`reference_seeds`, seed_spread). The cap is CAP_FACTOR x the median of the seeds' times to the target (a seed
    that did not meet it counts as never, the lower middle for an even count), which at least half of them met
    (each one that settled at or better than the median met it: one of its last readings is at least as good as
    their mean). A seed that read no quality is left out; None: none read one."""
    import statistics

    read = [(seed, t, curve) for seed, curve in curves if (t := derive_target(curve, pending)) is not None]
    if not read:
        return None
    value = statistics.median(float(t.value) for _, t, _ in read)  # type: ignore[arg-type]
    derived = pending.model_copy(update={"value": value, "source": "baseline",
                                         "evaluations": [e for _, t, _ in read for e in t.evaluations or []]})
    seeds = []
    for seed, t, curve in read:
        hit = first_reached(curve, derived)
        seeds.append(ReferenceSeed(seed=seed, quality=float(t.value),  # type: ignore[arg-type]
                                   time_to_target=hit.seconds if hit is not None else None))
    times = sorted(s.time_to_target if s.time_to_target is not None else math.inf for s in seeds)
    middle = statistics.median_low(times)
    update: dict[str, object] = {"reference_seeds": seeds}
    if math.isfinite(middle) and middle > 0:
        update["cap_seconds"] = CAP_FACTOR * middle
    return derived.model_copy(update=update)


def seed_spread(target: Target) -> str | None:
    """How far apart the seeds a derived target was read from settled: `the 3 seeds read 1.52-1.71, 12% of the
    target apart` (None: fewer than two seeds)."""
    seeds = target.reference_seeds or []
    if len(seeds) < 2 or target.value is None:
        return None
    low, high = min(s.quality for s in seeds), max(s.quality for s in seeds)
    share = f", {(high - low) / abs(target.value):.0%} of the target apart" if target.value else ""
    return f"the {len(seeds)} seeds read {low:.4g}-{high:.4g}{share}"


def flat_reference(curves: list[tuple[int, list[CurvePoint]]], target: Target) -> str | None:
    """The line saying a derived target is the quality the baseline read at its first evaluation (None: it learned
    after it): every seed that read two evaluations or more settled within FLAT_SHARE of its first, in the target's
    direction (a baseline that learned before its first evaluation and no more reads so too: the note says what
    it saw, not why), or got worse. A classifier that never leaves chance level (a MobileNet's val_loss at ln 10 on
    all 3 seeds) set such a target silently: a trial then meets it at its first evaluation or misses it by 1e-5
    (the baseline's own trial 0 ended `not reached` at 2.303), learning or not, and its time to target reads noise.
    A baseline that got worse (a ResNet-18 at its own lr diverging) set a target below where every seed started,
    which every trial meets at its first evaluation: the note says so, not "chance level"."""
    moved, read = [], []
    for _, curve in curves:
        values = [p.quality for p in curve if p.quality is not None and math.isfinite(p.quality)]
        settled = derive_target(curve, target)
        if len(values) < 2 or settled is None or settled.value is None:
            continue  # one evaluation cannot show a change
        first, last = float(values[0]), float(settled.value)
        gain = (first - last) if target.direction == "minimize" else (last - first)
        read.append((first, last))
        moved.append(gain / max(abs(first), abs(last), 1e-300))  # the share it improved by (< 0: it got worse)
    if not read or any(m > FLAT_SHARE for m in moved):
        return None
    firsts = "/".join(f"{f:.4g}" for f, _ in read)
    lasts = "/".join(f"{s:.4g}" for _, s in read)
    runs = f"its {len(read)} reference runs" if len(read) > 1 else "its reference run"
    worse = sum(1 for m in moved if m < -FLAT_SHARE)
    if not worse:
        how, then = "a classifier left at chance level reads so", "meets or misses it by noise"
    else:  # a ResNet-18 at the user's lr 0.05 read val_loss 37, 27, 23 first and settled at 58, 121, 64
        who = "they" if worse == len(read) > 1 else "it" if worse == len(read) else f"{worse} of them"
        how = f"{who} got worse after it: a run diverging, or a learning rate too high for it, reads so"
        value = float(target.value)  # type: ignore[arg-type]
        met = all((f <= value) if target.direction == "minimize" else (f >= value) for f, _ in read)
        then = "meets it at its first evaluation" if met else "meets or misses it by noise"
    return (f"the target {target.metric} {target.value:.4g} is no better than what the baseline read at its first "
            f"evaluation: {runs} did not improve after it (first evaluation {firsts}, settled {lasts}; {how}), "
            f"so a trial {then}, learning or not: give --target VALUE (a quality reached by training), or a "
            f"longer budget{', or check that the workload trains at its own settings' if worse else ''}")
