"""Multi-fidelity tabular benchmark (issue 20): does Pareto ASHA reach a good front sooner than full-budget trials?

The method of LCBench / YAHPO: measure a grid once, then replay many studies on it. Here:
  1. measure: every config of a CNN grid and a GAN grid on digits (batch size, accumulation, lr scale, Adam's
     beta1) is trained once per rung budget, from scratch with the same seed, through tuner's own
     `tuner.train.run_trial`: its throughput, its quality (validation loss / FID) and its times at each rung.
     While trials cannot yet report at rungs this is the honest way to get a config's quality at each rung.
     Rungs are in *samples* (the budget's other unit): quality after N samples does not depend on how busy the
     machine is, which a seconds budget on a shared 2-core machine would (its quality would measure the load).
  2. replay: tuner's real sampler (`make_sampler`, Optuna's multi-objective TPE, asked through the space's
     define-by-run `Space.sample` and told with `tell_trial`) proposes configs of the grid; the real
     `ParetoASHA.goes_on_at` stops trials at rungs; wall time is simulated from the measured times. Against FIFO
     (every trial runs the top rung) with the same sampler and seeds. A stopped trial reaches Optuna as PRUNED
     or told its values at the rung where it stopped: both are replayed.
Figures per workload, over seeds: wall time to reach 90% of the grid's top-rung hypervolume (ASHA vs FIFO), and
the hypervolume at equal wall time (FIFO's time for `trials` trials). Only figures measured at the top rung
count toward a study's front (a stopped trial's early values never do). Rows (benchmarks/table.py schema, in
multifidelity-rows.json, with the commit replayed at): mf-t90-* (ASHA / FIFO time to 90%, target <= 0.5) and mf-hv-*
(ASHA's hypervolume >= FIFO's at equal wall time, target 8 of 10 seeds), per grid, stopped trials told PRUNED.

    python benchmarks/multifidelity.py                # measure the grid (resumable), then replay; ~25-40 min busy
    python benchmarks/multifidelity.py --replay-only  # replay the stored grids (multifidelity-grid-{cnn,gan}.json)
    python benchmarks/multifidelity.py --quick        # a 4-config CNN grid, 2 rungs, 3 seeds: a smoke run

Why one module of ~550 lines: measuring the grid, replaying studies on it and judging the rows are one benchmark.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python benchmarks/multifidelity.py` from a checkout
    sys.path.insert(0, str(REPO))

from benchmarks.metrics import Normalizer, hv_fraction, pareto_front_2d  # noqa: E402 - after the path fix above

RESULTS = REPO / "benchmarks" / "results"
QUALITY = {"cnn": "loss", "gan": "fid"}
# Grids: 24 configs each. Precision is left out on this CPU: bf16 is emulated there (about 10x slower), so it
# would only add configs every scheduler stops at once and triple the measuring time.
GRIDS: dict[str, tuple[tuple[str, tuple[Any, ...]], ...]] = {
    "cnn": (("batch_size", (16, 32, 64)), ("accumulation_steps", (1, 2)), ("lr_scale", (0.3, 1.0, 3.0, 10.0))),
    "gan": (("batch_size", (16, 32, 64)), ("accumulation_steps", (1, 2)), ("lr_scale", (0.5, 2.0)),
            ("beta1", (0.5, 0.9))),
}
# Samples per rung (eta 3), sized so both grids are measured in about 30 min on a busy 2-core machine: the GAN
# trains at a third of the CNN's speed there.
RUNGS = {"cnn": [128, 384, 1152], "gan": [64, 192, 576]}
ETA = 3.0
QUICK_GRIDS = {"cnn": (("batch_size", (16, 64)), ("lr_scale", (0.3, 3.0)))}
QUICK_RUNGS = {"cnn": [32, 96]}
# Short measurement windows so the smallest rung still holds timed windows; FID on 500 generated images.
MEASURE = {"ceiling_seconds": 0, "warmup_steps": 1, "warmup_max_steps": 3, "windows": 3, "min_windows": 1,
           "window_min_steps": 1, "window_min_seconds": 0}
FID_SAMPLES = 500
REACH = 0.9


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def grid_space(workload: str, axes: tuple[tuple[str, tuple[Any, ...]], ...], trials: int) -> Any:
    """The grid as a tuner search space (categorical params), validated by tuner's own space parser."""
    from tuner.space import parse_space

    data = {
        "description": f"benchmark grid ({workload}): multi-fidelity tabular benchmark",
        "defaults": {"workload": workload, "dataset": "digits", "budget": {"samples": 1}, "trials": trials},
        "objectives": {workload: [{"metric": "throughput", "direction": "max"},
                                  {"metric": QUALITY[workload], "direction": "min"}]},
        "params": {name: {"type": "categorical", "choices": list(values)} for name, values in axes},
    }
    return parse_space(data, source=f"benchmarks/multifidelity {workload} grid", name=f"mf-{workload}")


# --- 1. measuring the grid -------------------------------------------------------------------------------------


def measure(path: Path, workload: str, axes: tuple[tuple[str, tuple[Any, ...]], ...], rungs: list[int],
            cache_dir: Path) -> dict[str, Any]:
    """Train every config of a grid once per rung budget; rows are written to `path` as they come, and a
    run that was stopped picks up where it left off. Configs run in a shuffled order (drift does not line up
    with an axis); one config's rungs run back to back."""
    from tuner.train import run_trial

    table = json.loads(path.read_text()) if path.exists() else {}
    if table.get("rungs") not in (None, rungs):
        raise SystemExit(f"{path} was measured with rungs {table['rungs']}, not {rungs}: move it away first")
    table.update({"rungs": rungs, "eta": ETA, "unit": "samples", "measure": MEASURE, "fid_samples": FID_SAMPLES,
                  "threads": 1, "seed": 0})
    table.setdefault("started", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    table.update({"workload": workload, "quality": QUALITY[workload], "axes": dict(axes)})
    table.setdefault("rows", [])
    space = grid_space(workload, axes, 1)
    names = [n for n, _ in axes]
    done = {json.dumps(r["params"], sort_keys=True) for r in table["rows"]}
    points = [dict(zip(names, combo)) for combo in itertools.product(*(v for _, v in axes))]
    random.Random(0).shuffle(points)
    for i, p in enumerate(points, 1):
        if json.dumps(p, sort_keys=True) in done:
            continue
        row: dict[str, Any] = {"params": p, "rungs": []}
        for budget in rungs:
            base = {"workload": workload, "dataset": "digits", "budget": {"samples": budget},
                    "params": {"device": "cpu", "threads": 1, "seed": 0}, "measure": MEASURE,
                    "quality": {"fid_samples": FID_SAMPLES}}
            cfg = space.trial_config(p, base, source="grid point")
            t0 = time.perf_counter()
            r = run_trial(cfg, cache_dir=cache_dir, wall_limit_s=600)
            wall = time.perf_counter() - t0
            row["rungs"].append({"budget": budget, "state": r.state, "error": r.error,
                                 "throughput": r.throughput, "quality": r.value(QUALITY[workload]),
                                 "train_seconds": r.get("train_seconds"),
                                 "quality_seconds": r.get("quality_seconds"), "wall_seconds": round(wall, 3)})
            q = row["rungs"][-1]["quality"]
            log(f"{workload} {i}/{len(points)} {p} @ {budget}: {r.state} {r.throughput or 0:.0f} samples/s, "
                f"{QUALITY[workload]} {q if q is not None else float('nan'):.3f}, wall {wall:.1f} s")
        table["rows"].append(row)
        table["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(table, indent=1))
        tmp.replace(path)
    return table


# --- 2. replaying studies on it ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RungRun:
    """One config trained to one rung budget: what a trial would have measured there, and how long it took."""

    ok: bool
    throughput: float | None
    quality: float | None
    train_s: float
    quality_s: float
    wall_s: float

    @property
    def values(self) -> tuple[float, float] | None:
        return (self.throughput, self.quality) if self.ok else None


@dataclass
class Grid:
    """A measured grid: per config (the tuple of its knobs, in `names` order) one RungRun per rung."""

    workload: str
    quality: str
    names: list[str]
    axes: dict[str, list[Any]]
    rungs: list[int]
    eta: float
    rows: dict[tuple[Any, ...], list[RungRun]]
    setup_s: float = 0.0  # a trial's time outside training and scoring (median over every run of the grid)

    @classmethod
    def of(cls, table: dict[str, Any]) -> "Grid":
        names = list(table["axes"])
        rows: dict[tuple[Any, ...], list[RungRun]] = {}
        outside = []
        for r in table["rows"]:
            runs = []
            for x in r["rungs"]:
                ok = (x["state"] == "complete" and x.get("throughput") is not None and x.get("quality") is not None
                      and math.isfinite(x["quality"]))
                wall = float(x.get("wall_seconds") or 0.0)
                train = float(x.get("train_seconds") or wall)
                scoring = float(x.get("quality_seconds") or 0.0)
                runs.append(RungRun(ok, x.get("throughput"), x.get("quality"), train, scoring, wall))
                outside.append(max(0.0, wall - train - scoring))
            rows[tuple(r["params"][n] for n in names)] = runs
        return cls(table["workload"], table["quality"], names, {k: list(v) for k, v in table["axes"].items()},
                   list(table["rungs"]), float(table["eta"]), rows, statistics.median(outside) if outside else 0.0)

    @property
    def top(self) -> int:
        return len(self.rungs) - 1

    def from_rung(self, first: int) -> "Grid":
        """The same measurements with a shorter ladder: rungs `first`.. only (a larger first rung)."""
        return Grid(self.workload, self.quality, self.names, self.axes, self.rungs[first:], self.eta,
                    {k: runs[first:] for k, runs in self.rows.items()}, self.setup_s)

    @property
    def complete(self) -> bool:
        """Every combination of the axes measured."""
        return len(self.rows) == math.prod(len(v) for v in self.axes.values())

    def top_points(self) -> list[tuple[float, float]]:
        return [runs[self.top].values for runs in self.rows.values() if runs[self.top].ok]

    def front_keys(self) -> set[tuple[Any, ...]]:
        """The configs on the top rung's Pareto front (throughput up, quality down): the ones a stop must spare."""
        best = set(pareto_front_2d([(t, -q) for t, q in self.top_points()]))
        return {k for k, runs in self.rows.items() if runs[self.top].ok
                and (runs[self.top].values[0], -runs[self.top].values[1]) in best}

    def cost(self, key: tuple[Any, ...], rung: int, scored: int) -> float:
        """Simulated wall time of a trial that trains to `rung` (it goes on training, it does not restart) and is
        scored at `scored` rungs on the way: its set-up once, the training of the rung's run, each scoring."""
        runs = self.rows[key]
        if scored == 1:
            return self.setup_s + runs[rung].train_s + runs[rung].quality_s
        return self.setup_s + runs[rung].train_s + sum(runs[k].quality_s for k in range(rung + 1))


@dataclass
class Study:
    """One replayed study: when each trial ended and the top-rung point it added to the front (None: none)."""

    mode: str
    ends: list[float] = field(default_factory=list)
    points: list[tuple[float, float] | None] = field(default_factory=list)
    stopped: int = 0
    keys: list[tuple[Any, ...]] = field(default_factory=list)  # each trial's config, in order
    reached: list[int] = field(default_factory=list)  # the rung each trial trained to

    def hv_at(self, t: float, norm: Normalizer, full: list[tuple[float, float]]) -> float:
        found = [p for end, p in zip(self.ends, self.points) if end <= t and p is not None]
        return hv_fraction(found, norm, full)

    def time_to(self, target: float, norm: Normalizer, full: list[tuple[float, float]]) -> float | None:
        found: list[tuple[float, float]] = []
        for end, p in zip(self.ends, self.points):
            if p is not None:
                found.append(p)
                if hv_fraction(found, norm, full) >= target:
                    return end
        return None


MODES = ("fifo", "asha-pruned", "asha-values")


def replay(grid: Grid, mode: str, seed: int, trials: int, wall_cap: float,
           enough: Callable[[Study], bool] | None = None) -> Study:
    """One study on the grid until its simulated clock passes `wall_cap`: tuner's sampler proposes (the space's
    define-by-run sample, told with tell_trial as tuner's searcher tells it); under ASHA the real ParetoASHA
    decides at each rung; a stopped trial is told PRUNED ("asha-pruned") or its values at that rung
    ("asha-values"). Trials run one at a time (concurrency 1, as on this 2-core machine). The study ends early
    once `enough(study)` says its figures are known."""
    import optuna

    from tuner.search.toolkit import ParetoASHA, make_sampler, tell_trial

    space = grid_space(grid.workload, tuple((n, tuple(grid.axes[n])) for n in grid.names), trials)
    keys = list(grid.rows)  # a grid whose measurement was cut short: the sampler chooses among measured rows
    objectives = space.objectives_for(grid.workload)
    study = optuna.create_study(directions=[o.direction for o in objectives],
                                sampler=make_sampler("tpe", seed, trials, None))
    scheduler = ParetoASHA(objectives, [float(r) for r in grid.rungs], grid.eta)
    out, clock, n = Study(mode), 0.0, 0
    while clock < wall_cap:
        trial = study.ask()
        if grid.complete:
            params = space.sample(trial, {"gpus": 0})
            key = tuple(params[name] for name in grid.names)
        else:
            key = keys[trial.suggest_categorical("row", list(range(len(keys))))]
        runs = grid.rows[key]
        if mode == "fifo":
            reached, went_on = grid.top, True
            clock += grid.cost(key, grid.top, scored=1)
        else:
            reached, went_on = 0, True
            for k in range(len(grid.rungs)):
                reached = k
                v = runs[k].values
                went_on = scheduler.goes_on_at(str(n), k, v if v is not None else (math.nan, math.nan))
                if not went_on or v is None:
                    break
            clock += grid.cost(key, reached, scored=reached + 1)
        final = runs[reached].values
        if reached == grid.top or final is None:
            tell_trial(study, trial, objectives, list(final) if final is not None else None)
        elif mode == "asha-pruned":
            out.stopped += 1
            trial.set_constraint("tuner_feasible", 0.0)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            out.stopped += 1
            tell_trial(study, trial, objectives, list(final))
        out.ends.append(clock)
        out.points.append(runs[grid.top].values if reached == grid.top else None)
        out.keys.append(key)
        out.reached.append(reached)
        n += 1
        if enough is not None and enough(out):
            break
    return out


@dataclass
class Figures:
    """Per workload: per seed and mode, the time to 90% of the grid's top-rung hypervolume and the hypervolume at
    FIFO's time for `trials` trials."""

    workload: str
    seeds: list[dict[str, Any]]
    trials: int
    wall_cap: float
    grid: dict[str, Any]


def figures(grid: Grid, seeds: int, trials: int, cap_trials: int | None = None) -> Figures:
    full = grid.top_points()
    if not full:
        raise RuntimeError(f"{grid.workload}: no config completed its top rung; nothing to replay")
    norm = Normalizer(full, minimize_second=True)
    front = grid.front_keys()
    fifo_trial = statistics.median(grid.cost(k, grid.top, 1) for k in grid.rows)
    # three grids' worth of FIFO trials: far past where both level off
    wall_cap = fifo_trial * (cap_trials or 3 * len(grid.rows))
    per_seed = []
    for seed in range(seeds):
        row: dict[str, Any] = {"seed": seed}
        def reached(s: Study) -> bool:
            return s.time_to(REACH, norm, full) is not None

        # each study runs until its figures are known: 90% reached, and past FIFO's time for `trials` trials
        fifo = replay(grid, "fifo", seed, trials, wall_cap, lambda s: len(s.ends) >= trials and reached(s))
        t_eq = fifo.ends[min(trials, len(fifo.ends)) - 1]  # FIFO's wall time for `trials` trials
        studies = {"fifo": fifo, **{m: replay(grid, m, seed, trials, wall_cap,
                                              lambda s: s.ends[-1] >= t_eq and reached(s))
                                    for m in MODES if m != "fifo"}}
        row["equal_wall_s"] = t_eq
        for m, s in studies.items():
            t90 = s.time_to(REACH, norm, full)
            upto = [i for i, e in enumerate(s.ends) if t90 is None or e <= t90]  # the trials that ran until 90%
            row[m] = {"t90_s": t90, "hv_at_equal_wall": s.hv_at(t_eq, norm, full), "trials": len(s.ends),
                      "stopped": s.stopped, "trials_by_equal_wall": sum(1 for e in s.ends if e <= t_eq),
                      "trials_to_t90": len(upto), "stopped_to_t90": sum(1 for i in upto if s.reached[i] < grid.top),
                      "front_stopped": sum(1 for k, r in zip(s.keys, s.reached) if r < grid.top and k in front)}
        per_seed.append(row)
        log(f"{grid.workload} seed {seed}: " + "; ".join(
            f"{m} t90={_s(row[m]['t90_s'])} hv@T={row[m]['hv_at_equal_wall']:.3f}" for m in MODES))
    info = {"configs": len(grid.rows), "complete": grid.complete, "rungs": grid.rungs, "eta": grid.eta, "unit": "samples",
            "setup_s": grid.setup_s, "fifo_trial_s": fifo_trial, "front_configs": len(front),
            # what a trial costs under ASHA: scored at every rung when it goes on, its first rung's when stopped
            "survivor_s": statistics.median(grid.cost(k, grid.top, grid.top + 1) for k in grid.rows),
            "stopped_first_s": statistics.median(grid.cost(k, 0, 1) for k in grid.rows),
            "failed_top": sum(1 for r in grid.rows.values() if not r[grid.top].ok),
            "spearman_quality_vs_top": rank_agreement(grid, "quality"),
            "spearman_throughput_vs_top": rank_agreement(grid, "throughput")}
    return Figures(grid.workload, per_seed, trials, wall_cap, info)


def rank_agreement(grid: Grid, what: str) -> list[float | None]:
    """Spearman's rank correlation between each rung's and the top rung's `what` ("throughput" or "quality")
    over the configs that completed both: how much a rung's ranking says about the top rung's."""
    out: list[float | None] = []
    for k in range(len(grid.rungs)):
        pairs = [(getattr(r[k], what), getattr(r[grid.top], what)) for r in grid.rows.values()
                 if r[k].ok and r[grid.top].ok]
        if len(pairs) < 3:
            out.append(None)
            continue
        ra, rb = _ranks([a for a, _ in pairs]), _ranks([b for _, b in pairs])
        ma, mb = statistics.fmean(ra), statistics.fmean(rb)
        cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
        var = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
        out.append(round(cov / var, 3) if var > 0 else None)
    return out


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = (i + j) / 2
        i = j + 1
    return ranks


def _s(t: float | None) -> str:
    return f"{t:.0f}s" if t is not None else "never"


def summarize(f: Figures, asha: str) -> dict[str, Any]:
    """The two targets for one ASHA variant against FIFO: (a) median time to 90% (a study that never got there
    counts as the cap), at most half of FIFO's; (b) ASHA's hypervolume >= FIFO's at equal wall time, in 8 of 10."""
    def t90(m: str) -> list[float]:
        return [r[m]["t90_s"] if r[m]["t90_s"] is not None else f.wall_cap for r in f.seeds]

    ta, tf = statistics.median(t90(asha)), statistics.median(t90("fifo"))
    wins = sum(1 for r in f.seeds if r[asha]["hv_at_equal_wall"] >= r["fifo"]["hv_at_equal_wall"] - 1e-12)
    need = math.ceil(0.8 * len(f.seeds))
    return {"workload": f.workload, "rungs": f.grid["rungs"], "asha": asha, "t90_asha_s": ta, "t90_fifo_s": tf, "t90_ratio": ta / tf,
            "t90_pass": ta <= 0.5 * tf, "never_asha": sum(1 for r in f.seeds if r[asha]["t90_s"] is None),
            "never_fifo": sum(1 for r in f.seeds if r["fifo"]["t90_s"] is None),
            "hv_asha": statistics.median(r[asha]["hv_at_equal_wall"] for r in f.seeds),
            "hv_fifo": statistics.median(r["fifo"]["hv_at_equal_wall"] for r in f.seeds),
            "hv_wins": wins, "seeds": len(f.seeds), "hv_pass": wins >= need,
            "hv_ties": sum(1 for r in f.seeds if abs(r[asha]["hv_at_equal_wall"] - r["fifo"]["hv_at_equal_wall"]) <= 1e-12),
            "stopped_share": sum(r[asha]["stopped"] for r in f.seeds) / max(1, sum(r[asha]["trials"] for r in f.seeds)),
            # why the time to 90% moved: how many trials it took, how many of them stopped, what each costs
            "trials_to_t90": statistics.median(r[asha]["trials_to_t90"] for r in f.seeds),
            "stopped_to_t90": statistics.median(r[asha]["stopped_to_t90"] for r in f.seeds),
            "front_stopped": sum(r[asha]["front_stopped"] for r in f.seeds),
            "front_configs": f.grid["front_configs"], "fifo_trial_s": f.grid["fifo_trial_s"],
            "survivor_s": f.grid["survivor_s"], "stopped_first_s": f.grid["stopped_first_s"]}


def markdown(results: list[dict[str, Any]], figs: list[Figures]) -> str:
    n = figs[0].trials if figs else 0
    lines = ["| grid | rungs (samples) | ASHA variant | time to 90% HV: ASHA / FIFO (median s) | ratio (target <= 0.5) | "
             f"HV at FIFO's {n}-trial wall time: ASHA / FIFO (median) | ASHA >= FIFO (target 8 of 10) | "
             "trials stopped |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        never = f" (not reached: {r['never_asha']} / {r['never_fifo']} seeds)" if r["never_asha"] + r["never_fifo"] else ""
        lines.append(f"| {r['workload']} | {'/'.join(str(b) for b in r['rungs'])} | {r['asha']} | {r['t90_asha_s']:.0f} / {r['t90_fifo_s']:.0f}{never} | "
                     f"{r['t90_ratio']:.3f} {'**pass**' if r['t90_pass'] else '**MISSED**'} | "
                     f"{r['hv_asha']:.3f} / {r['hv_fifo']:.3f} | {r['hv_wins']} of {r['seeds']} "
                     f"{'**pass**' if r['hv_pass'] else '**MISSED**'} | {100 * r['stopped_share']:.0f}% |")
    for f in figs:
        g = f.grid
        lines.append(f"\n{f.workload}: {g['configs']} configs{'' if g['complete'] else ' (measured before the deadline; sampled as rows)'}, rungs {g['rungs']} {g['unit']} (eta {g['eta']:g}), "
                     f"simulated set-up {g['setup_s']:.1f} s per trial, FIFO trial {g['fifo_trial_s']:.1f} s "
                     f"(median), cap {f.wall_cap:.0f} s, {len(f.seeds)} seeds; {g['failed_top']} configs failed at "
                     f"the top rung. Rank agreement with the top rung (Spearman, per rung): quality "
                     f"{g['spearman_quality_vs_top']}, throughput {g['spearman_throughput_vs_top']}.")
    return "\n".join(lines) + "\n"


T90_LIMIT, WINS_SHARE = 0.5, 0.8  # issue 20's targets: ASHA at most half FIFO's time to 90%; HV >= FIFO's in 8 of 10


def rows(results: list[dict[str, Any]], grids: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The published rows (benchmarks/table.py schema) of a replay: per workload, Pareto ASHA with stopped trials
    told PRUNED (how tuner's own scheduler tells Optuna) on the measured ladder, against FIFO. mf-t90-*: the median
    wall time to 90% of the grid's top-rung hypervolume, ASHA / FIFO, target <= 0.5; mf-hv-*: the seeds where ASHA's
    hypervolume at FIFO's wall time for `trials` trials is at least FIFO's, target 8 of 10. The other variant and
    the shorter ladder are in the notes. `grids`: per workload, when its grid was measured (the replay's code is
    this commit's; the grid's training figures are from then)."""
    from benchmarks.table import target

    out: list[dict[str, Any]] = []
    for w in dict.fromkeys(r["workload"] for r in results):
        mine = [r for r in results if r["workload"] == w]
        ladder = max(len(r["rungs"]) for r in mine)
        main = next(r for r in mine if r["asha"] == "asha-pruned" and len(r["rungs"]) == ladder)
        others = "; ".join(f"{r['asha']} on rungs {'/'.join(str(b) for b in r['rungs'])}: time to 90% "
                           f"{r['t90_ratio']:.3f} of FIFO's, HV >= FIFO's in {r['hv_wins']} of {r['seeds']}"
                           for r in mine if r is not main)
        grid = grids.get(w) or {}
        how = (f"Replayed on the {w} grid measured {grid.get('started', '?')} to {grid.get('ended', '?')} "
               f"(benchmarks/results/multifidelity-grid-{w}.json: {grid.get('configs', '?')} configs, rungs "
               f"{'/'.join(str(b) for b in main['rungs'])} samples, trained once each); the sampler and ParetoASHA "
               f"are this commit's, wall time simulated from the grid's times, {main['seeds']} seeds. "
               f"Stopped trials: {100 * main['stopped_share']:.0f}%. Also: {others or '-'}.")
        details = {"summary": mine, "grid": grid, "variant": "asha-pruned"}
        never = (f" (never reached 90%: ASHA {main['never_asha']}, FIFO {main['never_fifo']} seeds, counted at the "
                 f"cap)" if main["never_asha"] + main["never_fifo"] else "")
        why = ""
        if "trials_to_t90" in main:
            why = (f" Why: the sampler reached 90% after a median of {main['trials_to_t90']:g} trials, "
                   f"{main['stopped_to_t90']:g} of them stopped; ASHA stopped a config of the grid's top-rung front "
                   f"({main['front_configs']} configs) {main['front_stopped']} times over every seed. A stopped trial "
                   f"cost {main['stopped_first_s']:.1f} s at the first rung against FIFO's {main['fifo_trial_s']:.1f} s, "
                   f"but one that goes on is scored at every rung: {main['survivor_s']:.1f} s (medians over the "
                   f"grid's configs). Where the front is found in a few trials and most of them go on, the scorings "
                   f"outweigh the stops.")
        out.append({
            "id": f"mf-t90-{w}", "benchmark": "multifidelity",
            "name": f"{w} grid: ASHA vs FIFO, wall time to 90% of the top-rung hypervolume (median over seeds)",
            "figure": main["t90_asha_s"], "unit": "s", "baseline": main["t90_fifo_s"], "ratio": main["t90_ratio"],
            "target": target(f"ratio <= {T90_LIMIT:g} (ASHA at most half FIFO's time)",
                             ("ratio", "<=", T90_LIMIT)).to_json(),
            "note": f"Median simulated wall time to 90% of the grid's top-rung hypervolume{never}.{why} {how}",
            "details": details})
        need = math.ceil(WINS_SHARE * main["seeds"])
        out.append({
            "id": f"mf-hv-{w}", "benchmark": "multifidelity",
            "name": f"{w} grid: seeds where ASHA's hypervolume >= FIFO's at FIFO's wall time for its trials",
            "figure": float(main["hv_wins"]), "unit": "seeds", "baseline": float(main["seeds"]),
            "ratio": main["hv_wins"] / main["seeds"],
            "target": target(f"ratio >= {WINS_SHARE:g} ({need} of {main['seeds']} seeds)",
                             ("ratio", ">=", WINS_SHARE)).to_json(),
            "note": (f"Hypervolume (share of the grid's top-rung front) at FIFO's wall time for its trials, median "
                     f"ASHA {main['hv_asha']:.3f} vs FIFO {main['hv_fifo']:.3f}; equal in {main.get('hv_ties', '?')} "
                     f"of the {main['hv_wins']} seeds counted (both had found the same front by then). {how}"),
            "details": details})
    return out


def write_rows(found: list[dict[str, Any]], path: Path) -> None:
    """Into the committed rows file, with the commit they were replayed at; a workload not replayed keeps its rows."""
    import datetime as dt

    from benchmarks.common import _loadavg, cpu_model, git_state
    from benchmarks.table import SCHEMA
    from tuner.files import json_safe

    commit, dirty = git_state()
    date = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    for r in found:
        r.update({"commit": commit, "dirty": dirty, "date": date, "load": _loadavg() or [],
                  "machine": f"{cpu_model()} (replay of a measured grid: a simulation, no training)"})
    kept = json.loads(path.read_text()).get("rows", []) if path.exists() else []
    new = {r["id"] for r in found}
    doc = {"schema": SCHEMA, "rows": found + [r for r in kept if r.get("id") not in new]}
    path.write_text(json.dumps(json_safe(doc), indent=1) + "\n")


def replay_main(paths: dict[str, Path], out: Path, *, quick: bool, seeds: int | None = None,
                trials: int | None = None, cap_trials: int | None = None) -> int:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    seeds = seeds or (3 if quick else 10)
    trials = trials or (4 if quick else 12)
    figs, results, grids = [], [], {}
    for w, path in paths.items():
        table = json.loads(path.read_text())
        measured = Grid.of(table)
        grids[w] = {"started": table.get("started"), "ended": table.get("ended"), "configs": len(measured.rows),
                    "rungs": measured.rungs}
        # the measured ladder, and (with 3+ rungs) the same without its first rung: is the first rung too early?
        for grid in [measured] + ([measured.from_rung(1)] if len(measured.rungs) > 2 else []):
            f = figures(grid, seeds, trials, cap_trials)
            figs.append(f)
            results.extend(summarize(f, m) for m in MODES if m != "fifo")
    text = markdown(results, figs)
    name = "multifidelity-" + "-".join(paths) + ("-quick" if quick else "")  # one file per replay run
    (out / f"{name}.json").write_text(json.dumps({"summary": results, "figures": [f.__dict__ for f in figs]},
                                                 indent=1))
    (out / f"{name}.md").write_text(text)
    if not quick:  # the published rows: benchmarks/table.py shows them
        write_rows(rows(results, grids), out / "multifidelity-rows.json")
    print(text)
    return 0


def grid_path(out: Path, workload: str, quick: bool) -> Path:
    return out / f"multifidelity-grid-{workload}{'-quick' if quick else ''}.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a 4-config CNN grid, 2 rungs, 3 seeds (a smoke run)")
    ap.add_argument("--workload", choices=sorted(GRIDS), action="append", help="only this grid (repeatable)")
    ap.add_argument("--measure-only", action="store_true", help="measure the grid, do not replay")
    ap.add_argument("--replay-only", action="store_true", help="replay the stored grid, do not measure")
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder of the grid and the figures")
    ap.add_argument("--cache", type=Path, default=REPO / "reports" / "benchmarks" / "work" / ".cache",
                    help="datasets and FID cache (shared with benchmarks/run.py)")
    args = ap.parse_args(argv)
    grids, rungs = (QUICK_GRIDS, QUICK_RUNGS) if args.quick else (GRIDS, RUNGS)
    workloads = [w for w in grids if not args.workload or w in args.workload]
    if not args.replay_only:
        for w in workloads:
            measure(grid_path(args.out, w, args.quick), w, grids[w], rungs[w], args.cache)
    if args.measure_only:
        return 0
    return replay_main({w: grid_path(args.out, w, args.quick) for w in workloads}, args.out, quick=args.quick)


if __name__ == "__main__":
    sys.exit(main())
