"""How a time-to-target study's knobs were chosen, measured (issue 34 item 7): the evaluation interval K, the
smoothing N of a derived target, the number of runs a config gets, and (issue 51) the seeds a derived target is read
from.

`python benchmarks/ttt_choices.py [--dry-run] [--out benchmarks/results]` trains, for the built-in CNN on digits,
the built-in GAN on digits (FID on 500 images at a trial's end, as benchmarks/time_to_target.py; the curves read
here, its evaluations while training, on the 128 of the built-ins' target_eval_samples) and examples/charlm.py (its own
AdamW, a small model), the workload's own settings (tuner's baseline: default knobs, fp32, in-process loading) from
SPREAD_SEEDS (18) seeds, each R optimizer steps (the time-to-target benchmark's reference runs: 100, 80 and 150
steps; the first 3 seeds, SEEDS, train longer, Spec.rule_steps: 200, 120 and 450, past a 15 s study's reference run),
through tuner.train.run_trial with a target not yet set (as `--target baseline`'s reference run: it trains its whole
budget and evaluates every K samples), evaluating after every optimizer step (DENSE_STEPS) of the baseline's
effective batch. (a)-(e) read every FINE_STEPS-th (5th) evaluation of the first R steps, the curves they read before
the runs were dense; the default K's rule in (b) reads the dense curve at its own K. From those quality curves
(samples, training seconds, quality) and the evaluations' own seconds (target_eval_seconds), (a)-(d) from the first
3 seeds (SEEDS, as before (e) was added):

(a) the target each workload's baseline settles at: the mean over seeds of the mean of each seed's last 3 fine
    evaluations (the common target of (b) and (d));
(b) for K in KS (steps of the effective batch; the curve subsampled at every K-th fine point): evaluations before
    the target (samples to target / K; its inverse is the resolution of samples to target) and the evaluation's
    time as a share of the training time between two evaluations (seconds an evaluation / (K steps x seconds a
    step), from the fine run's own figures); and the default K, tuner's rule (tuner.target.default_eval_every),
    judged: the K it picks from the runs' measured pace (samples/s) and evaluation seconds, as the pre-flight
    measures them, for a study of STUDY_BUDGETS seconds (the default study's 15 s judged, 60 s reported), read at
    that K on the dense curves (on the 5-step grid where a curve is not dense) and on the part of each curve a
    reference run of that study trains (the first B/3 seconds at the measured pace): its evaluations there, the
    target they derive (the mean of the last 3, as derive_target), the evaluation at which each seed meets the
    seeds' mean target, and the evaluation's cost;
(c) for N in NS: each seed's derived target (the mean of its last N fine evaluations, tuner.target.derive_target's
    rule), their spread over seeds (relative SD), and how often another seed fails to reach a seed's derived target
    by the samples it was set at (ordered pairs of seeds); beside it the evaluation-to-evaluation noise of each
    curve (second differences: how non-monotonic it is) against the seed-to-seed spread;
(d) the runs: the seed-to-seed spread (log SD) of samples to target here and of the baseline's times to target in
    benchmarks/results/time-to-target.json (5 seeded re-runs), and the fewest runs a config per side that resolve
    the speed-up those rows report (a 95% t-interval of the ratio of geometric means excluding 1);
(e) from all the seeds, the target tuner derives now (issue 51): the median of 3 seeds' settled values
    (tuner.target.derive_seeds_target itself) against one seed's (derive_target), its SD over groups of 3 seeds over
    one seed's (every group, scaled for the seeds they share; disjoint groups beside it: seeds_reading says why),
    and how often a fresh seed reaches it by the samples it was set at.

Rows (benchmarks/table.py schema) go to <out>/ttt-choices.json, a generated table to ttt-choices.md. 3 seeds
took 65-117 s on 2 CPU cores (about 20 s a seed for the three workloads); 18 seeds, evaluating every step and the
first 3 trained longer, took 11 minutes (661 s) on the thirty-eighth session's machine; --dry-run (DRY_SEEDS
seeds, a few steps) validates the script and writes under the work folder. The pure part (curves to rows) is
tested on planted curves in tests/benchmarks/test_ttt_choices.py.

Why one module of ~700 lines: the pure part and the runs it reads are one benchmark, read top to bottom.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FINE_STEPS = 5  # the fine evaluation interval, in optimizer steps of the baseline's effective batch
# The runs evaluate every DENSE_STEPS steps (Curve.dense) and (a)-(e) read every FINE_STEPS-th of those, as before;
# the default K's rule is read on the dense curve, at its own K: on the 5-step grid a rule K of 4 steps (the GAN's,
# where its evaluation scores the built-ins' 128-sample subset) was read at 5, fewer evaluations than a study reads.
DENSE_STEPS = 1
KS = (5, 10, 25, 50, 100)  # candidate K, in steps (multiples of FINE_STEPS)
NS = (1, 3, 5)  # candidate smoothing: a derived target is the mean of the last N evaluations
SEEDS = (0, 1, 2)  # the seeds rows (a)-(d) read (the first of SPREAD_SEEDS)
# the seeds rows (e) read: groups of tuner.target.TARGET_SEEDS (3) of them; 18 give 6 disjoint groups and 816 overlapping
SPREAD_SEEDS = tuple(range(18))
DRY_SEEDS = 6  # --dry-run: 2 disjoint groups of 3
MAX_SEEDS_SPREAD = 0.8  # the 3-seed target's SD over one seed's, at most (a median of 3 normal draws: 0.67)
MIN_SEEDS_REACH = 2 / 3  # a fresh seed reaches the 3-seed target by the samples it was set at, at least this often
STUDY_BUDGETS = (15.0, 60.0)  # study budgets (s) the default K's rule is read at: the default study's (judged), longer
MIN_EVALS = 10  # evaluations before the target the default K should give
# Evaluation seconds over training seconds the default K should cost at most: the rule's EVAL_SHARE (0.2) plus the
# rounding of its K to the curves' FINE_STEPS grid (a rule K of 17 steps read at 15 costs 17/15 x its share)
MAX_EVAL_SHARE = 0.25
CONFIRM_RUNS = 3  # runs a confirmed config gets by default: the trial and 2 re-runs (`tuner search --repeats 2`)
LM = str(REPO / "examples" / "charlm.py") + ":make"


@dataclass(frozen=True)
class Spec:
    """One workload: its config (the baseline's settings) and its run length in optimizer steps."""

    key: str
    config: dict[str, Any]
    metric: str  # minimized
    steps: int
    # The seeds the default K's rule is read on (SEEDS) train this long: past a 15 s study's reference run (5 s) at
    # a quiet machine's pace, so the rule reads the evaluations a study would, not a curve cut short (the LM's 150
    # steps held 9 at K 16 where its reference run trains about 300); (a)-(e) read their first `steps`.
    rule_steps: int = 0


SPECS = {
    "cnn": Spec("cnn", {"workload": "cnn", "dataset": "digits"}, "loss", 100, 200),
    "gan": Spec("gan", {"workload": "gan", "dataset": "digits", "quality": {"fid_samples": 500}}, "fid", 80, 120),
    "lm": Spec("lm", {"workload": LM, "workload_options": {"block_size": 32, "n_layer": 2, "n_head": 4,
                                                           "n_embd": 64}}, "val_loss", 150, 450),
}
DRY_STEPS = {"cnn": 20, "gan": 10, "lm": 20}
DRY_RULE_STEPS = {"cnn": 30, "gan": 15, "lm": 30}


@dataclass(frozen=True)
class Curve:
    """One seed's run: its quality curve at the fine K and what it cost."""

    key: str
    seed: int
    points: list[tuple[int, float, float]]  # (samples, training seconds, quality), finite readings only
    effective_batch: int
    steps: int
    train_s: float
    eval_s: float
    evals: int
    dense: list[tuple[int, float, float]] | None = None  # every DENSE_STEPS steps, where the run evaluated so often

    @property
    def step_s(self) -> float:
        return self.train_s / max(self.steps, 1)

    @property
    def eval_each_s(self) -> float:
        return self.eval_s / max(self.evals, 1)


# --- the pure part: planted curves in, figures and rows out (tests/benchmarks/test_ttt_choices.py) ------------


def at_k(points: list[tuple[int, float, float]], k_steps: int,
         fine: int = FINE_STEPS) -> list[tuple[int, float, float]]:
    """The curve as evaluations every k_steps would read it: every (k_steps / fine)-th point of a curve evaluated
    every `fine` steps."""
    m = max(1, k_steps // fine)
    return points[m - 1::m]


def smoothed(points: list[tuple[int, float, float]], n: int) -> float | None:
    """The target a curve derives with smoothing n: the mean of its last n readings (tuner.target.derive_target)."""
    last = [q for _, _, q in points[-n:]]
    return sum(last) / len(last) if last else None


def first_samples(points: list[tuple[int, float, float]], target: float) -> int | None:
    """Samples at the first reading at or below `target` (the first-passing rule); None: never."""
    return next((s for s, _, q in points if q <= target), None)


def rel_sd(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None]
    if len(vals) < 2 or statistics.fmean(vals) == 0:
        return None
    return statistics.stdev(vals) / abs(statistics.fmean(vals))


def log_sd(values: list[float]) -> float | None:
    vals = [math.log(v) for v in values if v is not None and v > 0]
    return statistics.stdev(vals) if len(vals) >= 2 else None


def point_noise(points: list[tuple[int, float, float]]) -> float | None:
    """Evaluation-to-evaluation noise relative to the level, over the curve's second half: the SD of second
    differences q[i] - (q[i-1] + q[i+1]) / 2, divided by sqrt(1.5) (what independent noise of SD s gives on a locally
    straight curve), over the mean reading. How far one evaluation jumps from its neighbours."""
    qs = [q for _, _, q in points[len(points) // 2 - 1:]]
    d = [qs[i] - (qs[i - 1] + qs[i + 1]) / 2 for i in range(1, len(qs) - 1)]
    if len(d) < 2:
        return None
    return statistics.pstdev(d + [-x for x in d]) / math.sqrt(1.5) / abs(statistics.fmean(qs))


def runs_needed(sigma: float | None, ratio: float, most: int = 50) -> int | None:
    """The fewest runs per config (n a side) whose 95% t-interval of a ratio of geometric means, log SD `sigma`
    each, excludes 1 when the true ratio is `ratio`: t(2n - 2) sigma sqrt(2 / n) < |ln ratio|; `most` + 1: more
    than `most`. None: no spread measured, or no difference to resolve."""
    from scipy.special import stdtrit

    if sigma is None or ratio <= 0 or ratio == 1:
        return None
    for n in range(2, most + 1):
        if stdtrit(2 * n - 2, 0.975) * sigma * math.sqrt(2 / n) < abs(math.log(ratio)):
            return n
    return most + 1


def rule_k_steps(effective_batch: int, step_s: float, eval_each_s: float, budget_s: float) -> int:
    """The K, in optimizer steps, tuner's default rule (tuner.target.default_eval_every) picks for a study of
    `budget_s` seconds from a pace of one step of `effective_batch` samples every `step_s` seconds and an
    evaluation of `eval_each_s` seconds (what the pre-flight measures)."""
    from tuner.config import Budget
    from tuner.target import default_eval_every

    pace = effective_batch / step_s if step_s > 0 else None
    return default_eval_every(effective_batch, Budget(seconds=budget_s), pace, eval_each_s) // effective_batch


def on_grid(k_steps: int, fine: int = FINE_STEPS) -> int:
    """`k_steps` as curves evaluated every `fine` steps can read it: the nearest multiple of it (at least one)."""
    return max(fine, fine * round(k_steps / fine))


def rule_reading(cs: list[Curve], budget_s: float) -> dict[str, Any]:
    """The default K's rule for a study of `budget_s` seconds, on one workload's seed curves: its K from the seeds'
    median step and evaluation seconds, put on the grid, and what a study's reference run (tuner.study
    .reference_budget: B/3 seconds, here the samples the measured pace trains in them) would read at it: its
    evaluations, the target (the mean over seeds of each seed's mean of its last SMOOTH_EVALS evaluations, as
    derive_target), the evaluation at which each seed first meets that target (median over seeds; a seed that
    never does counts at its reference run's last evaluation) and one evaluation's seconds over the K steps' training
    seconds (median over seeds). Where the curves are shorter than the reference run (`covered` false) the whole
    curve is read: a longer run would read more evaluations."""
    from tuner.config import Budget
    from tuner.target import CAP_FACTOR, EVAL_SHARE, SMOOTH_EVALS, reference_budget

    eb = cs[0].effective_batch
    step_s = statistics.median(c.step_s for c in cs)
    eval_s = statistics.median(c.eval_each_s for c in cs)
    k = rule_k_steps(eb, step_s, eval_s, budget_s)
    dense = all(c.dense for c in cs)  # read at the rule's own K where every curve has every DENSE_STEPS steps
    fine = DENSE_STEPS if dense else FINE_STEPS
    curve = [(c.dense or []) if dense else c.points for c in cs]
    gk = on_grid(k, fine)
    ref_s = reference_budget(Budget(seconds=budget_s)).seconds or 0.0
    ref_steps = ref_s / step_s if step_s > 0 else 0.0
    read = [at_k([p for p in pts if p[0] <= ref_steps * eb * (1 + 1e-9)], gk, fine) for pts in curve]
    derived = [smoothed(r, SMOOTH_EVALS) for r in read if r]
    target = statistics.fmean(derived) if derived else None  # type: ignore[arg-type]
    firsts = [None if target is None else next((i + 1 for i, (_, _, q) in enumerate(r) if q <= target), None)
              for r in read]
    evals = [f if f is not None else len(r) for f, r in zip(firsts, read)]
    return {"budget_s": budget_s, "reference_s": ref_s, "reference_steps": ref_steps,
            "covered": all(pts and pts[-1][0] >= ref_steps * eb for pts in curve),
            "rule_k_steps": k, "k_steps": gk, "rounded": gk != k, "grid_steps": fine, "k_samples": gk * eb,
            "evals_in_reference": statistics.median(len(r) for r in read), "target": target,
            "evals_before_target": statistics.median(evals), "reached": sum(f is not None for f in firsts),
            "eval_share": statistics.median(c.eval_each_s / (gk * c.step_s) for c in cs if c.step_s > 0),
            "eval_share_at_rule_k": eval_s / (k * step_s) if step_s > 0 else None,
            # the shortest study budget whose reference run holds MIN_EVALS evaluations at the K the cost bound sets
            "min_budget_s": CAP_FACTOR * MIN_EVALS * eval_s / EVAL_SHARE}


def analyse(curves: list[Curve], default_n: int,
            budgets: tuple[float, ...] = STUDY_BUDGETS) -> dict[str, Any]:
    """Per workload: the common target, the K grid, the default K's rule at each study budget in `budgets` (the
    first judged), the N grid and the spread of samples to target."""
    out: dict[str, Any] = {}
    for key in dict.fromkeys(c.key for c in curves):
        cs = [c for c in curves if c.key == key and c.points]
        if not cs:
            continue
        eb = cs[0].effective_batch
        common = statistics.fmean(smoothed(c.points, 3) for c in cs)  # type: ignore[misc]
        ks = {}
        for k in KS:
            got = [first_samples(at_k(c.points, k), common) for c in cs]
            # a seed that never reads the target counts at its run's end (at least that many), as tuner counts a
            # not-reached run at the cap
            evals = [(s if s is not None else c.points[-1][0]) / (k * eb) for s, c in zip(got, cs)]
            share = statistics.median(c.eval_each_s / (k * c.step_s) for c in cs)
            med = statistics.median(evals)
            ks[str(k)] = {"k_samples": k * eb, "evals_before_target": med, "resolution": 1 / med if med else None,
                          "reached": sum(s is not None for s in got), "eval_share": share}
        ns = {}
        for n in NS:
            derived = [smoothed(c.points, n) for c in cs]
            pairs = [(i, j) for i in range(len(cs)) for j in range(len(cs)) if i != j]
            missed = 0
            for i, j in pairs:  # does seed j reach seed i's target by the samples seed i set it at?
                hit = first_samples(cs[j].points, derived[i])  # type: ignore[arg-type]
                missed += hit is None or hit > cs[i].points[-1][0]
            # how much easier than the last evaluations' level the mean of the last N makes it: a curve still
            # falling sets a higher (easier) target the more evaluations back it averages
            easier = statistics.fmean(derived) / statistics.fmean(smoothed(c.points, 1) for c in cs) - 1  # type: ignore
            ns[str(n)] = {"targets": derived, "rel_sd": rel_sd(derived),  # type: ignore[arg-type]
                          "pairs": len(pairs), "missed": missed, "easier_than_n1": easier}
        stt = [first_samples(c.points, common) or c.points[-1][0] for c in cs]  # not reached: at least the run
        noise = [point_noise(c.points) for c in cs]
        finals = [c.points[-1][2] for c in cs]
        rule = {f"{b:g}": rule_reading(cs, b) for b in budgets}
        judged = rule[f"{budgets[0]:g}"]
        out[key] = {
            "target": common, "effective_batch": eb, "seeds": [c.seed for c in cs],
            # the fine curves' length, and the runs' whole length, which the rule's dense curves hold
            "steps": cs[0].points[-1][0] // eb, "rule_steps": cs[0].steps,
            "step_s": statistics.median(c.step_s for c in cs), "eval_each_s": statistics.median(c.eval_each_s for c in cs),
            "k": ks, "n": ns, "samples_to_target": stt, "stt_log_sd": log_sd(stt),  # type: ignore[arg-type]
            "point_noise": statistics.fmean(x for x in noise if x is not None) if any(x is not None for x in noise)
            else None, "final_rel_sd": rel_sd(finals),
            "n_spread_ratio": (ns[str(default_n)]["rel_sd"] / ns["1"]["rel_sd"])
            if ns.get(str(default_n), {}).get("rel_sd") is not None and ns["1"]["rel_sd"] else None,
            "rule": rule, "default_k_steps": judged["k_steps"], "default_k_evals": judged["evals_before_target"],
            "default_k_share": judged["eval_share"], "min_budget_s": judged["min_budget_s"],
            "curves": [asdict(c) for c in cs],
        }
    return out


def seeds_reading(cs: list[Curve]) -> dict[str, Any]:
    """One workload's seeds read as tuner reads a derived target now (issue 51): each group of TARGET_SEEDS seeds
    sets the median of what they settle at, through tuner.target.derive_seeds_target itself; one seed sets what it
    settles at (tuner.target.derive_target, the rule before). Returned: the SD of each, the ratio, and how often a
    fresh seed (one outside the group) reaches the target by the samples the group trained.

    The SD over groups is read two ways. Disjoint groups (seeds 0-2, 3-5, ...) are independent draws of what a
    study would set, but n seeds give only n/3 of them. Every group of 3 of the n seeds (C(n, 3)) uses all the
    seeds, but the groups share seeds: they hold no more information than the n seeds, and groups drawn from a
    fixed set of n spread less than independent ones, by sqrt((n - 3) / n) for a mean (exact; for a median about
    that, a little more, which errs against the rule: normal draws read 0.68 for a true 0.67). The judged figure is
    the every-group SD scaled back by sqrt(n / (n - 3)), over one seed's SD (n - 1 divisor): steadier than n/3
    disjoint groups (normal draws, 18 seeds: 0.58-0.77 at the 10th-90th percentile against 0.42-0.88). The reach
    rate pools every group against every seed outside it: each case is an exchangeable draw of 4 distinct seeds,
    so the rate is unbiased; its precision is still that of n seeds."""
    from tuner.config import Target
    from tuner.target import TARGET_SEEDS, CurvePoint, derive_seeds_target, derive_target

    k = TARGET_SEEDS
    cs = [c for c in cs if c.points]
    pending = Target(metric="quality", eval_every_samples=(cs[0].effective_batch if cs else 1) * FINE_STEPS)
    pts = [[CurvePoint(s, t, q) for s, t, q in c.points] for c in cs]
    one = [t.value for p in pts if (t := derive_target(p, pending)) is not None]

    def group(g: tuple[int, ...]) -> float | None:
        t = derive_seeds_target([(cs[i].seed, pts[i]) for i in g], pending)
        return None if t is None else t.value

    n = len(cs)
    groups = list(itertools.combinations(range(n), k)) if n > k else []
    every = {g: group(g) for g in groups}
    disjoint = [v for i in range(0, n - k + 1, k) if (v := group(tuple(range(i, i + k)))) is not None]
    one_sd = statistics.stdev(one) if len(one) >= 2 else None
    vals = [v for v in every.values() if v is not None]
    every_sd = statistics.pstdev(vals) * math.sqrt(n / (n - k)) if len(vals) >= 2 else None
    disjoint_sd = statistics.stdev(disjoint) if len(disjoint) >= 2 else None

    def over_one(sd: float | None) -> float | None:
        return None if sd is None or not one_sd else sd / one_sd

    def reached(target: float | None, setters: tuple[int, ...], j: int) -> bool:
        """Seed j meets `target` by the samples the setting seeds trained."""
        hit = None if target is None else first_samples(cs[j].points, target)
        return hit is not None and hit <= max(cs[i].points[-1][0] for i in setters)

    seeds_cases = [(g, j) for g in groups for j in range(n) if j not in g]
    one_cases = [(i, j) for i in range(n) for j in range(n) if i != j]
    one_value = {i: (t.value if (t := derive_target(pts[i], pending)) is not None else None) for i in range(n)}
    return {"seeds": [c.seed for c in cs], "group_size": k, "settled": one,
            "one_rel_sd": rel_sd(one), "one_sd": one_sd,
            "groups": len(vals), "every_group_sd": every_sd,
            "every_group_rel_sd": None if every_sd is None or not vals else every_sd / abs(statistics.fmean(vals)),
            "every_group_ratio": over_one(every_sd),
            "disjoint_groups": len(disjoint), "disjoint_sd": disjoint_sd, "disjoint_rel_sd": rel_sd(disjoint),
            "disjoint_ratio": over_one(disjoint_sd),
            "seeds_reached": sum(reached(every[g], g, j) for g, j in seeds_cases), "seeds_cases": len(seeds_cases),
            "one_reached": sum(reached(one_value[i], (i,), j) for i, j in one_cases), "one_cases": len(one_cases)}


def seeds_analyse(curves: list[Curve]) -> dict[str, dict[str, Any]]:
    """seeds_reading for each workload in `curves` (every seed measured, not only SEEDS)."""
    return {key: seeds_reading([c for c in curves if c.key == key]) for key in dict.fromkeys(c.key for c in curves)}


def claimed(tt_doc: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """From time-to-target.json: per workload, the speed-up its row reports (baseline / pick) and the log SD of the
    baseline's times to target over its seeded re-runs."""
    found: dict[str, dict[str, Any]] = {}
    for r in (tt_doc or {}).get("rows", []):
        rid = str(r.get("id", ""))
        if not rid.startswith("tt-") or rid.startswith("tt-int") or rid.startswith("tt-race"):
            continue
        details = r.get("details") or {}
        arm = (details.get("arms") or {}).get("c") or {}
        pick = ((details.get("a") or {}).get("pick") or {}).get("trial")
        found[rid[3:]] = {"ratio": r.get("ratio"), "baseline_times": list(arm.get("times") or []),
                          "times_log_sd": log_sd(list(arm.get("times") or [])), "commit": r.get("commit"),
                          "pick_is_baseline": pick == 0}  # (c), the baseline, is (a)'s trial 0 (time_to_target.py)
    return found


def rows(found: dict[str, Any], tt: dict[str, dict[str, Any]], default_n: int,
         meta: dict[str, Any], seeds: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The seven rows, from the figures alone (tests plant them); `seeds` (seeds_analyse) feeds the last two, not
    measured without it."""
    from benchmarks.table import target
    from tuner.target import EVAL_SHARE

    keys = list(found)

    def per(fmt: Any) -> str:
        return "; ".join(f"{k} {fmt(found[k])}" for k in keys)

    def worst(name: str, pick: Any) -> float | None:
        vals = [found[k].get(name) for k in keys]
        return None if not vals or any(v is None for v in vals) else pick(vals)

    runs: dict[str, Any] = {}
    for k in keys:
        sig_here = found[k]["stt_log_sd"]
        sig_tt = (tt.get(k) or {}).get("times_log_sd")
        sigma = max((s for s in (sig_here, sig_tt) if s is not None), default=None)
        ratio = (tt.get(k) or {}).get("ratio")
        runs[k] = {"sigma": sigma, "sigma_samples_here": sig_here, "sigma_times_tt": sig_tt, "ratio": ratio,
                   "runs_needed": runs_needed(sigma, ratio) if ratio else None,
                   "pick_is_baseline": bool((tt.get(k) or {}).get("pick_is_baseline"))}
    # a study that kept its baseline reports no speed-up: its two arms re-run one config, and no number of runs
    # tells that 1x from 1x (the GAN's 0.93-0.99x read "more than 50")
    needed = [runs[k]["runs_needed"] for k in keys if runs[k]["ratio"] and not runs[k]["pick_is_baseline"]]
    most_runs = None if not needed or any(n is None for n in needed) else max(needed)
    base = {"commit": meta["commit"], "dirty": meta["dirty"], "date": meta["date"], "machine": meta["machine"],
            "load": meta["load"], "benchmark": "ttt_choices", "target_history": []}
    k_grid = "; ".join(f"{k}: " + ", ".join(f"K {kk} {v['evals_before_target']:.3g} evals/{v['eval_share']:.0%}"
                                            for kk, v in found[k]["k"].items()) for k in keys)
    n_grid = "; ".join(f"{k}: " + ", ".join(f"N {nn} SD {_pct(v['rel_sd'])}, {v['missed']}/{v['pairs']} missed, "
                                            f"{v['easier_than_n1']:+.1%} vs N 1"
                                            for nn, v in found[k]["n"].items()) for k in keys)
    sizes = per(lambda f: f"{f.get('rule_steps', f['steps'])} steps of {f['effective_batch']}, {len(f['seeds'])} seeds")
    evals = worst("default_k_evals", min)
    share = worst("default_k_share", max)
    budgets = [b for b in (found[keys[0]]["rule"] if keys else {})]
    key_b, key_o = (budgets + [""])[0], (budgets[1:] or budgets or [""])[0]
    budget, other = float(key_b or STUDY_BUDGETS[0]), f"{key_o} s"
    spread = worst("n_spread_ratio", max)
    pooled = {n: (sum(found[k]["n"][str(n)]["missed"] for k in keys), sum(found[k]["n"][str(n)]["pairs"] for k in keys))
              for n in NS}
    reach_default = 1 - pooled[default_n][0] / pooled[default_n][1] if pooled[default_n][1] else None
    reach_one = 1 - pooled[1][0] / pooled[1][1] if pooled[1][1] else None
    return [
        {**base, "id": "ttc-k-evals",
         "name": f"the default K (tuner's rule from the measured pace, a {budget:g} s study): evaluations before the "
                 f"baseline's target",
         "figure": evals, "unit": "evals", "baseline": float(MIN_EVALS), "ratio": None if evals is None else evals / MIN_EVALS,
         "target": target(f"at least {MIN_EVALS} on every workload (figure: the fewest over workloads)",
                          ("figure", ">=", MIN_EVALS)).to_json(),
         "note": (f"The K tuner's rule picks (tuner.target.default_eval_every: the finest whole number of steps whose "
                  f"evaluation costs at most a fifth of the training between two, and no finer than 20 evaluations "
                  f"over the reference run, a third of the budget) from each workload's measured step and "
                  f"evaluation seconds, for a {budget:g} s study, read on the part of each seed's curve its reference "
                  f"run trains (the samples the measured pace trains in {budget / 3:g} s), the target the mean of "
                  f"the seeds' derived targets (each the mean of its last 3 evaluations at that K), median over "
                  f"seeds of the evaluation that first meets it: "
                  + per(lambda f: rule_text(f["rule"][key_b]))
                  + f". At {other}: " + per(lambda f: rule_text(f["rule"][key_o])) + " (the K depends on the "
                  f"measured pace and the machine's load; the runs evaluated every {DENSE_STEPS} step(s), so the "
                  f"rule's own K is read; curves evaluated every {FINE_STEPS} steps read a rule K off that grid at "
                  f"the nearest grid K, marked ~; 'whole curve': the curves, {sizes}, are shorter than that "
                  f"reference run, so a study would read more evaluations). The rule keeps an evaluation within a "
                  f"fifth of the training, so a reference run holds at most (B/3) x 0.2 / (seconds an evaluation) "
                  f"of them: {MIN_EVALS} over the reference run need B of at least "
                  + per(lambda f: f"{f['min_budget_s']:.0f} s") + " on this machine, and fewer come before the "
                  f"target, met at one of its last 3 at the latest. Fixed K grid (median evaluations before the "
                  f"whole curves' target / evaluation time over training time): {k_grid}."),
         "details": {"study_budget_s": budget, "reported_budget_s": STUDY_BUDGETS[1:],
                     "workloads": {k: {kk: v for kk, v in found[k].items() if kk != "curves"} for k in keys}}},
        {**base, "id": "ttc-k-cost",
         "name": f"the default K (tuner's rule from the measured pace, a {budget:g} s study): evaluation time over "
                 f"training time",
         "target_history": [{"was": "at most 20% on every workload", "why": "the row judged a fixed K of 25 steps; "
                             "it now judges tuner's rule, which picks the finest K costing at most 20% from the "
                             "same measured figures, so the figure is 20% or less by construction at the rule's "
                             "own K; it is read at the nearest multiple of the curves' 5-step grid, which rounds K "
                             "down by at most 2 steps, costing up to K / (K - 2) times that (17 steps read at 15: "
                             "23%)"}],
         "figure": share, "unit": "", "baseline": EVAL_SHARE, "ratio": None if share is None else share / EVAL_SHARE,
         "target": target(f"at most {MAX_EVAL_SHARE:.0%} on every workload (figure: the largest; the rule's "
                          f"{EVAL_SHARE:.0%} plus the grid's rounding)",
                          ("figure", "<=", MAX_EVAL_SHARE)).to_json(),
         "note": (f"Seconds of one evaluation over the training seconds of K steps, at the rule's K for a "
                  f"{budget:g} s study read on the grid (median over seeds): "
                  + per(lambda f: f"{f['rule'][key_b]['eval_share']:.0%} at {_k(f['rule'][key_b])} steps "
                        f"({f['eval_each_s']:.3g} s an evaluation, {f['step_s'] * 1000:.0f} ms a step; at the rule's "
                        f"own K {_pct0(f['rule'][key_b]['eval_share_at_rule_k'])})")
                  + f"; at {other}: " + per(lambda f: f"{f['rule'][key_o]['eval_share']:.0%}")
                  + ". The rule's inputs here are these runs' own medians, so the row checks its arithmetic and the "
                  "grid's rounding, not how far a pre-flight's one reading drifts from the trials' load. "
                  "Evaluations are outside the training clock (time to target leaves them out, "
                  "target_eval_seconds reports them), so a config cannot win by a cheaper evaluation; this is what "
                  "they add to a study's wall time."),
         "details": {k: {"eval_each_s": found[k]["eval_each_s"], "step_s": found[k]["step_s"],
                         "rule": {b: {x: v[x] for x in ("rule_k_steps", "k_steps", "eval_share",
                                                        "eval_share_at_rule_k")} for b, v in found[k]["rule"].items()},
                         "share_by_k": {kk: v["eval_share"] for kk, v in found[k]["k"].items()}} for k in keys}},
        {**base, "id": "ttc-n-spread", "name": f"default smoothing (N={default_n}): seed spread of a derived target vs N=1",
         "figure": spread, "unit": "", "baseline": 0.5, "ratio": None,
         "target": target("at most 0.5 on every workload (N's relative SD over seeds / N=1's; figure: the largest)",
                          ("figure", "<=", 0.5)).to_json(),
         "note": (f"Relative SD over seeds of the derived target (the mean of a seed's last N fine evaluations): "
                  f"{n_grid}. Evaluation-to-evaluation noise (second differences, relative): "
                  + per(lambda f: _pct(f['point_noise'])) + "; seed-to-seed spread of the last evaluation: "
                  + per(lambda f: _pct(f['final_rel_sd'])) + ". Smoothing removes only the first: where seeds differ "
                  "more than evaluations jump, no N halves the spread; and on a curve still falling, the mean of the "
                  "last N sets an easier target the larger N (\"vs N 1\": the mean target over the mean last "
                  "evaluation)."),
         "details": {k: {"n": found[k]["n"], "point_noise": found[k]["point_noise"],
                         "final_rel_sd": found[k]["final_rel_sd"]} for k in keys}},
        {**base, "id": "ttc-n-luck", "name": f"default smoothing (N={default_n}): other seeds reach a seed's derived target",
         "figure": reach_default, "unit": "", "baseline": reach_one, "ratio": None,
         "target": target("at least 2/3 of ordered seed pairs (pooled over workloads) and at least N=1's",
                          ("figure", ">=", 2 / 3), ("details.gain", ">=", 0)).to_json(),
         "note": (f"Of ordered pairs (seed i sets the target from its curve, seed j trains), how often seed j reached "
                  f"it by the samples seed i set it at: N={default_n} {pooled[default_n][1] - pooled[default_n][0]}"
                  f"/{pooled[default_n][1]}, N=1 {pooled[1][1] - pooled[1][0]}/{pooled[1][1]}"
                  + "".join(f", N={n} {pooled[n][1] - pooled[n][0]}/{pooled[n][1]}" for n in NS if n not in (1, default_n))
                  + " (a target one lucky last evaluation set is one the other seeds miss; a larger N also sets an "
                  "easier target on a curve still falling: ttc-n-spread's note)."),
         "details": {"pooled": {str(n): {"missed": m, "pairs": p} for n, (m, p) in pooled.items()},
                     "gain": None if reach_default is None or reach_one is None else reach_default - reach_one}},
        {**base, "id": "ttc-runs", "name": f"runs a config: the fewest that resolve the reported speed-ups",
         "figure": None if most_runs is None else float(most_runs), "unit": "runs", "baseline": float(CONFIRM_RUNS),
         "ratio": None,
         "target": target(f"at most {CONFIRM_RUNS} (the trial and the confirmation's 2 default re-runs) on every "
                          f"workload whose study picked another config than its baseline",
                          ("figure", "<=", CONFIRM_RUNS)).to_json(),
         "target_history": [{"was": f"at most {CONFIRM_RUNS} on every workload", "why": "a study that kept its "
                             "baseline reports no speed-up to resolve: its pick and its baseline are one config, "
                             "and no number of runs tells their 1x apart (the GAN's pick, the baseline, read 0.93x "
                             "and 0.99x: 'more than 50 runs'); such a workload is named and left out"}],
         "note": ("Seed-to-seed spread (log SD) of the baseline's samples to target here (a seed that never reads "
                  "the target counted at its run's end) and of its times to target "
                  "over the 5 seeded re-runs of time-to-target.json, the larger taken, against the speed-up that "
                  "file's row reports (baseline / pick): "
                  + "; ".join(f"{k} SD {_f(runs[k]['sigma_samples_here'])} / {_f(runs[k]['sigma_times_tt'])}, "
                              f"{_f(runs[k]['ratio'])}x: "
                              + ("the study kept its baseline, no speed-up to resolve (left out)"
                                 if runs[k]["pick_is_baseline"] else f"{_runs(runs[k]['runs_needed'])} runs a side")
                              for k in keys)
                  + " (95% t-interval of the ratio of geometric means excluding 1; 3 seeds here give a rough SD)."),
         "details": {"runs": runs, "time_to_target_commits": {k: (tt.get(k) or {}).get("commit") for k in keys}}},
        *seeds_rows(seeds or {}, base),
    ]


def seeds_rows(seeds: dict[str, dict[str, Any]], base: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows ttc-seeds-spread and ttc-seeds-luck: the target tuner derives now (the median of TARGET_SEEDS seeds)
    against one seed's, from seeds_analyse's figures."""
    from benchmarks.table import target
    from tuner.target import TARGET_SEEDS

    keys = list(seeds)
    ratios = [seeds[k]["every_group_ratio"] for k in keys]
    spread = None if not ratios or any(r is None for r in ratios) else max(ratios)
    got = {w: (sum(seeds[k][f"{w}_reached"] for k in keys), sum(seeds[k][f"{w}_cases"] for k in keys))
           for w in ("seeds", "one")}
    reach = {w: r / c if c else None for w, (r, c) in got.items()}
    ns = "; ".join(f"{k} {len(seeds[k]['seeds'])}" for k in keys)
    k3 = TARGET_SEEDS
    return [
        {**base, "id": "ttc-seeds-spread",
         "name": f"a derived target from {k3} seeds (tuner's median): its seed spread vs one seed's",
         "figure": spread, "unit": "", "baseline": 1.0, "ratio": None,
         "target": target(f"at most {MAX_SEEDS_SPREAD} on every workload (SD of the {k3}-seed target over groups of "
                          f"seeds / one seed's target's SD; figure: the largest)",
                          ("figure", "<=", MAX_SEEDS_SPREAD)).to_json(),
         "note": (f"Each seed's settled value is the mean of its last 3 fine evaluations (tuner.target.derive_target, "
                  f"one seed's target before issue 51); a group of {k3} seeds sets their median "
                  f"(tuner.target.derive_seeds_target, the study's rule). Seeds a workload: {ns}. SD of the "
                  f"{k3}-seed target over every group of {k3} of them, scaled by sqrt(n / (n - {k3})) for the seeds "
                  f"the groups share (exact for a mean), over one seed's SD: "
                  + "; ".join(f"{k} {_f(seeds[k]['every_group_ratio'])} (one seed {_pct(seeds[k]['one_rel_sd'])} of "
                              f"the target, {k3} seeds {_pct(seeds[k]['every_group_rel_sd'])})" for k in keys)
                  + f". Over disjoint groups only (independent, but n/{k3} of them, so a rough SD): "
                  + "; ".join(f"{k} {_f(seeds[k]['disjoint_ratio'])} ({seeds[k]['disjoint_groups']} groups)"
                              for k in keys)
                  + f". The median of {k3} independent normal draws has 0.67x the SD of one (their mean 0.58x), so "
                  f"{MAX_SEEDS_SPREAD} asks the seeds to steady the target about that much; seeds that split into "
                  f"two camps (a run that sometimes diverges) stay near 1x. Read on the fine curves of the whole "
                  f"runs, as ttc-n-spread, not on a study's reference run at its K."),
         "details": {k: {x: v for x, v in seeds[k].items()} for k in keys}},
        {**base, "id": "ttc-seeds-luck",
         "name": f"a derived target from {k3} seeds (tuner's median): a fresh seed reaches it",
         "figure": reach["seeds"], "unit": "", "baseline": reach["one"], "ratio": None,
         "target": target(f"at least 2/3 of (group, fresh seed) cases (pooled over workloads) and at least one "
                          f"seed's target's rate", ("figure", ">=", MIN_SEEDS_REACH), ("details.gain", ">=", 0)).to_json(),
         "note": (f"How often a seed outside a group of {k3} reaches the group's target (their median) by the samples "
                  f"the group trained: {got['seeds'][0]}/{got['seeds'][1]}, against a seed reaching another seed's "
                  f"target: {got['one'][0]}/{got['one'][1]} (pooled; "
                  + "; ".join(f"{k} {seeds[k]['seeds_reached']}/{seeds[k]['seeds_cases']} vs "
                              f"{seeds[k]['one_reached']}/{seeds[k]['one_cases']}" for k in keys)
                  + f"). Every group of {k3} against every seed outside it: the cases share seeds, so the rate is "
                  f"unbiased but as precise as the seeds measured, not as the count of cases. In a study a trial "
                  f"trains up to 3x the reference run's budget (the cap); this asks for the same samples, a harder "
                  f"test."),
         "details": {"pooled": {w: {"reached": r, "cases": c} for w, (r, c) in got.items()},
                     "gain": None if reach["seeds"] is None or reach["one"] is None else reach["seeds"] - reach["one"]}},
    ]


def rule_text(r: dict[str, Any]) -> str:
    """One budget's reading of the rule, for a note: K (rule K -> grid K), the evaluations before the target."""
    whole = ", whole curve" if not r["covered"] else ""
    return (f"K {_k(r)} steps, met at evaluation {r['evals_before_target']:.3g} of {r['evals_in_reference']:.3g}"
            f"{whole}")


def _k(r: dict[str, Any]) -> str:
    return f"{r['rule_k_steps']} (~{r['k_steps']})" if r["rounded"] else str(r["k_steps"])


def _pct0(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def _runs(n: int | None) -> str:
    return "-" if n is None else "more than 50" if n > 50 else str(n)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def markdown(doc: dict[str, Any]) -> str:
    """ttt-choices.md: the rows and each workload's K grid, generated from the results file."""
    from benchmarks.table import Row

    lines = [f"# Time to target: K, smoothing and runs (issue 34 item 7)", "",
             f"Measured {doc['date'][:16].replace('T', ' ')} UTC on {doc['machine']}, load {doc['load']}; "
             f"{doc['seconds']:.0f} s in all. Generated by benchmarks/ttt_choices.py from ttt-choices.json; do not "
             f"edit.", "", "| # | row | figure | baseline | target | result |", "|---|---|---|---|---|---|"]
    fmt = (lambda v: "-" if v is None else f"{v:.3g}")
    for r in doc["rows"]:
        row = Row.from_json(r, "ttt-choices.json")
        lines.append(f"| {row.id} | {row.name} | {fmt(row.figure)} {row.unit} | {fmt(row.baseline)} | "
                     f"{row.target.text} | {row.verdict()} |")
    work = doc["rows"][0]["details"]["workloads"]
    lines += ["", "Fixed K candidates, read on the whole curves:", "",
              "| workload | K (steps) | K (samples) | evaluations before the target (median) | evaluation / "
              "training time |", "|---|---|---|---|---|"]
    for key, f in work.items():
        for k, v in f["k"].items():
            lines.append(f"| {key} | {k} | {v['k_samples']} | {v['evals_before_target']:.3g} | {v['eval_share']:.0%} |")
    lines += ["", "The default K, tuner's rule (tuner.target.default_eval_every) from the measured pace, read on each "
              "study's reference run (a third of the budget; ~: the rule's K read at the nearest grid K; whole "
              "curve: the curves are shorter than that reference run):", "",
              "| workload | study budget | rule K (steps) | read at | evaluations in the reference run | target met "
              "at evaluation (median) | evaluation / training time |", "|---|---|---|---|---|---|---|"]
    for key, f in work.items():
        for b, r in (f.get("rule") or {}).items():
            whole = "" if r["covered"] else ", whole curve"
            lines.append(f"| {key} | {b} s | {r['rule_k_steps']} | {r['k_steps']}{whole} | "
                         f"{r['evals_in_reference']:.3g} | {r['evals_before_target']:.3g} | {r['eval_share']:.0%} |")
    lines.append("")
    lines += [f"- {r['id']}: {r['note']}" for r in doc["rows"]]
    return "\n".join(lines) + "\n"


# --- the runs ------------------------------------------------------------------------------------------------


def measure(spec: Spec, seed: int, steps: int, cache: Path, keep: int | None = None) -> Curve:
    """One seeded run of the baseline's settings, evaluating every DENSE_STEPS steps, its target not yet set: the
    dense curve, and every FINE_STEPS-th evaluation of its first `keep` steps (all of them: None) as the curve
    (a)-(e) read. The pace (step and evaluation seconds) is the whole run's."""
    from tuner.config import parse_config
    from tuner.train import run_trial

    probe = parse_config({**spec.config, "params": {"num_workers": 0, "precision": "fp32"}}, "ttt_choices")
    eb = probe.params.effective_batch
    doc = {**spec.config, "budget": {"samples": eb * steps},
           "params": {"num_workers": 0, "precision": "fp32", "seed": seed},
           # windows of one step and no warm-up: a target's evaluation waits for a window's end (windows of 2 read
           # every 2nd step, a warm-up step's evaluation came at the 2nd); the training clock counts every step
           "measure": {"warmup_steps": 0, "warmup_max_steps": 0, "windows": 3, "min_windows": 2,
                       "window_min_steps": DENSE_STEPS, "window_min_seconds": 0, "ceiling_seconds": 0},
           "target": {"metric": spec.metric, "value": None, "eval_every_samples": eb * DENSE_STEPS}}
    cfg = parse_config(doc, f"ttt_choices {spec.key}")
    result = run_trial(cfg, cache_dir=cache, measure_ceilings=False)
    every = [(int(s), float(t), float(q)) for s, t, q in result.quality_curve]
    if [s for s, _, _ in every] != [eb * DENSE_STEPS * (i + 1) for i in range(len(every))]:
        raise RuntimeError(f"{spec.key} seed {seed}: evaluated at {[s for s, _, _ in every][:6]}..., not every "
                           f"{DENSE_STEPS} step(s) of {eb}: the curves would not be what the rows read")
    fine = [p for p in every if p[0] % (eb * FINE_STEPS) == 0 and (keep is None or p[0] <= keep * eb)]
    m = result.metrics
    return Curve(spec.key, seed, [p for p in fine if _finite(p[2])], eb, int(m.get("steps") or steps),
                 float(m.get("train_seconds") or 0.0), float(m.get("target_eval_seconds") or 0.0),
                 len(result.quality_curve), [p for p in every if _finite(p[2])])


def _finite(q: Any) -> bool:
    return q is not None and math.isfinite(q)


def main() -> int:
    from benchmarks.common import _loadavg, cpu_model, git_state
    from benchmarks.table import SCHEMA
    from tuner.config import EVAL_EVERY_STEPS
    from tuner.files import json_safe
    from tuner.target import SMOOTH_EVALS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help=f"{DRY_SEEDS} seeds, a few steps: validates the script; "
                    "writes under the work folder")
    ap.add_argument("--out", type=Path, default=None, help="where the results go (default benchmarks/results; "
                    "with --dry-run the work folder)")
    ap.add_argument("--work", type=Path, default=REPO / "reports" / "benchmarks" / "ttt-choices")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    load = _loadavg() or []
    commit, dirty = git_state()
    import datetime as dt

    date = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    seeds = SPREAD_SEEDS[:DRY_SEEDS] if args.dry_run else SPREAD_SEEDS
    curves = []
    for spec in SPECS.values():
        steps = DRY_STEPS[spec.key] if args.dry_run else spec.steps
        # a short run first, discarded: the one-time costs (the digits cache, the GAN's FID statistics and feature
        # classifier, the workload's imports) would otherwise land in the first seed's evaluation seconds
        measure(spec, 99, FINE_STEPS + 1, args.work / "cache")
        rule_steps = max(steps, DRY_RULE_STEPS[spec.key] if args.dry_run else spec.rule_steps)
        for seed in seeds:
            c = measure(spec, seed, rule_steps if seed in SEEDS else steps, args.work / "cache", keep=steps)
            curves.append(c)
            print(f"[ttt_choices {time.perf_counter() - t0:5.0f}s] {spec.key} seed {seed}: {len(c.points)} "
                  f"evaluations, last {c.points[-1][2] if c.points else None}, train {c.train_s:.1f} s, "
                  f"evaluations {c.eval_s:.1f} s", file=sys.stderr, flush=True)
    # rows (a)-(d) read the first seeds, as before the seeds rows were added; rows (e) read them all
    found = analyse([c for c in curves if c.seed in SEEDS], SMOOTH_EVALS)
    by_seeds = seeds_analyse(curves)
    tt_path = REPO / "benchmarks" / "results" / "time-to-target.json"
    tt = claimed(json.loads(tt_path.read_text()) if tt_path.exists() else None)
    meta = {"commit": commit, "dirty": dirty, "date": date, "load": load,
            "machine": f"{cpu_model()} ({os.cpu_count()} cores, no GPU)"}
    doc = {"schema": SCHEMA, "mode": "dry-run" if args.dry_run else "full", "date": date, "machine": meta["machine"],
           "load": load, "load_average_at_end": _loadavg(), "eval_every_steps_without_pace": EVAL_EVERY_STEPS,
           "smooth_evals": SMOOTH_EVALS, "study_budgets_s": list(STUDY_BUDGETS),
           "seeds": list(SEEDS), "spread_seeds": list(seeds), "rows": rows(found, tt, SMOOTH_EVALS, meta, by_seeds),
           # the dense curves of the seeds the rule is read on (SEEDS); the others' fine curves are what (e) reads
           "curves": {k: [{**asdict(c), "dense": c.dense if c.seed in SEEDS else None} for c in curves if c.key == k]
                      for k in found}}
    doc["seconds"] = time.perf_counter() - t0
    out = args.out or (args.work if args.dry_run else REPO / "benchmarks" / "results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "ttt-choices.json").write_text(json.dumps(json_safe(doc), indent=1) + "\n")
    (out / "ttt-choices.md").write_text(markdown(json_safe(doc)))
    for r in doc["rows"]:
        from benchmarks.table import Row

        print(f"{r['id']}: {Row.from_json(r, 'x').verdict()} ({r['figure']}): {r['note']}")
    print(f"wrote {out / 'ttt-choices.json'} in {doc['seconds']:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
