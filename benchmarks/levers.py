"""Benchmark 7, levers: PyTorch 2's levers on this machine: eager vs torch.compile vs channels_last, for the CNN and
the GAN, interleaved in one run.

Each arm is a tuner trial (`tuner.train.run_trial`, a seconds budget, quality off) of the same config but for one
knob: `compile: default` (torch.compile's default mode, Inductor) or `channels_last: true`. Rounds are interleaved
(every arm of every workload once per round, the arms' order rotated from round to round), so a neighbour's load
or the machine's warmth falls on all arms alike. Figures per workload: each arm's median throughput over eager's
(the ratio), the compiled arm's compile time (its first round: later rounds reuse this process's compiled graphs,
as a study's trials do) and its break-even against eager (`tuner.analysis.compile_cost`), and every arm's of_peak
(achieved FLOP/s over this device's measured matmul peak, `tuner.measure.flops`). One row can fail, levers-cl-gan:
the default study's probes set channels_last for the GAN on this CPU (docs/getting-started.md: they read it 11-25%
faster), so full trials with it must not read slower than eager beyond the noise (ratio >= CL_FLOOR). The other
figures have no pass mark: on a 2-core CPU compile may not pay; they say whether it does here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from benchmarks.common import BenchResult, Context, median, ratio

TARGET = "reported: speed-up over eager, compile cost"
CL_FLOOR = 0.95  # levers-cl-gan: channels_last, which the default study's probes set for the GAN, >= 0.95x eager
WORKLOADS = ("cnn", "gan")
ARMS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("eager", {}),
    ("compiled", {"compile": "default"}),
    ("channels_last", {"channels_last": True}),
)


def schedule(rounds: int, workloads: Iterable[str] = WORKLOADS,
             arms: Iterable[str] = tuple(a for a, _ in ARMS)) -> list[tuple[int, str, str]]:
    """(round, workload, arm) in run order: each round runs every arm of every workload once, the arms' order
    rotated by one each round (eager first, then second, ...), so no arm always runs first or last."""
    names = list(arms)
    out: list[tuple[int, str, str]] = []
    for r in range(rounds):
        turn = names[r % len(names):] + names[:r % len(names)]
        out.extend((r, w, a) for w in workloads for a in turn)
    return out


def run_arm(workload: str, knobs: dict[str, Any], budget_s: float, batch: int, cache_dir: Any) -> dict[str, Any]:
    """One trial; its figures, or its state and error when it did not complete (a compile failure is a state)."""
    from tuner.config import parse_config
    from tuner.train import run_trial

    cfg = parse_config({
        "workload": workload, "dataset": "digits", "workload_options": {"image_size": 32},
        "budget": {"seconds": budget_s},
        "params": {"batch_size": batch, "num_workers": 0, "device": "auto", **knobs},
        "quality": {"enabled": False},
    }, "levers config")
    r = run_trial(cfg, cache_dir=cache_dir)
    keys = ("throughput", "compile_seconds", "of_peak", "flops_per_sample", "peak_flops", "of_peak_skipped",
            "graph_breaks", "recompiles")
    return {"state": r.state, "error": r.error, **{k: r.get(k) for k in keys}}


def summarize(runs: list[dict[str, Any]], rounds: int) -> list[BenchResult]:
    """Two figures per workload (compiled vs eager, channels_last vs eager) from the runs ({round, workload, arm,
    state, throughput, compile_seconds, of_peak, ...}); every arm's of_peak and the compile cost in the notes."""
    from benchmarks.table import target
    from tuner.analysis import break_even_seconds

    results: list[BenchResult] = []
    for w in dict.fromkeys(r["workload"] for r in runs):
        mine = [r for r in runs if r["workload"] == w]
        arm: dict[str, dict[str, Any]] = {}
        for name, _ in ARMS:
            done = [r for r in mine if r["arm"] == name]
            ok = [r for r in done if r["state"] == "complete"]
            errors = sorted({f"{r['state']}: {r['error']}" for r in done if r["state"] != "complete"})
            arm[name] = {"throughput": median(r["throughput"] for r in ok if r["throughput"] is not None),
                         "rounds": [r["throughput"] for r in done],
                         "of_peak": median(r["of_peak"] for r in ok if r.get("of_peak") is not None),
                         "complete": len(ok), "errors": errors,
                         "of_peak_skipped": next((r["of_peak_skipped"] for r in ok if r.get("of_peak_skipped")), None)}
        compiled = [r for r in mine if r["arm"] == "compiled" and r.get("compile_seconds") is not None]
        first = min(compiled, key=lambda r: r["round"]) if compiled else None
        compile_s = first["compile_seconds"] if first is not None else None
        eager, comp = arm["eager"]["throughput"], arm["compiled"]["throughput"]
        pays = break_even_seconds(compile_s, comp, eager) if compile_s is not None and comp and eager else None
        arm["compiled"].update(compile_seconds_first=compile_s, break_even_s=pays,
                               compile_seconds_later=[r["compile_seconds"] for r in compiled if r is not first])
        peaks = ", ".join(f"{n} {_pct(a['of_peak'])}" for n, a in arm.items())
        skipped = next((a["of_peak_skipped"] for a in arm.values() if a["of_peak_skipped"]), None)
        peak_note = f"of_peak: {peaks}" + (f" (missing: {skipped})" if skipped else "") + "."
        details = {"rounds": rounds, "arms": arm}
        for name, knob in (("compiled", "torch.compile (mode default)"), ("channels_last", "channels_last")):
            a = arm[name]
            note = f"{w}: {knob} vs eager, median of {a['complete']} of {rounds} interleaved rounds. {peak_note}"
            if name == "compiled":
                note += (f" Compile: {_secs(compile_s)} in its first round (later rounds reuse the process's graphs: "
                         f"{', '.join(_secs(s) for s in a['compile_seconds_later']) or '-'}); "
                         + (f"pays back after {_secs(pays)} of training." if pays is not None else
                            "never pays back at this speed." if compile_s is not None and comp and eager else
                            "no break-even without both speeds."))
            if a["errors"]:
                note += f" Failed: {'; '.join(a['errors'])[:300]}."
            published = w == "gan" and name == "channels_last"
            if published:
                note += (" The default study's probes set channels_last for the GAN on this CPU (they read it 11-25% "
                         "faster, docs/getting-started.md): here full trials judge that choice.")
            results.append(BenchResult(name=f"{w}: {name} vs eager", benchmark="levers", figure=a["throughput"],
                                       unit="samples/s", baseline=eager, ratio=ratio(a["throughput"], eager),
                                       target=TARGET, pass_=a["throughput"] is not None and eager is not None,
                                       note=note, details=details, **({
                                           "row": "levers-cl-gan",
                                           "rule": target(f"ratio >= {CL_FLOOR:g} (the probes' channels_last no "
                                                          "slower than eager in full trials, within the noise)",
                                                          ("ratio", ">=", CL_FLOOR))} if published else {})))
    return results


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _secs(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f} s" if value < 90 else f"{value / 60:.1f} min"


def run(ctx: Context) -> list[BenchResult]:
    s = ctx.settings
    knobs = dict(ARMS)
    runs: list[dict[str, Any]] = []
    for rnd, workload, arm in schedule(s.levers_rounds):
        out = run_arm(workload, knobs[arm], s.levers_budget_s, s.levers_batch, ctx.cache_dir)
        runs.append({"round": rnd, "workload": workload, "arm": arm, **out})
        ctx.log(f"levers: round {rnd + 1}/{s.levers_rounds} {workload} {arm}: {out['state']}, "
                f"{out['throughput'] or 0:.0f} samples/s, compile {_secs(out['compile_seconds'])}, "
                f"of_peak {_pct(out['of_peak'])}")
    return summarize(runs, s.levers_rounds)
