"""Run the benchmarks: `python benchmarks/run.py [--quick] [--only overhead,fidelity,...]`.

Writes reports/benchmarks/results.json (one entry per figure: name, benchmark, figure, unit, baseline, ratio,
target, pass, note, details), run.json (machine, date, mode, versions) and results.md (the table); a full run
also writes its published rows to benchmarks/results/run-full.json (`--only` a subset: run-full-<names>.json),
from which benchmarks/table.py generates the table in the docs. Progress goes to stderr. Exit status: 0 when every benchmark
produced its figures (targets may be missed: that is a result, shown as MISSED), 1 when one could not be measured.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python benchmarks/run.py` from a checkout, without installing tuner
    sys.path.insert(0, str(REPO))

from benchmarks.common import (  # noqa: E402 - after the path fix above
    BENCHMARKS,
    BenchResult,
    Context,
    error_result,
    machine_info,
    make_settings,
    now_iso,
    versions,
    write_results,
    write_rows,
)

TARGETS = {
    "overhead": ("per-trial overhead vs bare Ray Tune", "figure <= baseline + 0.1 s"),
    "fidelity": ("reported vs independent throughput", "median |ratio - 1| <= 5%"),
    "efficiency": ("trials to reach 95% of best throughput", "<= 25% of the grid"),
    "speedup": ("exported vs own settings and a textbook config", "ratio > 1"),
    "ceilings": ("best config vs its ceilings", "reported: where the remaining speed is"),
    "stability": ("winner is the re-measured winner", "with confirmation > without (or both 100%)"),
    "levers": ("eager vs compiled vs channels_last", "reported: speed-up over eager, compile cost"),
}


def _module(name: str):  # noqa: ANN202 - a module
    import importlib

    return importlib.import_module(f"benchmarks.{name}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: a CI-sized run (< 10 min on 2 CPU cores)")
    ap.add_argument("--only", default=",".join(BENCHMARKS),
                    help=f"comma-separated subset of {','.join(BENCHMARKS)} (default: all, in this order)")
    ap.add_argument("--out", type=Path, default=REPO / "reports" / "benchmarks", help="output folder")
    ap.add_argument("--no-results", action="store_true",
                    help="full mode: do not write benchmarks/results/run-full*.json (the published rows)")
    args = ap.parse_args(argv)
    only = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = [b for b in only if b not in BENCHMARKS]
    if unknown:
        ap.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")

    import torch

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    settings = make_settings(args.quick, torch.cuda.is_available())
    ctx = Context(settings, args.out, args.out / "work")
    ctx.work_dir.mkdir(parents=True, exist_ok=True)
    from benchmarks.overhead import clean_work_dir

    clean_work_dir(ctx.work_dir)
    meta = {"mode": settings.mode, "date": now_iso(), "machine": machine_info(), "versions": versions(),
            "benchmarks": only, "seconds": 0.0}
    ctx.log(f"benchmarks ({settings.mode}, {'cuda' if settings.cuda else 'cpu'}): {', '.join(only)}")

    results: list[BenchResult] = []
    failed = False
    for name in BENCHMARKS:
        if name not in only:
            continue
        t = time.perf_counter()
        ctx.log(f"{name}: start")
        try:
            out = _module(name).run(ctx)
        except Exception as err:  # one benchmark failing must not lose the others' figures
            ctx.log(f"{name}: FAILED: {type(err).__name__}: {err}")
            label, target = TARGETS[name]
            out = [error_result(name, label, err, target)]
        failed = failed or any(r.pass_ is None for r in out)
        results.extend(out)
        for r in out:
            verdict = "not measured" if r.pass_ is None else ("pass" if r.pass_ else "MISSED")
            ctx.log(f"{name}: {r.name}: figure {r.figure} {r.unit}, baseline {r.baseline}, ratio {r.ratio} "
                    f"-> {verdict}")
        ctx.log(f"{name}: done in {time.perf_counter() - t:.0f} s")
        meta["seconds"] = time.perf_counter() - ctx.t0
        write_results(results, meta, args.out)  # after each benchmark: a crash later keeps what was measured

    meta["seconds"] = time.perf_counter() - ctx.t0
    try:
        meta["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    json_path, md_path = write_results(results, meta, args.out)
    if settings.mode == "full" and not args.no_results:  # the published table (docs/benchmarks.md) reads these
        rows = write_rows(results, meta, REPO / "benchmarks" / "results" / f"run-full-{'-'.join(only)}.json"
                          if set(only) != set(BENCHMARKS) else REPO / "benchmarks" / "results" / "run-full.json")
        if rows is not None:
            ctx.log(f"wrote {rows.relative_to(REPO)}: commit it; `python benchmarks/table.py` shows the table")
    ctx.log(f"wrote {json_path} and {md_path} ({meta['seconds']:.0f} s in all)")
    print(md_path.read_text())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
