"""Benchmark 4, delivered speedup: the config `tuner export` writes vs the textbook default users copy.

The default study of benchmark 1 (`tuner search --space amp_loader`; a short CNN study in --quick mode) is
exported exactly as `tuner export` does (knee of the Pareto front, written to best.yaml and read back), then the
exported config and the textbook default (batch 64, num_workers 4, prefetch_factor 2, fp32, accumulation 1, Adam
betas 0.5/0.999, lr 2e-4) are trained on the same workload with the same budget, interleaved, several times each,
with tuner's engine. Reported: the throughput ratio and both quality figures side by side, whatever they are.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from benchmarks.common import BenchResult, Context, median

TEXTBOOK = {"batch_size": 64, "num_workers": 4, "prefetch_factor": 2, "precision": "fp32", "accumulation_steps": 1,
            "beta1": 0.5, "beta2": 0.999, "lr": 2e-4, "persistent_workers": False, "pin_memory": False}
QUALITY_SLACK = 0.10  # quality may be this much worse (relative) and still count as "not worse": run-to-run noise
TARGET = f"ratio > 1, quality within {QUALITY_SLACK:.0%} of the default's"


def textbook_config(exported: Any) -> Any:
    """The exported config with its params replaced by the textbook default (same workload, data, budget,
    measurement and quality settings, device and seed)."""
    from tuner.config import Params

    cfg = exported.model_copy(deep=True)
    cfg.params = Params(**TEXTBOOK, seed=exported.params.seed, device=exported.params.device)
    cfg.provenance = None
    return cfg


def describe(params: Any) -> str:
    p = params
    loader = f"nw{p.num_workers}" + (f" pf{p.prefetch_factor}" if p.prefetch_factor else "") + \
        (" persistent" if p.persistent_workers else "")
    return (f"batch {p.batch_size} x acc {p.accumulation_steps}, {loader}, {p.precision}, "
            f"betas {p.beta1:.2f}/{p.beta2:.4f}")


def export_best(ctx: Context) -> tuple[Any, dict[str, Any]]:
    """Run (or reuse) the default study and export its best config the way `tuner export` does."""
    from benchmarks.overhead import run_default_study
    from tuner.config import load_config
    from tuner.report.export import build_export, write_export
    from tuner.study import open_study

    d = run_default_study(ctx)
    study = open_study(d["reports_dir"], d["study"])
    exp = build_export(study)  # --pick knee, the default
    path = write_export(study, exp)
    baseline_trial = (study.meta.baseline or {}).get("trial")
    done = [r.to_json() for r in study.records if r.complete and r.throughput is not None]
    fastest = max(done, key=lambda r: r["throughput"]) if done else {}
    precisions: dict[str, int] = {}
    for r in study.records:
        prec = r.params.get("precision", "fp32")
        precisions[prec] = precisions.get(prec, 0) + 1
    return load_config(path), {"study": d["study"], "trial": exp.record.trial, "path": str(path),
                               "recorded_throughput": exp.record.throughput,
                               "study_fastest_throughput": fastest.get("throughput"),
                               "study_fastest_trial": fastest.get("trial"), "study_precisions": precisions,
                               "study_trials": len(study.records),
                               "is_baseline_trial": baseline_trial is not None
                               and baseline_trial == exp.record.trial}


def run(ctx: Context) -> list[BenchResult]:
    from tuner.search.toolkit import wall_limit
    from tuner.train import run_trial

    s = ctx.settings
    exported, info = export_best(ctx)
    textbook = textbook_config(exported)
    metric = "fid" if exported.workload == "gan" else "loss"
    budget = exported.budget
    wall = wall_limit(budget, [])  # the cap `tuner search` puts on a trial of this budget
    runs: dict[str, list[dict[str, Any]]] = {"exported": [], "textbook": []}
    pair_s: list[float] = []
    for rep in range(s.speedup_repeats):
        if rep >= 2 and ctx.elapsed() + max(pair_s) > s.deadline_s:
            ctx.log(f"  speedup: stopping after {rep} repeats to end within {s.deadline_s / 60:.1f} min")
            break
        t_pair = time.perf_counter()
        order = ("exported", "textbook") if rep % 2 == 0 else ("textbook", "exported")
        for name in order:
            cfg = exported if name == "exported" else textbook
            with warnings.catch_warnings():  # torch warns that 4 workers exceed 2 cores: that is the point
                warnings.filterwarnings("ignore", message=".*worker processes in total.*")
                r = run_trial(cfg, cache_dir=ctx.cache_dir, wall_limit_s=wall)
            runs[name].append({"state": r.state, "throughput": r.throughput, metric: r.value(metric),
                               "samples": r.get("samples"), "error": r.error})
            q = r.value(metric)
            ctx.log(f"  speedup rep {rep + 1}/{s.speedup_repeats} {name}: {r.state} "
                    f"{r.throughput or 0:.1f} samples/s, {metric} {q if q is not None else float('nan'):.4g}")
        pair_s.append(time.perf_counter() - t_pair)

    def med(name: str, key: str) -> float | None:
        return median(x[key] for x in runs[name] if x["state"] == "complete" and x[key] is not None)

    thr_e, thr_t = med("exported", "throughput"), med("textbook", "throughput")
    q_e, q_t = med("exported", metric), med("textbook", metric)
    ratio = thr_e / thr_t if thr_e is not None and thr_t else None
    quality_ok = q_e is not None and q_t is not None and q_e <= q_t * (1 + QUALITY_SLACK)
    passed = ratio is not None and ratio > 1 and quality_ok
    budget_text = f"{budget.seconds:g} s" if budget.seconds else f"{budget.samples} samples"
    note = (f"Delivered speedup: config exported (knee pick) from study {info['study']} trial {info['trial']} "
            f"[{describe(exported.params)}] vs the textbook default [{describe(textbook.params)}], "
            f"{exported.workload} on {exported.dataset or 'its default dataset'}, {budget_text} each, {len(pair_s)} interleaved runs "
            f"each, medians."
            + (" The exported trial is the study's trial 0 (tuner's default knobs), chosen by the knee rule over "
               "the sampled trials."
               if info.get("is_baseline_trial") else "")
            + f" Quality side by side: {metric} {q_e if q_e is not None else float('nan'):.4g} "
            f"(exported) vs {q_t if q_t is not None else float('nan'):.4g} (textbook), lower is better; with a "
            f"time budget the faster config also trains on more samples.")
    if not passed:
        if ratio is not None and ratio <= 1:
            rec, top = info.get("recorded_throughput"), info.get("study_fastest_throughput")
            mix = ", ".join(f"{n} {p}" for p, n in sorted(info["study_precisions"].items()))
            why = (f"the exported config is {ratio:.2f}x the default's speed (its study trial recorded "
                   f"{rec if rec is not None else float('nan'):.0f} samples/s, {thr_e or 0:.0f} now; the study's "
                   f"fastest trial recorded {top if top is not None else float('nan'):.0f}, the default measures "
                   f"{thr_t or 0:.0f} here). The study's {info['study_trials']} trials used {mix}")
            if top is not None and thr_t and top < thr_t:
                why += ": no trial of the study came near the textbook default, so no pick from it could"
        elif not quality_ok:
            why = f"its {metric} is more than {QUALITY_SLACK:.0%} worse than the default's"
        else:
            why = "a side did not complete"
        note += f" Missed: {why}."
    return [BenchResult(name="exported vs textbook default", benchmark="speedup", figure=thr_e, unit="samples/s",
                        baseline=thr_t, ratio=ratio, target=TARGET, pass_=passed, note=note,
                        details={"export": info, "exported_params": exported.params.model_dump(),
                                 "textbook_params": textbook.params.model_dump(), "runs": runs, "metric": metric,
                                 "quality_exported": q_e, "quality_textbook": q_t})]
