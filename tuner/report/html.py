"""`tuner report --format html`: one self-contained HTML file (inline CSS and SVG, images as data URIs, no script).

Nothing is loaded from the network, so the report opens offline and can be mailed or archived as one file. This
module turns a Study into a plain context (strings, numbers, lists, dicts; the SVG plots of `tuner.report.plots`
as Markup) and renders `templates/report.html.j2` with jinja2, autoescaping on: every piece of user text (errors,
params, paths) is escaped by the template, never by hand.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from tuner.errors import StudyError
from tuner.files import atomic_write
from tuner.report import plots
from tuner.study import (
    METRICS, STATE_COLORS, STATE_NOTES, TO_TARGET, TrialRecord, finite, fmt, fmt_figure, fmt_metric, fmt_param,
    metric, read_horizon, read_parity, unit_suffix,
)
from tuner.analysis import BOUND_EXPLANATION, Study, record_bound, study_payback
from tuner.report.view import FRONT_MARK, adjusted_metrics, figure_text, rank_cell
from tuner.knobs import role_text

REPORT_FILE = "report.html"
TEMPLATE = "report.html.j2"
MAX_EMBEDDED_GRIDS = 60  # sample grids beyond this (in rank order) are listed by path, to keep the file small
PICKS = (("knee", "balanced (knee)"), ("throughput", "fastest on the front"), ("quality", "best quality"))


@functools.cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("tuner.report"),
        autoescape=jinja2.select_autoescape(("html", "j2"), default=True),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def render_html(study: Study) -> str:
    """The whole report as one HTML string."""
    return environment().get_template(TEMPLATE).render(context(study))


def write_html(study: Study, out: Path | None = None) -> Path:
    """Write `<study>/report.html` (or `out`) atomically and return its path."""
    return atomic_write(Path(out) if out is not None else study.dir / REPORT_FILE, render_html(study))


# ---------------------------------------------------------------------------------------------------- context


def context(study: Study) -> dict[str, Any]:
    """Everything the template shows, as plain data."""
    picks, knee_trial, verdict = _picks(study)
    noise = study.noise()
    records = study.sorted_records()
    with_grid = [r.trial for r in records if study.sample_grid(r) is not None]
    embed = set(with_grid[:MAX_EMBEDDED_GRIDS])
    q = study.quality
    meta = study.meta
    n_bound: dict[str, int] = {}
    for r in study.records:
        if label := record_bound(r):
            n_bound[label] = n_bound.get(label, 0) + 1
    return {
        "name": study.name,
        "what": " ".join(x for x in (meta.workload, "on" if meta.dataset else "", meta.dataset or "") if x),
        "budget": _budget(study),
        "n_trials": len(study.records),
        "counts": ", ".join(f"{n} {s}" for s, n in study.state_counts().items()) or "none finished yet",
        "n_front": len(study.front()),
        "front_mark": FRONT_MARK,
        "quality": metric(q.metric).label if q is not None else "quality",
        "picks": picks,
        "verdict": verdict,
        "noise": (f"one config's throughput varies by {noise.relative_sd:.1%} run to run here ({noise.runs} re-runs "
                  f"of {noise.configs} configs, interleaved after the search)") if noise is not None else "",
        "parity": (parity.lines() if (parity := read_parity(study.dir)) is not None else []),
        # the horizon check (`tuner export --horizon`, `tuner search --horizon`): the line the text report shows
        "horizon": (horizon.line() if (horizon := read_horizon(study.dir)) is not None else ""),
        "pareto_svg": Markup(plots.pareto_svg(study, knee_trial)),
        "table": trials_table(study),
        "bound_explanation": BOUND_EXPLANATION,
        "bound_counts": ", ".join(f"{n} {k}" for k, n in sorted(n_bound.items())),
        "data_wait_svg": Markup(plots.data_wait_svg(study)),
        "trials": [trial_detail(study, r, r.trial in embed) for r in records],
        "provenance": provenance(study),
        "state_colors": {s: hex_ for s, (_, hex_) in STATE_COLORS.items()},
        "bound_colors": plots.BOUND_COLORS,
    }


def _budget(study: Study) -> str:
    text = study.meta.describe_budget()
    return f"{text} per trial" if text else ""


def _item(key: str, value: Any) -> dict[str, Any]:
    """A key/value line: dicts and lists as compact JSON in <code>, the rest as short text."""
    if isinstance(value, (dict, list)):
        return {"key": key, "text": json.dumps(value, default=str), "code": True, "title": "", "bound": ""}
    return {"key": key, "text": fmt(value) if value is None or isinstance(value, (float, bool)) else str(value),
            "code": False, "title": "", "bound": ""}


def _metric_text(key: str, value: Any, unit: bool = False) -> str:
    text = fmt_metric(key, value)
    m = metric(key)
    return f"{text} {m.unit}" if unit and m.unit and finite(value) is not None else text


def _metric_cell(record: TrialRecord, key: str, study: Study | None = None,
                 adjusted: set[str] | None = None) -> dict[str, str]:
    value = record.get(key)
    if study is not None and adjusted and key in adjusted:  # the figure the front and the pick rank by
        return {"text": figure_text(study, record, key, adjusted), "bound": ""}
    if key in TO_TARGET:  # confirmed over the re-runs, not-reached runs counted (as the table)
        return {"text": fmt_figure(record, key), "bound": ""}
    return {"text": _metric_text(key, value) + unit_suffix(key, record),
            "bound": record_bound(record) if key == "data_wait" else ""}


def split_batch_statistics(study: Study) -> bool | None:
    """For a study that kept its effective batch and searched its split (issue 40): whether the pre-flight found
    batch-statistics layers in the models (study.json's preflight), which make the split a learning knob; None for
    any other study, or one from before the pre-flight looked."""
    space = study.meta.space_def if isinstance(study.meta.space_def, dict) else {}
    params = space.get("params") if isinstance(space.get("params"), dict) else {}
    found = study.meta.preflight.batch_statistics if study.meta.preflight is not None else None
    searched = isinstance(params.get("batch_size"), dict) and "type" in params["batch_size"]
    if not searched or "effective_batch" in space or not isinstance(found, list):
        return None
    return bool(found)


def trials_table(study: Study) -> dict[str, Any]:
    """Columns: rank, trial, state, the objectives, the metric list's table columns, the params, the error."""
    objectives = study.objectives
    keys = [o.metric for o in objectives]
    keys += [m.key for m in study.table_columns() if m.key not in keys]
    params = study.params()
    arrows = {o.metric: f" {o.arrow}" for o in objectives}
    columns = [{"label": metric(k).label + arrows.get(k, ""), "title": metric(k).help} for k in keys]
    split = split_batch_statistics(study)
    columns += [{"label": p, "title": f"searched param: {role_text(p, batch_statistics=split)}"} for p in params]
    scheduled = study.scheduled
    if scheduled:  # first after the state: the rung and budget every figure of the row was taken at
        columns.insert(0, {"label": "measured at", "title": "the rung and the budget used when the trial's figures "
                           "were taken; only complete trials (the top rung) are ranked"})
    rows = []
    adjusted = adjusted_metrics(study)
    for r in study.sorted_records():
        rank = study.rank(r)
        rows.append({
            "trial": r.trial,
            "class": "front" if rank == 0 else ("stopped" if r.state == "stopped" else
                                                "failed" if not r.complete else ""),
            "rank": rank_cell(rank),
            "state": r.state,
            "note": f" (rung {r.rung})" if r.state == "stopped" and r.rung is not None else "",
            "capped": r.capped,
            "cells": ([{"text": study.measured_at(r) or "-", "bound": ""}] if scheduled else [])
            + [_metric_cell(r, k, study, adjusted) for k in keys] + [{"text": fmt_param(r, p), "bound": ""} for p in params],
            "error": r.error or "",
        })
    ranked_on = study.ranked_on()
    notes = [ranked_on[k] for k in sorted(adjusted)]
    return {"columns": columns, "rows": rows, "notes": notes}


def _measured(study: Study, r: TrialRecord) -> list[dict[str, Any]]:
    """Every metric the record carries: the known ones in the metric list's order, then the others."""
    arrows = {o.metric: f" {o.arrow}" for o in study.objectives}
    known = [m.key for m in METRICS]
    out = []
    for key in known + [k for k in r.metrics if k not in known]:
        value = r.get(key)
        to_target = key in TO_TARGET and study.target is not None and r.complete
        if (value is None and not to_target) or key in ("bound", "headroom"):  # above the list, as a sentence
            continue
        m = metric(key)
        text = (_metric_text(key, value) + unit_suffix(key, r)) if unit_suffix(key, r) else \
            _metric_text(key, value, unit=True)
        if to_target:  # confirmed over the re-runs, not-reached runs counted; or `not reached`
            text = fmt_figure(r, key)  # the label says the unit (`to target s`)
        out.append({"key": m.label + arrows.get(key, ""), "text": text,
                    "title": m.help, "bound": record_bound(r) if key == "data_wait" else "", "code": False})
    return out


def _grid(study: Study, r: TrialRecord, embed: bool) -> dict[str, str] | None:
    path = study.sample_grid(r)
    if path is None:
        return None
    uri = _image_data_uri(path) if embed else None
    note = "" if uri else ("not embedded (too many grids)" if path.is_file() else "file missing")
    return {"uri": uri or "", "path": str(path), "note": note}


def _image_data_uri(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    mime = ("image/png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "image/jpeg" if data[:2] == b"\xff\xd8"
            else "image/gif" if data[:4] == b"GIF8" else None)
    if mime is None:
        return None
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def trial_detail(study: Study, r: TrialRecord, embed_grid: bool) -> dict[str, Any]:
    rank = study.rank(r)
    q = study.quality
    headline = [f"trial {r.trial}", STATE_NOTES.get(r.state, r.state)]
    if r.throughput is not None:
        headline.append(_metric_text("throughput", r.throughput, unit=True))
    if q is not None and r.get(q.metric) is not None:
        headline.append(f"{metric(q.metric).label} {fmt_metric(q.metric, r.get(q.metric))}")
    if rank is not None:
        headline.append(f"rank {rank}" + (f" {FRONT_MARK} front" if rank == 0 else ""))
    if study.measured_at(r):
        headline.append(f"measured at {study.measured_at(r)}")
    run = [_item(k.replace("_", " "), r.get(k)) for k in ("device", "capped", "run_seconds", "started", "ended")
           if r.get(k) not in (None, "")]
    return {
        "trial": r.trial,
        "open": rank == 0,
        "summary": " · ".join(headline),
        "headroom": r.get("headroom") or "",
        "compile": study_payback(r, study.records) or "",
        "params": [_item(k, v) for k, v in r.params.items()],
        "knobs": [{"name": k, "value": _item(k, v)["text"],
                   "role": role_text(k, batch_statistics=split_batch_statistics(study))} for k, v in r.params.items()],
        "measured": _measured(study, r) + run,
        "windows_svg": Markup(plots.windows_svg(r)),
        "loss_svg": Markup(plots.loss_svg(r)),
        "grid": _grid(study, r, embed_grid),
        "error": r.error or "",
        "traceback": (r.traceback or "").rstrip(),
    }


def _picks(study: Study) -> tuple[list[dict[str, Any]], int | None, str]:
    """One card per --pick rule (ties within the noise resolved as the export resolves them), the knee's trial,
    and the verdict on the knee pick."""
    from tuner.study import fmt_figure
    from tuner.analysis import decide

    cards = []
    adjusted = adjusted_metrics(study)
    knee_trial, verdict = None, ""
    q = study.quality
    for pick, label in PICKS:
        try:
            v = decide(study, pick)  # type: ignore[arg-type]
        except StudyError as err:
            cards.append({"label": label, "error": str(err)})
            continue
        r = v.pick
        if pick == "knee":
            knee_trial, verdict = r.trial, v.text
        quality = f", {metric(q.metric).label} {fmt_figure(r, q.metric)}" if q is not None else ""
        mark = " (confirmed)" if r.confirmed is not None else ""
        cards.append({"label": label, "error": "", "trial": r.trial,
                      "text": f"{figure_text(study, r, 'throughput', adjusted)} {metric('throughput').unit}"
                              f"{quality}{mark}",
                      "command": f"tuner export {study.name} --pick {pick}"})
    return cards, knee_trial, verdict


def _shown_storage(url: str | None) -> str | None:
    """A report is what people share: the storage URL with its password masked (a study.json written before
    tuner masked it may hold it in clear)."""
    from tuner.search import shown_url

    return shown_url(url) if url else url


def provenance(study: Study) -> dict[str, Any]:
    meta = study.meta.model_dump(mode="json")
    starts = sorted(str(r.started) for r in study.records if r.started)
    ends = sorted(str(r.ended) for r in study.records if r.ended)
    items = [
        ("study", study.name),
        ("folder", str(study.dir)),
        ("created", meta.get("created")),
        ("trials ran", f"{starts[0]} to {ends[-1]}" if starts and ends else None),
        ("report written", dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")),
        ("workload", meta.get("workload")),
        ("dataset", meta.get("dataset")),
        ("budget", _budget(study)),
        ("trials asked for", meta.get("trials")),
        ("objectives", ", ".join(f"{o.metric} ({o.direction})" for o in study.objectives)),
        ("target", study.target_text()),
        ("sampler", meta.get("sampler")),
        ("seed", meta.get("seed")),
        ("space", meta.get("space")),
        ("space source", meta.get("space_source")),
        ("searched params", ", ".join(study.params())),
        ("Optuna storage", _shown_storage(meta.get("storage"))),
    ]
    sections = []
    for key, title in (("hardware", "hardware"), ("resources", "resources per trial"),
                       ("versions", "library versions")):
        value = meta.get(key)
        if isinstance(value, dict) and value:
            lines = [_item(k, v) for k, v in value.items() if v not in (None, "")]
            sections.append({"title": title, "lines": lines})
    space = meta.get("space_def")
    if space is None or isinstance(space, str):
        space_text = space or ""
    else:
        import yaml

        space_text = yaml.safe_dump(json.loads(json.dumps(space, default=str)), sort_keys=False, width=100,
                                    default_flow_style=None)
    return {
        "lines": [_item(k, v) for k, v in items if v not in (None, "")],
        "sections": sections,
        "space": space_text,
        "storage": _shown_storage(meta.get("storage")) or f"sqlite:///{study.folder.db_path}",
    }
