"""The terminal and JSON views of a study: a table sorted by Pareto rank, one trial in detail, or JSON for machines."""

from __future__ import annotations

import math
from typing import Any

from tuner.report.study import BOUND_EXPLANATION, STATE_NOTES, Study, bound_label

FRONT_MARK = "★"
SPARKS = "▁▂▃▄▅▆▇█"


def fmt(value: Any, digits: int = 4) -> str:
    """Short human form of a metric: `digits` significant digits for floats, "-" for missing."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.0f}" if abs(value) >= 10 ** digits else f"{value:.{digits}g}"
    return str(value)


def sparkline(values: list[float]) -> str:
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not finite:
        return ""
    lo, hi = min(finite), max(finite)
    out = []
    for v in values:
        if not isinstance(v, (int, float)) or not math.isfinite(v):
            out.append(" ")
        else:
            out.append(SPARKS[0 if hi == lo else int((v - lo) / (hi - lo) * (len(SPARKS) - 1))])
    return "".join(out)


def _json_safe(value: Any) -> Any:
    """Strict JSON: NaN and inf become null (a machine reading it must not choke on bare NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def trial_document(study: Study, record: dict[str, Any]) -> dict[str, Any]:
    """A trial record plus what the report derives: Pareto rank, front membership, bottleneck, grid path."""
    doc = dict(record)
    rank = study.rank(record)
    doc["rank"] = rank
    doc["front"] = rank == 0
    doc["bound"] = bound_label(record.get("data_wait")) or None
    grid = study.sample_grid(record)
    doc["sample_grid"] = str(grid) if grid is not None else None
    return _json_safe(doc)


def study_json(study: Study) -> list[dict[str, Any]]:
    """What `tuner report --format json` prints: every trial, in the table's order (by Pareto rank)."""
    return [trial_document(study, r) for r in study.sorted_records()]


def _state_cell(record: dict[str, Any]) -> str:
    state = str(record.get("state"))
    style = {"complete": "green", "oom": "red", "diverged": "yellow", "error": "red"}.get(state, "")
    text = f"[{style}]{state}[/{style}]" if style else state
    return text + (" (capped)" if record.get("capped") else "")


def study_table(study: Study) -> Any:
    """A rich Table: one row per trial, sorted by Pareto rank, the front marked with a star."""
    from rich.table import Table

    metrics = [o.metric for o in study.objectives]
    params = list(study.meta.get("params") or [])
    for r in study.records:
        params += [p for p in r.get("params", {}) if p not in params]
    title = f"study {study.name}: {len(study.records)} trials, {len(study.front())} on the Pareto front ({FRONT_MARK})"
    directions = ", ".join(f"{o.metric} {'↑' if o.maximize else '↓'}" for o in study.objectives)
    table = Table(title=title, caption=f"objectives: {directions}; rank 0 = Pareto front", header_style="bold")
    table.add_column("rank", justify="right")
    table.add_column("trial", justify="right")
    table.add_column("state")
    for m in metrics:
        table.add_column(m, justify="right")
    table.add_column("spread", justify="right")
    table.add_column("data wait", justify="right")
    table.add_column("peak MB", justify="right")
    table.add_column("train s", justify="right")
    for p in params:
        table.add_column(p, justify="right")
    table.add_column("error", overflow="fold", max_width=40)
    for r in study.sorted_records():
        rank = study.rank(r)
        rank_cell = f"{FRONT_MARK} 0" if rank == 0 else ("-" if rank is None else str(rank))
        wait = r.get("data_wait")
        wait_cell = f"{wait:.0%} {bound_label(wait)}" if bound_label(wait) else "-"
        spread = r.get("throughput_spread")
        row = [
            rank_cell,
            str(r["trial"]),
            _state_cell(r),
            *[fmt(r.get(m)) for m in metrics],
            f"{spread:.1%}" if isinstance(spread, (int, float)) and math.isfinite(spread) else "-",
            wait_cell,
            fmt(r.get("peak_mem_mb"), 5),
            fmt(r.get("train_seconds"), 3),
            *[fmt(r.get("params", {}).get(p)) for p in params],
            str(r.get("error") or ""),
        ]
        table.add_row(*row, style="bold" if rank == 0 else None)
    return table


def trial_panel(study: Study, record: dict[str, Any]) -> list[Any]:
    """Renderables for `tuner report STUDY --trial N`: params, metrics, windows, loss curve, grid, error."""
    from rich.table import Table

    rank = study.rank(record)
    state = str(record.get("state"))
    where = "not ranked" if rank is None else f"rank {rank}"
    if rank == 0:
        where += f", on the Pareto front {FRONT_MARK}"
    title = f"[bold]study {study.name}, trial {record['trial']}[/bold]: {STATE_NOTES.get(state, state)} ({where})"
    out: list[Any] = [title]

    params = Table(title="params", show_header=False, title_justify="left")
    for k, v in (record.get("params") or {}).items():
        params.add_row(k, fmt(v))
    out.append(params)

    metrics = Table(title="metrics", show_header=False, title_justify="left")
    for o in study.objectives:
        metrics.add_row(o.metric, fmt(record.get(o.metric)), "higher is better" if o.maximize else "lower is better")
    spread = record.get("throughput_spread")
    if isinstance(spread, (int, float)) and math.isfinite(spread):
        metrics.add_row("throughput_spread", f"{spread:.1%}", "(max - min) / median over the windows")
    wait = record.get("data_wait")
    if wait is not None:
        metrics.add_row("data_wait", f"{wait:.1%}" if bound_label(wait) else fmt(wait), bound_label(wait))
    for key in ("peak_mem_mb", "train_seconds", "samples", "steps", "capped", "device",
                "accuracy", "fid_features", "fid_samples", "quality_seconds"):
        if key in record and key not in {o.metric for o in study.objectives}:
            metrics.add_row(key, fmt(record.get(key)), "")
    out.append(metrics)

    windows = [w for w in record.get("windows") or []]
    if windows:
        out.append(f"throughput windows (samples/s): {' '.join(fmt(w) for w in windows)}  {sparkline(windows)}")
    curve = record.get("loss_curve") or []
    if curve:
        losses = [p[1] for p in curve]
        out.append(
            f"loss curve: {fmt(losses[0])} -> {fmt(losses[-1])} over {fmt(curve[-1][0])} samples  {sparkline(losses)}"
        )
    grid = study.sample_grid(record)
    if grid is not None:
        out.append(f"sample grid: {grid}" + ("" if grid.is_file() else " (missing)"))
    if record.get("error"):
        out.append(f"[red]error:[/red] {record['error']}")
    if wait is not None:
        out.append(f"[dim]{BOUND_EXPLANATION}[/dim]")
    return out
