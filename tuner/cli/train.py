"""`tuner train`: run one configuration without Ray and print what it measured."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from tuner.errors import ConfigError, RunFailed


def train(
    config: Annotated[Path, typer.Option("--config", "-c", help="YAML config (the format `tuner export` writes).")],
    budget_seconds: Annotated[Optional[float], typer.Option(help="Override the budget: train this many seconds.")] = None,
    budget_samples: Annotated[Optional[int], typer.Option(help="Override the budget: train on this many samples.")] = None,
    fid_weights: Annotated[Optional[Path], typer.Option(help="Inception weights file (with quality.fid_features: inception).")] = None,
    reports_dir: Annotated[Path, typer.Option(help="Where caches (datasets, FID features) and outputs go.")] = Path("reports"),
    out_dir: Annotated[Optional[Path], typer.Option(help="Where to write the sample grid (gan). Default: <reports-dir>/train/.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object on stdout.")] = False,
) -> None:
    """Train one configuration and measure throughput (median of timed windows) and quality."""
    from tuner.config import load_config
    from tuner.train import preflight, run_trial

    cfg = load_config(config)
    if budget_seconds is not None and budget_samples is not None:
        raise ConfigError("give at most one of --budget-seconds and --budget-samples")
    if budget_seconds is not None or budget_samples is not None:
        if (budget_seconds is not None and budget_seconds <= 0) or (budget_samples is not None and budget_samples <= 0):
            raise ConfigError("--budget-seconds / --budget-samples must be > 0")
        cfg.budget = type(cfg.budget)(seconds=budget_seconds, samples=budget_samples)
    if fid_weights is not None:
        cfg.quality.fid_weights = fid_weights
    device = preflight(cfg)
    out = out_dir or reports_dir / "train"
    out.mkdir(parents=True, exist_ok=True)

    progress = None if as_json else _print_window
    if not as_json:
        print(f"training {cfg.workload} on {cfg.dataset} for {cfg.budget.describe()} ...", file=sys.stderr)
    result = run_trial(cfg, cache_dir=reports_dir / ".cache", out_dir=out, device=device, on_window=progress)
    data = result.to_dict()
    if as_json:
        print(json.dumps(data, default=str))
    else:
        _print_summary(data)
    if result.state != "complete":
        raise RunFailed(f"the run did not complete: {result.state} ({result.error})")


def _print_window(w: dict) -> None:
    print(f"  window {w['window']}: {w['throughput']:.1f} samples/s, train loss {w['train_loss']:.4f}", file=sys.stderr)


def _print_summary(d: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(show_header=False, box=None)
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    t.add_row("state", d["state"] + (f" ({d['error']})" if d.get("error") else ""))
    t.add_row("throughput", f"{fmt(d['throughput'], '.1f')} samples/s  (spread {fmt(d['throughput_spread'], '.1%')}"
                            f" over {len(d['windows'])} windows)")
    t.add_row("data wait", fmt(d["data_wait"], ".1%") + " of step time")
    t.add_row("peak memory", f"{fmt(d['peak_mem_mb'], '.0f')} MB")
    t.add_row("trained", f"{d['samples']} samples, {d['steps']} steps in {d['train_seconds']:.1f} s"
                         + (" (capped)" if d.get("capped") else ""))
    for key in ("fid", "fid_features", "fid_samples", "loss", "accuracy", "quality_seconds", "sample_grid"):
        if d.get(key) is not None:
            v = d[key]
            t.add_row(key.replace("_", " "), format(v, ".4g") if isinstance(v, float) else str(v))
    t.add_row("device", d["device"])
    Console().print(t)


def register(app: typer.Typer) -> None:
    app.command("train")(train)
