"""The terminal and JSON views of a study: a table sorted by Pareto rank, one trial in detail, or JSON for machines."""

from __future__ import annotations

import math
from typing import Any

from rich.markup import escape

from tuner.files import json_safe
from tuner.analysis import BOUND_EXPLANATION, Study, record_bound, study_payback
from tuner.study import (
    METRICS, STATE_NOTES, TO_TARGET, TrialRecord, fmt, fmt_figure, fmt_metric, fmt_param, read_horizon, read_parity,
    state_style,
    unit_suffix,
)

FRONT_MARK = "★"
SPARKS = "▁▂▃▄▅▆▇█"


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


def adjusted_metrics(study: Study) -> set[str]:
    """The objectives whose ranked figure is not the one read (Study.drift_adjusted): the views show both."""
    return {o.metric for o in study.objectives if study.drift_adjusted(o.metric)}


def figure_text(study: Study, record: TrialRecord, key: str, adjusted: set[str]) -> str:
    """An objective's cell: the figure the front and the pick rank by where it is adjusted for drift between
    rounds, with its ratio to the baseline and the figure read beside it (`100.4 (1.00x the baseline; read 201.1
    (196-206))`); the confirmed or search figure otherwise (fmt_figure)."""
    value = study.value(record, key) if key in adjusted else None
    if value is None:
        return fmt_figure(record, key)
    base = study.baseline_value(key)
    ratio = f"{value / base:.2f}x the baseline; " if base else ""
    return f"{fmt_metric(key, value)} ({ratio}read {fmt_figure(record, key)})"


def trial_document(study: Study, record: TrialRecord) -> dict[str, Any]:
    """A trial record plus what the report derives: Pareto rank, front membership, the figures it is ranked by
    (`ranked`: Study.value, adjusted for drift between rounds where the study's `ranked_on` says so), bottleneck,
    grid path."""
    doc = record.to_json()
    rank = study.rank(record)
    doc["rank"] = rank
    doc["front"] = rank == 0
    doc["ranked"] = {o.metric: study.value(record, o.metric) for o in study.objectives}
    doc["bound"] = record_bound(record) or None
    if study.scheduled:  # the budget its figures were taken at, in the budget's unit (seconds or samples)
        doc["measured_at_unit"] = study.budget_unit or None
    doc["compile_payback"] = study_payback(record, study.records)
    grid = study.sample_grid(record)
    doc["sample_grid"] = str(grid) if grid is not None else None
    if study.target is not None and record.complete:
        doc["to_target"] = to_target_document(record)
    return json_safe(doc)


def to_target_document(record: TrialRecord) -> dict[str, Any]:
    """The trial's to-target figures as the views show them (issue 34): confirmed, over its re-runs
    with the not-reached runs counted (the export header's numbers); one reading otherwise. `centre` None: not
    reached by any run; `text` what the table and --trial print."""
    out: dict[str, Any] = {}
    for key in TO_TARGET:
        fig = record.confirmed.figures.get(key) if record.confirmed is not None else None
        if fig is not None:
            runs, reached, centre, low, high = fig.runs, len(fig.values), fig.centre, fig.low, fig.high
        else:
            value = record.value(key)
            runs = 1 + (sum(1 for s in record.confirmed.states if s in ("complete", "not reached"))
                        if record.confirmed is not None else 0)
            reached, centre, low, high = (0 if value is None else 1), value, None, None
        out[key] = {"centre": centre, "low": low, "high": high, "runs": runs, "reached": reached,
                    "text": fmt_figure(record, key)}
    return out


def study_json(study: Study) -> list[dict[str, Any]]:
    """Every trial's document, in the table's order (by Pareto rank): the `trials` of study_document."""
    return [trial_document(study, r) for r in study.sorted_records()]


def study_document(study: Study) -> dict[str, Any]:
    """What `tuner report --format json` prints: the study, what it optimized, its trials, and what the footer
    under the table says (noise floor, the verdict on the knee pick; None before there is one)."""
    from tuner.errors import StudyError
    from tuner.analysis import decide

    try:
        verdict: dict[str, Any] | None = decide(study, "knee").to_json()
    except StudyError:  # no complete trial yet
        verdict = None
    noise = study.noise()
    return json_safe({
        "study": study.name,
        "folder": str(study.dir),
        "objectives": [{"metric": o.metric, "direction": o.direction} for o in study.objectives],
        "target": t.model_dump() if (t := study.target) is not None else None,
        "baseline": study.baseline_trial,
        "front": sorted(r.trial for r in study.front()),
        "ranked_on": study.ranked_on(),  # what each trial's `ranked` figures are: the front's and the pick's
        "noise_floor": noise.to_json() if noise is not None else None,
        "verdict": verdict,
        "numerics_parity": parity.model_dump() if (parity := read_parity(study.dir)) is not None else None,
        "horizon": horizon.model_dump() if (horizon := read_horizon(study.dir)) is not None else None,
        "trials": study_json(study),
    })


def rank_cell(rank: int | None) -> str:
    return f"{FRONT_MARK} 0" if rank == 0 else ("-" if rank is None else str(rank))


def _state_cell(record: TrialRecord) -> str:
    style = state_style(record.state)
    text = f"[{style}]{record.state}[/{style}]" if style else record.state
    if record.state == "stopped" and record.rung is not None:
        text += f" (rung {record.rung})"
    return text + (" (capped)" if record.capped else "")


def _measured_cell(record: TrialRecord, key: str) -> str:
    if key == "data_wait":
        label = record_bound(record)
        return f"{fmt_metric(key, record.get(key))} {label}" if label else "-"
    if key == "suspect" and (c := record.confirmed) is not None and (c.suspect or record.get(key)):
        # a confirmed trial stands or falls by its re-runs (the verdict's "suspect re-runs ... passed over")
        return f"re-runs: {c.suspect}" if c.suspect else f"{fmt_metric(key, record.get(key))} (re-runs clear it)"
    if key == "goodput" and record.get(key) is not None and record.get("efficiency") is not None:
        return f"{fmt_metric(key, record.get(key))} (x{fmt_metric('efficiency', record.get('efficiency'))})"
    if key in TO_TARGET:  # confirmed over the re-runs, not-reached runs counted
        return fmt_figure(record, key)
    return fmt_metric(key, record.get(key)) + unit_suffix(key, record)


IN_CELL = {"efficiency"}  # shown in another column's cell (goodput's), not a column of its own: the table is wide


def study_table(study: Study) -> Any:
    """A rich Table: one row per trial, sorted by Pareto rank, the front marked with a star."""
    from rich.table import Table

    objectives = study.objectives
    measured = [m for m in study.table_columns() if m.key not in {o.metric for o in objectives} | IN_CELL]
    # A column '-' for every trial (the ceilings, compile s, goodput on a CPU study) is left out so the rest fit a
    # terminal; the JSON and CSV keep every figure
    measured = [m for m in measured if any(_measured_cell(r, m.key) != "-" for r in study.records)]
    params = study.params()
    title = (f"study {study.name}: {counted(len(study.records), 'trial')}, {len(study.front())} on the Pareto front "
             f"({FRONT_MARK})")
    directions = ", ".join(f"{o.metric} {o.arrow}" for o in objectives)
    caption = f"objectives: {directions}; rank 0 = Pareto front"
    if any(r.confirmed is not None for r in study.records):
        caption += "; ✓ confirmed: mean of the re-runs (95% interval)"
    adjusted = adjusted_metrics(study)
    for key in sorted(adjusted):
        caption += f"; ranked on {study.ranked_on()[key]}"
    scheduled = study.scheduled
    if any(r.get("goodput") is not None for r in study.records):
        caption += "; goodput: samples/s x efficiency (x...) against the baseline's effective batch"
    if scheduled:
        caption += ("; ranked: complete trials only, at the top rung; stopped trials were measured at a lower "
                    "rung (see measured at) and are never ranked against them")
    table = Table(title=title, caption=caption, header_style="bold")
    for name in ("rank", "trial"):
        table.add_column(name, justify="right")
    table.add_column("state")
    if scheduled:
        table.add_column("measured at", justify="right")
    for o in objectives:
        table.add_column(o.metric, justify="right")
    for m in measured:
        table.add_column(m.label, justify="right")
    for p in params:
        table.add_column(p, justify="right")
    table.add_column("error", overflow="fold", max_width=40)
    for r in study.sorted_records():
        rank = study.rank(r)
        table.add_row(rank_cell(rank), f"{r.trial}{' ✓' if r.confirmed is not None else ''}", _state_cell(r),
                      *([study.measured_at(r) or "-"] if scheduled else []),
                      *[figure_text(study, r, o.metric, adjusted) for o in objectives],
                      *[_measured_cell(r, m.key) for m in measured],
                      *[escape(fmt_param(r, p)) for p in params], escape(str(r.error or "")),
                      style="bold" if rank == 0 else None)
    return table


def trial_panel(study: Study, record: TrialRecord) -> list[Any]:
    """Renderables for `tuner report STUDY --trial N`: params, metrics, windows, loss curve, grid, error."""
    from rich.table import Table

    rank = study.rank(record)
    where = "not ranked" if rank is None else f"rank {rank}"
    if rank == 0:
        where += f", on the Pareto front {FRONT_MARK}"
    if record.state == "stopped":
        where += ": measured at a lower rung, never ranked against trials that reached the top rung"
    out: list[Any] = [f"[bold]study {study.name}, trial {record.trial}[/bold]: "
                      f"{STATE_NOTES.get(record.state, record.state)} ({where})"]
    if study.measured_at(record):
        out.append(f"measured at: {study.measured_at(record)} of the trial budget (every figure below was taken "
                   f"there)")

    from tuner.knobs import KNOBS

    params = Table(title="params", show_header=False, title_justify="left")
    for k in record.params:  # each knob's role from tuner.knobs: what a change of it can cost in quality
        role = {"speed": "speed only", "learned": "changes what is learned",
                "numerics": "numerics (rounding)"}.get(getattr(KNOBS.get(k), "role", ""), "")
        params.add_row(escape(k), escape(fmt_param(record, k)), role)
    out.append(params)

    metrics = Table(title="metrics", show_header=False, title_justify="left")
    objective_keys = {o.metric for o in study.objectives}
    for o in study.objectives:
        better = "higher is better" if o.maximize else "lower is better"
        metrics.add_row(o.metric, fmt_metric(o.metric, record.get(o.metric)), f"{better}; the search's reading")
        if record.confirmed is not None and o.metric in record.confirmed.figures:
            metrics.add_row(*_confirmed_row(record, o.metric))
    target = study.target is not None and record.complete
    known = [m.key for m in METRICS]
    for key in known + sorted(k for k in record.metrics if k not in known):
        if key in TO_TARGET and target and key not in objective_keys:
            metrics.add_row(key, escape(fmt_metric(key, record.get(key)) if record.get(key) is not None else
                                        "not reached"), "the search's reading")
            if record.confirmed is not None:
                metrics.add_row(*_confirmed_row(record, key))
            continue
        if key in objective_keys or record.get(key) is None:
            continue
        if key in ("bound", "headroom"):  # the sentence below the table
            continue
        note = record_bound(record) if key == "data_wait" else ""
        metrics.add_row(escape(key), escape(fmt_metric(key, record.get(key)) + unit_suffix(key, record)), note)
    if record.optimizer:
        from tuner.study import optimizer_text

        metrics.add_row("optimizer", escape(optimizer_text(record.optimizer)), "what the trial trained with")
    if record.confirmed is not None and (record.get("suspect") or record.confirmed.suspect):
        metrics.add_row("suspect (re-runs)", escape(record.confirmed.suspect or "no: the re-runs clear it"),
                        "what the confirmation re-runs say (tuner.analysis.suspect)")
    env = record.environment
    if env is not None and env.others_share is not None:  # issue 58: a busy machine, said beside the figures
        load = f", load average {env.load1:.1f}" if env.load1 is not None else ""
        metrics.add_row("other processes", f"{env.others_share:.0%} of its CPUs ({env.others_cpus or 0:.1f} CPUs"
                        f"{load})", "busy: its throughput moves with that load" if env.busy else
                        "what others took while it trained")
    for key in ("capped", "device"):
        metrics.add_row(key, escape(fmt(record.get(key))), "")
    for key in ("host", "node"):  # where it ran (a Ray cluster has several nodes)
        if record.get(key):
            metrics.add_row(key, escape(str(record.get(key))), "")
    out.append(metrics)

    if record.windows:
        out.append(f"throughput windows (samples/s): {' '.join(fmt(w) for w in record.windows)}  "
                   f"{sparkline(record.windows)}")
    if record.loss_curve:
        losses = [p[1] for p in record.loss_curve]
        out.append(f"loss curve: {fmt(losses[0])} -> {fmt(losses[-1])} over {fmt(record.loss_curve[-1][0])} "
                   f"samples  {sparkline(losses)}")
    if record.quality_curve:
        out.append(quality_curve_text(study, record))
    grid = study.sample_grid(record)
    if grid is not None:
        out.append(escape(f"sample grid: {grid}") + ("" if grid.is_file() else " (missing)"))
    if record.error:
        out.append(f"[red]error:[/red] {escape(record.error)}")
    if record.traceback:
        out.append(f"[dim]{escape(record.traceback.rstrip())}[/dim]")
    payback = study_payback(record, study.records)
    if payback:
        out.append(f"[bold]compile:[/bold] {escape(payback)}")
    if record.get("goodput") is not None:
        out.append(f"[bold]goodput:[/bold] {escape(goodput_text(record))}")
    if record.get("headroom"):
        out.append(f"[bold]headroom:[/bold] {escape(str(record.get('headroom')))}")
    if record.get("data_wait") is not None:
        out.append(f"[dim]{BOUND_EXPLANATION}[/dim]")
    return out


def _confirmed_row(record: TrialRecord, key: str) -> tuple[str, str, str]:
    """`KEY confirmed`, the confirmed figure with its interval and what it is read over (--trial's metrics)."""
    fig = record.confirmed.figures.get(key) if record.confirmed is not None else None
    values = " ".join(fmt_metric(key, v) for v in fig.values) if fig is not None else ""
    if key in TO_TARGET:
        runs = fig.runs if fig is not None else None
        note = (f"its re-runs (each another seed; the search's reading left out), 95% interval over them: "
                f"{values or 'none'}" + (f", {fig.not_reached} of {runs} not reached" if fig and fig.not_reached
                                         else ""))
    else:
        note = f"re-runs: {values}"
    return f"{key} confirmed", escape(fmt_figure(record, key)), escape(note)


def quality_curve_text(study: Study, record: TrialRecord) -> str:
    """The quality curve of a study with a target: each evaluation's samples, training seconds and quality."""
    target = study.target
    name = target.metric if target is not None else "quality"
    points = "  ".join(f"{int(s):,}: {fmt(q) if q is not None else '-'} ({t:.3g} s)" for s, t, q in record.quality_curve)
    first = f"; target {target.describe()}" if target is not None else ""
    qualities = [q for _, _, q in record.quality_curve if q is not None]
    return escape(f"quality curve ({name} at samples, training s{first}): {points}") + (
        f"  {sparkline(qualities)}" if qualities else "")


def goodput_text(record: TrialRecord) -> str:
    """One sentence: the trial's goodput, what it is made of, and what its effective batch costs in samples."""
    eff, m = record.value("efficiency"), record.value("effective_batch")
    phi = record.value("baseline_noise_scale")
    good = record.value("goodput")
    made_of = good / eff if good is not None and eff else record.get("throughput")  # the table's, drift-adjusted
    text = (f"{fmt_metric('goodput', good)} useful samples/s = throughput "
            f"{fmt_metric('throughput', made_of)} x efficiency {fmt_metric('efficiency', eff)}")
    if eff is not None and m is not None and phi is not None:
        text += (f" (effective batch {m:.0f} against the baseline's noise scale {phi:.0f}: "
                 f"{1 / eff:.2f}x the baseline's samples to the same loss)")
    return text


def study_footer(study: Study) -> list[str]:
    """Below the table: the study's noise floor and the verdict on its knee pick."""
    from tuner.errors import StudyError
    from tuner.analysis import decide

    out = [line] if (line := study.target_text()) is not None else []
    noise = study.noise()
    if noise is not None:
        out.append(f"noise floor: {noise.text()}")
    try:
        out.append(f"pick: {decide(study, 'knee').text}")
    except StudyError:
        pass
    from tuner.knobs import parity_probed, probed

    loaders = study.loader_plan()
    if loaders is not None:
        which = "loader" if set(loaders.knobs) <= set(probed("input")) else "speed"
        if set(loaders.knobs) & set(parity_probed()):  # a precision or TF32 parity found within seed noise
            which += " and numerics"
        out.append(f"{which} knobs by probes ({loaders.seconds:.0f} s, before the trials): {loaders.describe()}")
    parity = read_parity(study.dir)
    if parity is not None:
        out.extend(parity.lines())
    horizon = read_horizon(study.dir)
    if horizon is not None:
        out.append(horizon.line())
    return out


def counted(n: int, noun: str) -> str:
    """`1 trial`, `2 trials`: a count with its noun, as the views print one."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
