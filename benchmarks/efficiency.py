"""Benchmark 3, search efficiency: does the tuner's sampler find good configs in few trials?

A small discrete space (batch size x loader workers x precision, CNN on digits) is measured exhaustively once with
tuner's own engine (its fastest points read three times, the median kept: `settle_top`), then searched many times
as a *tabular benchmark* (the method of HPOBench / NAS-Bench): the tuner's sampler (built by
`tuner.search.toolkit.make_sampler`, the same construction `tuner search` uses, asked through the same define-by-run
`Space.sample` and told the same way as its searcher: two objective values plus a feasibility constraint) proposes
configs, and each proposal is answered with the grid's measured values. This isolates the search from measurement
noise and lets one grid serve many seeds. Ray is not involved: it only schedules trials and has no say in which
config comes next.

Three figures, over several seeds, against Optuna's RandomSampler asked the same way or today's search:
  - trials until a proposal reaches >= 95% of the grid's best throughput (target: <= 25% of the grid);
  - the same with the loader knobs decided by probes (tuner.search.toolkit.run_probes, measured for real on this
    machine): the sampler searches batch size x precision only and each proposal takes the loader the probes chose
    for its batch size (target: fewer full trials than today's search, and <= 25% of the grid);
  - Pareto hypervolume (throughput up, validation loss down) after L trials, as a fraction of the whole grid's
    (target: >= random's in most seeds).
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from benchmarks.common import BenchResult, Context, median
from benchmarks.metrics import Normalizer, hv_fraction, trials_to_reach
from benchmarks.table import target

TARGET_T95 = "<= 25% of the grid"
TARGET_HV = ">= random's in most seeds"
REACH = 0.95
GRID_TOP = {"full": 4, "quick": 2}  # the grid's fastest points read again (settle_top) ...
GRID_TOP_REREADS = {"full": 2, "quick": 1}  # ... this many more times each


def grid_space(axes: tuple[tuple[str, tuple[Any, ...]], ...], budget_s: float, trials: int) -> Any:
    """The grid as a tuner search space (categorical params), validated by tuner's own space parser."""
    from tuner.space import parse_space

    params: dict[str, Any] = {}
    for name, values in axes:
        params[name] = {"type": "categorical", "choices": list(values)}
    data = {
        "description": "benchmark grid: batch size x loader workers x precision (tabular search benchmark)",
        "defaults": {"workload": "cnn", "dataset": "digits", "budget": {"seconds": budget_s}, "trials": trials},
        "objectives": {"cnn": [{"metric": "throughput", "direction": "max"},
                               {"metric": "loss", "direction": "min"}]},
        "params": params,
    }
    return parse_space(data, source="benchmarks/efficiency grid", name="efficiency-grid")


def key_of(params: dict[str, Any], names: list[str]) -> tuple[Any, ...]:
    return tuple(params[n] for n in names)


def measure_grid(ctx: Context, space: Any) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Every grid point once through tuner's engine, in a shuffled order (so drift does not line up with an
    axis), then the fastest points read again (`settle_top`). Returns {key: {"throughput", "loss", "state",
    "readings"}}."""
    s = ctx.settings
    names = [n for n, _ in s.grid_axes]
    points = [dict(zip(names, combo)) for combo in itertools.product(*(v for _, v in s.grid_axes))]
    random.Random(0).shuffle(points)
    table: dict[tuple[Any, ...], dict[str, Any]] = {}
    for i, p in enumerate(points, 1):
        row = read_point(ctx, space, p)
        table[key_of(p, names)] = {**row, "readings": [row["throughput"]] if feasible(row) else []}
        ctx.log(f"  grid {i}/{len(points)} {p}: {row['state']} {row['throughput'] or 0:.1f} samples/s, "
                f"loss {row['loss'] if row['loss'] is not None else float('nan'):.3f}")
    settle_top(ctx, space, table, names)
    return table


def read_point(ctx: Context, space: Any, point: dict[str, Any]) -> dict[str, Any]:
    """One full trial of a grid point through tuner's engine (run_trial, as `tuner train` runs it)."""
    from tuner.train import run_trial

    s = ctx.settings
    base = {"workload": "cnn", "dataset": "digits", "budget": {"seconds": s.grid_budget_s},
            "params": {"device": "auto"}}
    cfg = space.trial_config(point, base, source="grid point")
    r = run_trial(cfg, cache_dir=ctx.cache_dir, wall_limit_s=max(2 * s.grid_budget_s, s.grid_budget_s + 10))
    return {"state": r.state, "throughput": r.throughput, "loss": r.value("loss"), "error": r.error,
            "capped": r.capped}


def settle_top(ctx: Context, space: Any, table: dict[tuple[Any, ...], dict[str, Any]], names: list[str]) -> None:
    """Read the grid's fastest points GRID_TOP_REREADS more times, interleaved (one round visits each once), and
    answer them with the median of their readings: the best of 24 single readings is the one most likely to have
    read high (1959 samples/s against 1549 for the same point the run before, 2026-11-30), and a lone high best
    leaves 1 of 24 points within 5% of it, so the trials-to-95% rows measured the lottery of that one reading
    rather than the search. Repeated until the fastest GRID_TOP by their current figure have all been read again
    (a point a re-read drops below one read once brings that one in), at most twice GRID_TOP points."""
    top, rereads = GRID_TOP[ctx.settings.mode], GRID_TOP_REREADS[ctx.settings.mode]
    settled: set[tuple[Any, ...]] = set()
    while len(settled) < 2 * top:
        ranked = sorted((k for k, v in table.items() if feasible(v)), key=lambda k: -table[k]["throughput"])
        todo = [k for k in ranked[:top] if k not in settled][:2 * top - len(settled)]
        if not todo:
            break
        for rnd in range(rereads):
            for k in todo if rnd % 2 == 0 else reversed(todo):  # alternate the order: no point always first
                row = read_point(ctx, space, dict(zip(names, k)))
                if feasible(row):
                    table[k]["readings"].append(row["throughput"])
                    table[k].setdefault("losses", [table[k]["loss"]]).append(row["loss"])
        for k in todo:
            v = table[k]
            v["throughput"] = median(v["readings"])
            v["loss"] = median(v.get("losses", [v["loss"]]))
            settled.add(k)
            ctx.log(f"  grid top {dict(zip(names, k))}: readings {[round(x) for x in v['readings']]} -> median "
                    f"{v['throughput']:.0f} samples/s")


def feasible(row: dict[str, Any]) -> bool:
    return row["state"] == "complete" and row["throughput"] is not None and row["loss"] is not None


def search_once(space: Any, table: dict[tuple[Any, ...], dict[str, Any]], sampler: Any, trials: int,
                baseline: dict[str, Any] | None = None, plan: Any = None) -> list[dict]:
    """One tabular search: ask the sampler `trials` times through the space, answer from the table, tell it back
    exactly as tuner's StudySearcher does (values + constraint; penalties for an infeasible point). `baseline` is
    enqueued first, as `tuner search` enqueues its trial 0 (tuner's default knobs). With a loader `plan` (the
    probes'), the sampler draws the other params only and each proposal takes the plan's loader for its batch
    size, as a study's searcher does; the baseline keeps its own. A draw that repeats a trial's config is drawn
    anew (tuner.search.toolkit.twin_of), as in `tuner search`."""
    import optuna
    from optuna.trial import TrialState

    from tuner.search.toolkit import redraws_for, tell_trial, twin_of

    objectives = space.objectives_for("cnn")
    names = [n for n, _ in space.params.items() if not space.params[n].fixed]
    study = optuna.create_study(directions=[o.direction for o in objectives], sampler=sampler)
    if baseline:
        study.enqueue_trial(baseline)
    out = []
    redraws = redraws_for(space, {"gpus": 0}, plan, trials)  # none where the grid holds no more configs than trials
    for i in range(trials):
        for draw in range(redraws + 1):  # a draw repeating a trial's config is drawn anew, as the searcher does
            trial = study.ask()
            params = space.sample(trial, {"gpus": 0}, skip=plan.knobs if plan is not None else ())
            if draw == redraws or twin_of(study, trial, plan) is None:
                break
            study.tell(trial, state=TrialState.FAIL)
        if plan is not None:
            params.update({k: baseline[k] for k in plan.knobs} if (baseline and i == 0)
                          else plan.loader_for(params.get("batch_size")))
        row = table[key_of(params, names)]
        ok = feasible(row)
        tell_trial(study, trial, objectives, [float(row[o.metric]) for o in objectives] if ok else None)
        out.append({"params": params, **row})
    return out


def probe_plan(ctx: Context, space: Any) -> Any:
    """The loader plan a study would make for this grid: tuner's own probes (tuner.search.toolkit.run_probes), in
    this process, on this machine."""
    from tuner.search.toolkit import run_probes

    s = ctx.settings
    base = {"workload": "cnn", "dataset": "digits", "budget": {"seconds": s.grid_budget_s},
            "params": {"device": "auto"}}

    def show(choice: Any) -> None:
        ctx.log(f"  probe batch {choice.batch_size}: compute {choice.compute_ceiling or 0:.0f} samples/s, inputs "
                f"{[round(p.input_ceiling or 0) for p in choice.probes]} -> {choice.loader}")

    return run_probes(space, {"gpus": 0}, base, ["num_workers"], None, None, ctx.cache_dir,
                      seconds=s.probe_seconds, on_batch=show)


def run(ctx: Context) -> list[BenchResult]:
    import optuna

    from tuner.search.toolkit import make_sampler

    s = ctx.settings
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = grid_space(s.grid_axes, s.grid_budget_s, s.search_trials)
    table = measure_grid(ctx, space)
    good = {k: v for k, v in table.items() if feasible(v)}
    if not good:
        raise RuntimeError("no grid point completed; nothing to search")
    best_thr = max(v["throughput"] for v in good.values())
    full = [(v["throughput"], v["loss"]) for v in good.values()]
    norm = Normalizer(full, minimize_second=True)
    n, length = s.grid_size, s.search_trials
    horizon = n  # trials-to-95% is followed up to the grid's size (a repeated point is drawn anew: twin_of)

    # `tuner search` runs its default knobs as trial 0 when the space allows it (space.defaults.baseline).
    baseline = space.baseline_point({"gpus": 0}) if getattr(space.defaults, "baseline", False) else None
    plan = probe_plan(ctx, space)
    per_seed = []
    for seed in range(s.search_seeds):
        row: dict[str, Any] = {"seed": seed}
        for name in ("tuner", "random"):
            # The study length the sampler is built for is L (what a user would ask for), as in `tuner search`.
            sampler = make_sampler("tpe" if name == "tuner" else "random", seed, length, None)
            hist = search_once(space, table, sampler, horizon, baseline if name == "tuner" else None)
            thr = [h["throughput"] if feasible(h) else None for h in hist]
            row[f"{name}_t95"] = trials_to_reach(thr, REACH * best_thr)
            found = [(h["throughput"], h["loss"]) for h in hist[:length] if feasible(h)]
            row[f"{name}_hv"] = hv_fraction(found, norm, full)
            row[f"{name}_distinct_in_L"] = len({tuple(sorted(h["params"].items())) for h in hist[:length]})
        hist = search_once(space, table, make_sampler("tpe", seed, length, None), horizon, baseline, plan)
        row["probed_t95"] = trials_to_reach([h["throughput"] if feasible(h) else None for h in hist],
                                            REACH * best_thr)
        per_seed.append(row)
        ctx.log(f"  search seed {seed}: tuner t95={row['tuner_t95']} hv={row['tuner_hv']:.3f} | "
                f"random t95={row['random_t95']} hv={row['random_hv']:.3f}")

    def t95_value(v: int | None) -> float:
        return float(v) if v is not None else float(horizon + 1)  # not reached within the horizon

    t95 = median(t95_value(r["tuner_t95"]) for r in per_seed)
    t95_random = median(t95_value(r["random_t95"]) for r in per_seed)
    frac = t95 / n if t95 is not None else None
    near = sum(1 for v in good.values() if v["throughput"] >= REACH * best_thr)
    t95_pass = frac is not None and frac <= 0.25
    axes = " x ".join(f"{a}{list(v)}" for a, v in s.grid_axes)
    reread = len([v for v in table.values() if len(v.get("readings", [])) > 1])
    note_t95 = (f"Search efficiency, tabular: a {n}-point grid ({axes}, "
                f"cnn on digits, {s.grid_budget_s:g} s per point) measured once with tuner's engine, its fastest "
                f"points ({reread}) read {GRID_TOP_REREADS[s.mode]} more times, interleaved, and answered with the "
                f"median; the tuner's TPE sampler (make_sampler, as `tuner search` builds it for {length} trials) is "
                f"then answered from that table, as in HPOBench/NAS-Bench, over {s.search_seeds} seeds. Figure = "
                f"median trials until a proposal reaches >= 95% of the grid's best throughput ({best_thr:.0f} "
                f"samples/s; {near} of {n} points reach 95% of it; a search that never gets there counts as "
                f"{horizon + 1}); baseline = grid size. The tuner's trial 0 is its default knobs {baseline or 'none'} "
                f"as in `tuner search`; plain random search with the same seeds needs {t95_random:g} (median).")
    if not t95_pass:
        chance = (n + 1) / (near + 1)
        note_t95 += (f" Missed: {near} of {n} points are within 5% of the best (drawing without repeats, "
                     f"random search needs {chance:.1f} trials on average), TPE's first "
                     f"{max(3, min(10, length // 3))} trials (trial 0 included) are start-up trials its model does not "
                     f"choose, and it weighs loss against throughput rather than chasing throughput alone.")
    wins = sum(1 for r in per_seed if r["tuner_hv"] >= r["random_hv"] - 1e-12)
    hv_t = median(r["tuner_hv"] for r in per_seed)
    hv_r = median(r["random_hv"] for r in per_seed)
    hv_pass = wins > len(per_seed) / 2
    note_hv = (f"Hypervolume (throughput up, val loss down; each normalised over the grid, reference 10% beyond "
               f"the grid's worst) of the first {length} trials as a fraction of the whole grid's; figure = "
               f"median for the tuner, baseline = median for random search at the same n; tuner >= random in "
               f"{wins} of {len(per_seed)} seeds.")
    if not hv_pass:
        note_hv += (f" Missed: with only {length} trials on a {n}-point grid, TPE's first "
                    f"{max(3, min(10, length // 3))} are start-up trials, leaving little room to beat random search.")
    details = {"grid": [{**dict(zip([a for a, _ in s.grid_axes], k)), **v} for k, v in table.items()],
               "seeds": per_seed, "grid_best_throughput": best_thr, "trials_L": length, "horizon": horizon,
               "tuner_trial_0": baseline}
    t95_probed = median(t95_value(r["probed_t95"]) for r in per_seed)
    probe_trials = plan.seconds / s.grid_budget_s  # the probes' wall time in grid trials of training
    probed_pass = t95_probed is not None and t95 is not None and t95_probed < t95 and t95_probed / n <= 0.25
    chosen = "; ".join(f"batch {c.batch_size}: {c.loader}" for c in plan.choices)
    reachable = {k: v for k, v in table.items() if feasible(v)
                 and v["throughput"] >= REACH * best_thr and plan.loader_for(k[0]) == {"num_workers": k[1]}}
    note_probed = (f"Probe-first search on the same grid and seeds: tuner's probes (tuner.search.toolkit.run_probes, "
                   f"{s.probe_seconds:g} s per ceiling) measured the compute ceiling and the input ceiling of "
                   f"num_workers {[p.loader.get('num_workers') for p in plan.choices[0].probes]} "
                   f"at batch sizes {[c.batch_size for c in plan.choices]} in {plan.seconds:.1f} s "
                   f"({probe_trials:.1f} grid trials of training time) and chose {chosen}; the TPE sampler then "
                   f"searched batch size x precision with those loaders (trial 0 still the defaults). Figure = median "
                   f"full trials until >= 95% of the grid's best; baseline = today's search ({t95:g}). "
                   f"{len(reachable)} of the {near} points within 5% of the best are reachable with the chosen loaders.")
    if not probed_pass:
        note_probed += (" Missed: " + ("the chosen loaders exclude every point within 5% of the best (the probes' "
                                       "rule chose a loader that is not the fastest end to end here)" if not reachable
                                       else "the smaller space did not shorten TPE's start-up enough on this grid"))
    return [
        BenchResult(name="probe-first: trials to reach 95% of best throughput", benchmark="efficiency",
                    figure=t95_probed, unit="trials", baseline=t95, ratio=(t95_probed / n) if t95_probed else None,
                    target="fewer than today's search and <= 25% of the grid", pass_=probed_pass, note=note_probed,
                    row="5", rule=target("fewer trials than today's search and <= 25% of the grid",
                                         ("details.trials_saved", ">", 0), ("ratio", "<=", 0.25)),
                    details={"trials_saved": (t95 - t95_probed) if t95 is not None and t95_probed is not None
                             else None, "plan": plan.model_dump(), "probe_trial_equivalents": probe_trials,
                             "seeds": [{"seed": r["seed"], "probed_t95": r["probed_t95"], "tuner_t95": r["tuner_t95"]}
                                       for r in per_seed]}),
        BenchResult(name="trials to reach 95% of best throughput", benchmark="efficiency", figure=t95,
                    unit="trials", baseline=float(n), ratio=frac, target=TARGET_T95, pass_=t95_pass,
                    note=note_t95, details=details, row="6", rule=target(TARGET_T95, ("ratio", "<=", 0.25))),
        BenchResult(name=f"hypervolume after {length} trials", benchmark="efficiency", figure=hv_t, unit="",
                    baseline=hv_r, ratio=(hv_t / hv_r) if hv_t is not None and hv_r else None, target=TARGET_HV,
                    pass_=hv_pass, note=note_hv, row="7", rule=target(TARGET_HV, ("details.win_share", ">", 0.5)),
                    details={"wins": wins, "seeds": len(per_seed),
                             "win_share": wins / len(per_seed) if per_seed else None}),
    ]
