"""`tuner profile`: a few steps of one configuration under torch.profiler; trace, top operators, shares, verdict."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from tuner.cli.app import (
    Debug,
    Format,
    FormatOption,
    app,
    note,
    print_json,
    stdout_console,
    user_output,
)


@app.command()
def profile(
    config: Annotated[Path, typer.Option("--config", "-c", help="YAML config (the format `tuner export` writes).")],
    steps: Annotated[int, typer.Option(min=1, help="Steps to record after warm-up (the config's "
                                                   "measure.warmup_steps, at least 1).")] = 5,
    top: Annotated[int, typer.Option(min=1, help="Operators to list, by self time.")] = 15,
    out: Annotated[Optional[Path], typer.Option("--out", help="Chrome/Perfetto trace file to write. "
                                                               "Default: <reports-dir>/profile/trace.json.")] = None,
    reports_dir: Annotated[Path, typer.Option(help="Where caches (datasets) and outputs go.")] = Path("reports"),
    format: FormatOption = Format.table,
    debug: Debug = False,
) -> None:
    """Profile a configuration: a Chrome trace, the top operators, where step time goes, and the headroom verdict."""
    from tuner.config import load_config
    from tuner.train import preflight
    from tuner.train import profile_config, trace_file

    cfg = load_config(config)
    trace = trace_file(out or reports_dir / "profile" / "trace.json")
    with user_output():  # what the workload prints goes to stderr: stdout is the result
        device, check = preflight(cfg, reports_dir / ".cache")
    if device.torch_device.type != "cuda" and not debug:
        # Kineto (torch.profiler's backend) logs its start and stop, and a CUDA build without a GPU its failed
        # device count, on stderr; none of it concerns a CPU profile. Read when the profiler first starts.
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    as_json = format is Format.json
    if not as_json:
        on = f" on {cfg.dataset}" if cfg.dataset else ""
        note(f"profiling {steps} steps of {check.name}{on} on {device.describe()} ...")
    with user_output():
        result = profile_config(cfg, cache_dir=reports_dir / ".cache", trace=trace, steps=steps, top=top,
                                device=device)
    if as_json:
        print_json(result.to_json())
    else:
        _print(result)


def _print(result: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    from tuner.study import fmt_metric

    console = stdout_console()
    ops = Table(title=f"top {len(result.top_ops)} operators by self {'device' if _on_device(result) else 'CPU'} "
                      f"time over {result.steps} steps")
    ops.add_column("operator", overflow="fold")
    for name in ("calls", "self ms", "share"):
        ops.add_column(name, justify="right")
    if _on_device(result):
        ops.add_column("self CPU ms", justify="right")
    for op in result.top_ops:
        row = [escape(op["name"]), str(op["calls"]), f"{op['self_ms']:.2f}", f"{op['share']:.1%}"]
        if _on_device(result):
            row.append(f"{op['self_cpu_ms']:.2f}")
        ops.add_row(*row)
    console.print(ops)

    t = Table(show_header=False, box=None)
    t.add_row("step", f"{result.step_ms:.1f} ms while recorded: " +
              ", ".join(f"{part} {share:.0%}" for part, share in result.phases.items()))
    t.add_row("throughput", f"{fmt_metric('throughput', result.throughput)} samples/s (not recorded, data wait "
                            f"{fmt_metric('data_wait', result.data_wait)})")
    for key, label in (("compute_ceiling", "compute ceiling"), ("input_ceiling", "input ceiling")):
        value = getattr(result, key)
        t.add_row(label, f"{fmt_metric(key, value)} samples/s" if value is not None else "not measured")
    if result.of_peak is not None:
        t.add_row("of peak", f"{fmt_metric('of_peak', result.of_peak)} of the device's matmul peak "
                             f"({fmt_metric('peak_flops', result.peak_flops)} FLOP/s; "
                             f"{fmt_metric('flops_per_sample', result.flops_per_sample)} FLOPs per sample)")
    else:
        t.add_row("of peak", escape(f"not measured: {result.of_peak_skipped or 'unknown'}"))
    t.add_row("verdict", result.headroom.sentence or "unknown")
    t.add_row("device", escape(result.device))
    t.add_row("trace", escape(f"{result.trace} (chrome://tracing or ui.perfetto.dev)"))
    console.print(t)


def _on_device(result: Any) -> bool:
    return any(op.get("self_device_ms") is not None for op in result.top_ops)
