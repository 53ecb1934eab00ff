"""Benchmark 5, ceilings: how far the default study's best config is from what this hardware allows.

Reads the default study (the one benchmark 1 runs as a user runs `tuner search --space amp_loader`; run here if
the overhead benchmark did not). The confirmed trials (the knee among them) carry their compute ceiling (the
model fed one batch already on the device) and input ceiling (the DataLoader alone), measured in their re-runs;
other trials only where they share knobs with those (the study's ceiling cache); the loader probes add input
ceilings of their own. Two figures for the config `tuner export` picks (the knee): its throughput over its own compute
ceiling, and over the best input ceiling the study found at any batch size. Neither has a pass mark in itself:
they say where the remaining speed is (the model, the loader, or between them), which is what the verdict
sentence of every trial says too. Their target is the ceilings' own honesty: a ceiling is an upper bound, so the
config must not run faster than it beyond the noise (ratio <= 1.1); a ceiling read below what the config achieves
is a measurement that is wrong, and the verdict built on it would be too.
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import BenchResult, Context
from benchmarks.table import target

TARGET = "ratio <= 1.1: the ceiling bounds the config (within 10% noise)"
BOUND = 1.1
HISTORY = [{"was": "reported: where the remaining speed is",
            "why": "it passed whenever both numbers existed; a ceiling must bound what the config achieves, which "
                   "can fail"}]


def _best_input(study: Any) -> tuple[float | None, str]:
    """The highest input ceiling found in the study: trials and loader probes."""
    best, where = None, ""
    for r in study.records:
        v = r.value("input_ceiling")
        if v is not None and (best is None or v > best):
            best, where = v, f"trial {r.trial}"
    plan = study.loader_plan()
    if plan is not None:
        for c in plan.choices:
            for p in c.probes:
                if p.input_ceiling is not None and (best is None or p.input_ceiling > best):
                    best, where = p.input_ceiling, f"probe at batch {c.batch_size} with {p.loader}"
    return best, where


def run(ctx: Context) -> list[BenchResult]:
    from benchmarks.overhead import run_default_study
    from tuner.report.export import build_export
    from tuner.analysis import open_study

    d = run_default_study(ctx)
    study = open_study(d["reports_dir"], d["study"])
    pick = build_export(study).record
    # as read (its re-runs' centre), like its ceilings: Study.value rescales a figure by the baseline's drift between
    # rounds, to rank trials, not to set one against its own ceiling
    fig = pick.confirmed.figures.get("throughput") if pick.confirmed is not None else None
    thr = fig.centre if fig is not None else pick.throughput
    compute = pick.value("compute_ceiling")
    best_input, where = _best_input(study)
    with_ceilings = sum(1 for r in study.records if r.complete and r.value("compute_ceiling") is not None
                        and r.value("input_ceiling") is not None)
    complete = sum(1 for r in study.records if r.complete)
    detail = {"study": d["study"], "trial": pick.trial, "throughput": thr, "compute_ceiling": compute,
              "input_ceiling": pick.value("input_ceiling"), "best_input_ceiling": best_input,
              "best_input_where": where, "bound": pick.get("bound"), "headroom": pick.get("headroom"),
              "trials_with_both_ceilings": with_ceilings, "complete_trials": complete}
    common = (f"Default study {d['study']}: the knee pick, trial {pick.trial} ({thr or 0:.0f} samples/s"
              f"{', confirmed' if pick.confirmed is not None else ''}); {with_ceilings} of {complete} complete "
              f"trials carry both ceilings. Its verdict: {pick.get('headroom') or 'none'}.")
    return [
        BenchResult(name="best config vs its compute ceiling", benchmark="ceilings",
                    figure=thr, unit="samples/s", baseline=compute,
                    ratio=(thr / compute) if thr and compute else None, target=TARGET,
                    pass_=thr is not None and compute is not None, row="11",
                    rule=target(TARGET, ("ratio", "<=", BOUND)), target_history=HISTORY,
                    note=common + " Baseline = its compute ceiling (the same model, batch and precision fed one "
                                  "batch already on the device).", details=detail),
        BenchResult(name="best config vs the best input ceiling found", benchmark="ceilings",
                    figure=thr, unit="samples/s", baseline=best_input,
                    ratio=(thr / best_input) if thr and best_input else None, target=TARGET,
                    pass_=thr is not None and best_input is not None, row="12",
                    rule=target(TARGET, ("ratio", "<=", BOUND)), target_history=HISTORY,
                    note=common + f" Baseline = the highest input ceiling the study measured ({where}): what the "
                                  f"loader can deliver at best on these CPUs.", details=detail),
    ]
