"""`tuner report --format html`: one self-contained file, rendered from templates/report.html.j2.

Nothing is loaded from the network and nothing runs in it (no script): it opens offline and can be mailed or
archived as one file. This module only turns a Study into plain values for the template; the drawings are in
tuner.report.plots, the markup in the template.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any

from tuner.errors import StudyError
from tuner.report.bottleneck import BOUND_EXPLANATION, bound_label
from tuner.report.plots import COLORS, FRONT_MARK, data_wait_svg, loss_svg, pareto_svg, windows_svg
from tuner.study import Study, TrialRecord, choose
from tuner.study.format import STATE_NOTES, fmt, fmt_metric
from tuner.study.metrics import METRICS, metric, table_columns

REPORT_FILE = "report.html"
MAX_EMBEDDED_GRIDS = 60  # sample grids beyond this (in rank order) are listed by path, to keep the file small
PICKS = (("knee", "balanced (knee)"), ("throughput", "fastest on the front"), ("quality", "best quality"))


def _markup(html: str) -> Any:
    from markupsafe import Markup

    return Markup(html)


def _image_data_uri(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    mime = ("image/png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "image/jpeg" if data[:2] == b"\xff\xd8"
            else "image/gif" if data[:4] == b"GIF8" else None)
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}" if mime else None


def _bound_badge(wait: Any) -> Any:
    from markupsafe import escape

    label = bound_label(wait)
    if not label:
        return "-"
    return _markup(f'{escape(fmt_metric("data_wait", wait))} <span class="bound" '
                   f'style="background:{COLORS[label]}">{escape(label)}</span>')


def _value(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    return fmt(value) if value is None or isinstance(value, (float, bool)) else str(value)


def _columns(study: Study) -> tuple[list[dict[str, str]], list[str], list[str]]:
    objectives = [o.metric for o in study.objectives]
    measured = [m.key for m in table_columns() if m.key not in objectives]
    cols = [{"label": "rank", "cls": ""}, {"label": "trial", "cls": ""}, {"label": "state", "cls": "l"}]
    cols += [{"label": f"{o.metric} {o.arrow}", "cls": ""} for o in study.objectives]
    cols += [{"label": metric(k).label, "cls": ""} for k in measured]
    cols += [{"label": p, "cls": ""} for p in study.params()] + [{"label": "error", "cls": "l"}]
    return cols, measured, study.params()


def _row(study: Study, r: TrialRecord, measured: list[str], params: list[str]) -> dict[str, Any]:
    from markupsafe import escape

    rank = study.rank(r)
    state = _markup(f'<span class="state-{escape(r.state)}">{escape(r.state)}</span>'
                    + (" (capped)" if r.capped else ""))
    cells: list[dict[str, Any]] = [
        {"html": f"{FRONT_MARK} 0" if rank == 0 else ("-" if rank is None else str(rank)), "cls": ""},
        {"html": _markup(f'<a href="#trial-{r.trial}">{r.trial}</a>'), "cls": ""},
        {"html": state, "cls": "l"},
    ]
    cells += [{"html": fmt_metric(o.metric, r.get(o.metric)), "cls": ""} for o in study.objectives]
    cells += [{"html": _bound_badge(r.get(k)) if k == "data_wait" else fmt_metric(k, r.get(k)), "cls": ""}
              for k in measured]
    cells += [{"html": fmt(r.params.get(p)), "cls": ""} for p in params]
    cells.append({"html": r.error or "", "cls": "err"})
    cls = "front" if rank == 0 else ("failed" if not r.complete else "")
    return {"trial": r.trial, "cls": cls, "cells": cells}


def _measured_items(study: Study, r: TrialRecord) -> list[tuple[str, Any]]:
    objectives = {o.metric for o in study.objectives}
    items: list[tuple[str, Any]] = [(o.metric, fmt_metric(o.metric, r.get(o.metric))) for o in study.objectives]
    known = [m.key for m in METRICS]
    for key in known + sorted(k for k in r.metrics if k not in known):
        if key in objectives or r.get(key) is None:
            continue
        value = _bound_badge(r.get(key)) if key == "data_wait" else \
            f"{fmt_metric(key, r.get(key))} {metric(key).unit}".rstrip()
        items.append((metric(key).label, value))
    items += [("capped", "yes" if r.capped else None), ("device", r.device or None),
              ("started", r.started), ("ended", r.ended)]
    return items


def _detail(study: Study, r: TrialRecord, embed_grid: bool) -> dict[str, Any]:
    rank = study.rank(r)
    q = study.quality
    headline = [f"trial {r.trial}", STATE_NOTES.get(r.state, r.state)]
    if r.throughput is not None:
        headline.append(f"{fmt_metric('throughput', r.throughput)} samples/s")
    if q is not None and r.get(q.metric) is not None:
        headline.append(f"{q.metric} {fmt_metric(q.metric, r.get(q.metric))}")
    if rank is not None:
        headline.append(f"rank {rank}" + (f" {FRONT_MARK} front" if rank == 0 else ""))
    grid = None
    path = study.sample_grid(r)
    if path is not None:
        uri = _image_data_uri(path) if embed_grid else None
        why = "not embedded (too many grids)" if not embed_grid and path.is_file() else "file missing"
        grid = {"uri": uri, "path": str(path), "why": why}
    return {"trial": r.trial, "open": rank == 0, "headline": " · ".join(headline),
            "params": [(k, _value(v)) for k, v in r.params.items()], "measured": _measured_items(study, r),
            "windows_svg": _markup(windows_svg(r)), "loss_svg": _markup(loss_svg(r)), "grid": grid,
            "error": r.error, "traceback": r.traceback}


def _picks(study: Study) -> tuple[list[dict[str, Any]], int | None]:
    cards, knee_trial = [], None
    q = study.quality
    for rule, label in PICKS:
        try:
            r = choose(study.records, study.objectives, rule, study=study.name, value=study.value)  # type: ignore[arg-type]
        except StudyError as err:
            cards.append({"label": label, "error": str(err)})
            continue
        if rule == "knee":
            knee_trial = r.trial
        figures = f"{fmt_metric('throughput', r.throughput)} samples/s"
        if q is not None:
            figures += f", {q.metric} {fmt_metric(q.metric, r.get(q.metric))}"
        cards.append({"label": label, "trial": r.trial, "figures": figures, "rule": rule, "error": None})
    return cards, knee_trial


def _provenance(study: Study) -> tuple[list[tuple[str, Any]], list[dict[str, Any]], str | None]:
    meta = study.meta
    starts = sorted(r.started for r in study.records if r.started)
    ends = sorted(r.ended for r in study.records if r.ended)
    items = [
        ("study", study.name), ("folder", str(study.dir)), ("created", meta.created),
        ("trials ran", f"{starts[0]} to {ends[-1]}" if starts and ends else None),
        ("report written", dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")),
        ("workload", meta.workload), ("workload options", _value(meta.workload_options) if meta.workload_options
                                      else None),
        ("dataset", meta.dataset), ("budget", meta.describe_budget() + " per trial" if meta.budget else None),
        ("trials asked for", meta.trials), ("objectives", ", ".join(o.describe() for o in study.objectives)),
        ("sampler", meta.sampler), ("seed", meta.seed), ("space", meta.space), ("space source", meta.space_source),
        ("searched params", ", ".join(study.params())), ("Optuna storage", meta.storage),
    ]
    sections = [{"title": title, "items": [(k, _value(v)) for k, v in value.items()]}
                for key, title in (("hardware", "hardware"), ("resources", "resources per trial"),
                                   ("versions", "library versions"))
                if isinstance(value := getattr(meta, key), dict) and value]
    space_yaml = None
    if meta.space_def is not None:
        import yaml

        space_yaml = yaml.safe_dump(json.loads(json.dumps(meta.space_def, default=str)), sort_keys=False, width=100,
                                    default_flow_style=None)
    return items, sections, space_yaml


def context(study: Study) -> dict[str, Any]:
    """Everything the template shows, as plain values (SVG and badges as Markup)."""
    sorted_records = study.sorted_records()
    order = [r.trial for r in sorted_records]
    with_grid = [r.trial for r in sorted_records if study.sample_grid(r) is not None]
    embed = set(sorted(with_grid, key=order.index)[:MAX_EMBEDDED_GRIDS])
    picks, knee_trial = _picks(study)
    columns, measured, params = _columns(study)
    bounds: dict[str, int] = {}
    for r in study.records:
        if label := bound_label(r.get("data_wait")):
            bounds[label] = bounds.get(label, 0) + 1
    counts = ", ".join(f"{n} {s}" for s, n in study.state_counts().items()) or "none finished yet"
    meta = study.meta
    what = " ".join(x for x in (meta.workload, "on" if meta.dataset else "", meta.dataset or "") if x)
    subtitle = [what, f"{meta.describe_budget()} per trial" if meta.budget else "",
                f"{len(study.records)} trials: {counts}", f"{len(study.front())} on the Pareto front"]
    provenance, sections, space_yaml = _provenance(study)
    q = study.quality
    return {
        "name": study.name, "subtitle": [s for s in subtitle if s], "picks": picks,
        "pareto_svg": _markup(pareto_svg(study, knee_trial)), "quality_name": q.metric if q else "quality",
        "columns": columns, "rows": [_row(study, r, measured, params) for r in sorted_records],
        "front_mark": FRONT_MARK, "bound_explanation": BOUND_EXPLANATION,
        "bound_text": ", ".join(f"{n} {k}" for k, n in sorted(bounds.items())),
        "data_wait_svg": _markup(data_wait_svg(study)),
        "details": [_detail(study, r, r.trial in embed) for r in sorted_records],
        "provenance": provenance, "provenance_sections": sections, "space_yaml": space_yaml,
        "storage": meta.storage or f"sqlite:///{study.dir / 'study.db'}",
    }


def render_html(study: Study) -> str:
    """The whole report as one HTML string."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                             autoescape=True, trim_blocks=False, undefined=jinja2.StrictUndefined)
    return env.get_template("report.html.j2").render(**context(study))


def write_html(study: Study, out: Path | None = None) -> Path:
    """Write `<study>/report.html` (or `out`) atomically and return its path."""
    from tuner.files import atomic_write

    path = Path(out) if out is not None else study.dir / REPORT_FILE
    return atomic_write(path, render_html(study))
