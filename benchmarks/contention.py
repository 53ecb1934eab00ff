"""Does `tuner train` read what a plain PyTorch loop reads when other work shares the cores?

`python benchmarks/contention.py [--pairs 12] [--seconds 8] [--load 2] [--env K=V] [--light]` runs, interleaved
and alternating which goes first, `python -m tuner train` on the built-in GAN (digits, 32x32, batch 64, fp32, no
loader workers, quality off) and the plain DCGAN loop below (the textbook loop a user writes: its own DataLoader
over the same Dataset, the same model classes, Adam, loss), each in a fresh process for the same seconds.
`--in-process` instead alternates the plain step and tuner's own step inside one process, which separates tuner's
step from the process it runs in. `--load N` starts N busy neighbours (one compute thread each) for the whole
comparison; the load average is recorded beside every run. Prints one JSON document (every run, the per-pair
ratios, their median and range) and writes it to --out. Figures: benchmarks/README.md, "Shared machines".

Row ctn-load (benchmarks/table.py schema, in the same JSON with the commit it ran at; published with
`--load 2 --out benchmarks/results/contention.json`): the median over pairs of tuner train / plain loop with busy
neighbours, nothing set on either side, target within BAND of 1 (both sides the same process set-up and the same
step; issue 18 once read 2.1x apart here)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def dcgan_step(batches: Any, channels: int) -> Any:
    """The textbook DCGAN step (its own models, Adam, BCE) over `batches`: the plain loop both comparisons time."""
    import torch
    from torch import nn

    from tuner.models import Discriminator, Generator

    netG, netD = Generator(nz=64, ngf=32, channels=channels), Discriminator(ndf=32, channels=channels)
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()

    def step() -> None:
        real = next(batches)[0]
        fake = netG(torch.randn(real.size(0), 64, 1, 1))
        optD.zero_grad()
        out_r, out_f = netD(real), netD(fake.detach())
        (bce(out_r, torch.ones_like(out_r)) + bce(out_f, torch.zeros_like(out_f))).backward()
        optD.step()
        optG.zero_grad()
        out = netD(fake)
        bce(out, torch.ones_like(out)).backward()
        optG.step()

    return step


def plain_loop(seconds: float, batch: int, warmup: int, threads: int | None, cache_dir: Path) -> dict[str, Any]:
    """Samples/s of the textbook DCGAN loop, timed with perf_counter around every step after `warmup` steps."""
    import torch
    from torch.utils.data import DataLoader

    from tuner.data import load_datasets

    if threads is not None:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    data = load_datasets("digits", 32, cache_dir)
    loader = DataLoader(data.train, batch_size=batch, shuffle=True, drop_last=True)

    def batches() -> Any:
        while True:
            yield from loader

    step = dcgan_step(batches(), data.channels)
    for _ in range(warmup):
        step()
    start = time.perf_counter()
    steps = 0
    while time.perf_counter() - start < seconds:
        step()
        steps += 1
    elapsed = time.perf_counter() - start
    return {"throughput": steps * batch / elapsed, "steps": steps, "seconds": elapsed,
            "threads": torch.get_num_threads()}


# Measure settings that let a reading come out of a short budget when one step takes seconds (the pre-flight
# refuses the defaults' 3 windows of 3 steps then): what tuner measured before windows had minimums.
LIGHT = {"warmup_steps": 1, "min_windows": 1, "window_min_steps": 1}


def in_process(rounds: int, steps: int, cache_dir: Path) -> dict[str, Any]:
    """The plain loop's step and tuner's own step (tuner.train.step.PhaseStep on the built-in GAN, as run_trial
    builds it) alternated in one process, `steps` of each per round, order alternating: what is left of a gap
    here is tuner's step itself; what is gone was the process or the machine."""
    import torch
    from torch.utils.data import DataLoader

    from tuner.builtin.gan import make
    from tuner.config import TrialConfig
    from tuner.data import make_loader
    from tuner.device import resolve_device
    from tuner.train.loop import forever
    from tuner.train.step import PhaseStep
    from tuner.train.trial import build_models, make_context
    from tuner.workload.context import running

    cfg = TrialConfig(workload="gan", dataset="digits")
    dev = resolve_device("cpu")
    with running(make_context(cfg, dev, cache_dir, None)):
        wl = make("digits")
        train_set, _ = wl.datasets()
        step = PhaseStep(wl, build_models(wl, dev, cfg.params), cfg.params, dev)
        tuner_batches = forever(make_loader(train_set, cfg.params, dev))
        plain = dcgan_step(forever(DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)), 1)
        sides = {"plain": plain, "tuner": lambda: step(tuner_batches)}
        for fn in sides.values():  # warm-up
            fn()
            fn()
        times: dict[str, list[float]] = {"plain": [], "tuner": []}
        for r in range(rounds):
            for name in (("plain", "tuner") if r % 2 == 0 else ("tuner", "plain")):
                start = time.perf_counter()
                for _ in range(steps):
                    sides[name]()
                times[name].append((time.perf_counter() - start) / steps)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"step_seconds": med, "ratio": med["plain"] / med["tuner"], "runs": times,
            "threads": torch.get_num_threads(), "loadavg": os.getloadavg()[0]}


def tuner_train(seconds: float, batch: int, threads: int | None, reports: Path, env: dict[str, str],
                light: bool = False) -> dict[str, Any]:
    """`python -m tuner train --format json` in a fresh process, as a user runs it."""
    import yaml

    cfg = {"workload": "gan", "dataset": "digits", "budget": {"seconds": seconds},
           "params": {"batch_size": batch, "device": "cpu", **({"threads": threads} if threads else {})},
           "quality": {"enabled": False}, **({"measure": LIGHT} if light else {})}
    path = reports / "contention.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, **env, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "tuner", "train", "-c", str(path), "--format", "json",
                           "--reports-dir", str(reports)], capture_output=True, text=True, env=env, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"tuner train failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    m = json.loads(proc.stdout)  # the metrics sit flat beside the structural keys
    return {"throughput": m["throughput"], "median": m.get("throughput_median"), "steps": m.get("steps"),
            "warmup_steps": m.get("warmup_steps"), "step_seconds": m.get("step_seconds"),
            "spread": m.get("throughput_spread"), "windows": m.get("windows")}


def plain_subprocess(seconds: float, batch: int, threads: int | None, reports: Path, env: dict[str, str],
                     light: bool = False) -> dict[str, Any]:
    """The plain loop in a fresh process too, so both sides pay and skip the same start-up."""
    env = {**os.environ, **env, "PYTHONPATH": str(REPO)}
    args = [sys.executable, str(Path(__file__).resolve()), "--plain-once", "--seconds", str(seconds),
            "--batch", str(batch), "--cache", str(reports / ".cache")]
    if threads:
        args += ["--threads", str(threads)]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"plain loop failed: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout)


BAND = 0.15  # ctn-load: the median pair ratio within 15% of 1 (one pair under load reads 0.54-1.1)


def rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The published row from a fresh-process comparison's document: ctn-load, the median of the per-pair ratios
    (tuner / plain), judged only for a run with busy neighbours and no variable set on either side (`tweaked` 0)."""
    from benchmarks.table import target
    from benchmarks.time_to_target import median_interval

    ratios = [p["ratio"] for p in doc["pairs"]]
    tuner = statistics.median(p["tuner"]["throughput"] for p in doc["pairs"])
    plain = statistics.median(p["plain"]["throughput"] for p in doc["pairs"])
    loads = [p[side]["loadavg"] for p in doc["pairs"] for side in ("tuner", "plain") if "loadavg" in p[side]]
    tweaked = bool(doc.get("env") or doc.get("plain_env"))  # --light only lowers tuner's window minimums
    # The pairs' ratios under load scatter 0.7-1.5: the note says how far the median could move, not only where it
    # fell (order statistics, as time_to_target.py reads its re-runs; fewer pairs than 95% needs: min-max, and less).
    _, low, high, cover = median_interval(ratios, 0.95)
    spans = (f"; the median's {cover:.0%} interval {low:.2f}-{high:.2f} (order statistics)"
             + ("" if 1 - BAND <= low and high <= 1 + BAND else
                f", wider than the band: {len(ratios)} pairs cannot place the median inside or outside it"))
    return [{
        "id": "ctn-load", "benchmark": "contention",
        "name": "tuner train vs a plain loop, fresh processes with busy neighbours: median pair ratio",
        "figure": tuner, "unit": "samples/s", "baseline": plain, "ratio": statistics.median(ratios),
        "target": target(f"{1 - BAND:.2f} <= ratio <= {1 + BAND:.2f}, with >= 1 busy neighbour and nothing set",
                         ("ratio", ">=", 1 - BAND), ("ratio", "<=", 1 + BAND), ("neighbours", ">=", 1),
                         ("tweaked", "<=", 0)).to_json(),
        "note": (f"{len(ratios)} pairs of {doc['seconds']:g} s (built-in GAN, batch {doc['batch']}, fp32, quality "
                 f"off), interleaved, order alternating, {doc['neighbours']} busy neighbour(s); medians of each "
                 f"side (figure, baseline); pair ratios " + ", ".join(f"{r:.2f}" for r in ratios)
                 + spans
                 + (f"; load average {min(loads):.1f}-{max(loads):.1f} during the runs" if loads else "") + "."),
        "details": {"neighbours": doc["neighbours"], "tweaked": int(tweaked), "pair_ratios": ratios,
                    "median_interval": [low, high], "median_interval_coverage": cover,
                    "min_ratio": min(ratios), "max_ratio": max(ratios), "env": doc.get("env"),
                    "plain_env": doc.get("plain_env"), "light": doc.get("light"), "threads": doc.get("threads")},
    }]


def neighbours(n: int) -> list[subprocess.Popen[bytes]]:
    """N busy processes, one compute thread each: torch matmuls in a loop, as another job's training would be."""
    code = ("import torch\ntorch.set_num_threads(1)\na=torch.randn(256,256)\n"
            "while True:\n    a=torch.tanh(a@a)\n")
    return [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(n)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None, help="torch threads on both sides (default: torch's)")
    ap.add_argument("--load", type=int, default=0, help="busy neighbour processes started for the comparison")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="set in both sides' environment (e.g. GOMP_SPINCOUNT=300000, libgomp's own default)")
    ap.add_argument("--plain-env", action="append", default=[], metavar="KEY=VALUE",
                    help="set in the plain loop's environment only")
    ap.add_argument("--light", action="store_true", help=f"tuner's measure settings {LIGHT} (a step of seconds)")
    ap.add_argument("--out", type=Path, default=REPO / "reports" / "benchmarks" / "contention.json")
    ap.add_argument("--in-process", action="store_true",
                    help="alternate the plain step and tuner's step in this one process instead (--pairs rounds)")
    ap.add_argument("--plain-once", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cache", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.plain_once:
        print(json.dumps(plain_loop(args.seconds, args.batch, 3, args.threads, args.cache)))
        return 0
    env = dict(kv.split("=", 1) for kv in args.env)
    if args.in_process:  # --env must be set by the caller here: libgomp read its settings when torch loaded
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        busy = neighbours(args.load)
        try:
            doc = in_process(args.pairs, 3, Path(tempfile.mkdtemp(prefix="contention-")) / ".cache")
        finally:
            for p in busy:
                p.kill()
                p.wait()
        doc.update(env={k: os.environ[k] for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in os.environ},
                   date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1))
        print(json.dumps(doc))
        return 0
    plain_env = dict(kv.split("=", 1) for kv in args.plain_env)
    reports = Path(tempfile.mkdtemp(prefix="contention-"))
    import datetime as dt

    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    busy = neighbours(args.load)
    runs: list[dict[str, Any]] = []
    try:
        for i in range(args.pairs):
            order = ("tuner", "plain") if i % 2 == 0 else ("plain", "tuner")
            pair: dict[str, Any] = {}
            for impl in order:
                fn = tuner_train if impl == "tuner" else plain_subprocess
                out = fn(args.seconds, args.batch, args.threads, reports,
                         env if impl == "tuner" else {**env, **plain_env}, args.light)
                out["loadavg"] = os.getloadavg()[0]
                pair[impl] = out
                print(f"pair {i + 1}/{args.pairs} {impl}: {out['throughput']:.0f} samples/s "
                      f"(load {out['loadavg']:.1f})", file=sys.stderr, flush=True)
            pair["ratio"] = pair["tuner"]["throughput"] / pair["plain"]["throughput"]
            runs.append(pair)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    ratios = [r["ratio"] for r in runs]
    doc = {"pairs": runs, "median_ratio": statistics.median(ratios), "min_ratio": min(ratios),
           "max_ratio": max(ratios), "seconds": args.seconds, "batch": args.batch, "threads": args.threads,
           "neighbours": args.load, "env": env, "plain_env": plain_env, "light": args.light,
           "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    from benchmarks.common import _loadavg, cpu_model, git_state
    from benchmarks.table import SCHEMA

    commit, dirty = git_state()
    found = rows(doc)
    for r in found:
        r.update({"commit": commit, "dirty": dirty, "date": now, "load": _loadavg() or [],
                  "machine": f"{cpu_model()} ({os.cpu_count()} cores)"})
    doc.update(schema=SCHEMA, commit=commit, dirty=dirty, rows=found)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1))
    print(json.dumps({k: v for k, v in doc.items() if k not in ("pairs", "rows")}))
    for r in found:
        print(f"{r['id']}: ratio {r['ratio']:.3f}; {r['note']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
