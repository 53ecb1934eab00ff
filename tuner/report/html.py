"""`tuner report --format html`: one self-contained HTML file (inline CSS and SVG, images as data URIs).

Nothing is loaded from the network, so the report opens offline and can be mailed or archived as one file.
Plots are SVG written here rather than a plotting library: small, crisp at any zoom, and each point carries a
tooltip and a link to its trial.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from html import escape
from pathlib import Path
from typing import Any

from tuner.errors import StudyError
from tuner.report.bottleneck import BOUND_EXPLANATION, COMPUTE_BOUND_BELOW, INPUT_BOUND_ABOVE, bound_label
from tuner.report.view import FRONT_MARK
from tuner.study import Study, TrialRecord, choose
from tuner.study.format import STATE_NOTES, fmt

REPORT_FILE = "report.html"
MAX_EMBEDDED_GRIDS = 60  # sample grids beyond this (in rank order) are listed by path, to keep the file small

COLORS = {
    "front": "#1f6feb",
    "dominated": "#8c959f",
    "oom": "#cf222e",
    "diverged": "#bc4c00",
    "error": "#6e40c9",
    "noscore": "#57606a",
    "input-bound": "#cf222e",
    "mixed": "#9a6700",
    "compute-bound": "#1a7f37",
}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#1f2328;
  margin:0 auto;max-width:1200px;padding:16px 24px 48px;background:#fff}
h1{font-size:24px;margin:8px 0 2px} h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #d0d7de;
  padding-bottom:4px} h3{font-size:15px;margin:10px 0 4px}
.sub{color:#57606a;margin:0 0 8px} .note{color:#57606a;font-size:13px;max-width:900px}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f6f8fa;border-radius:4px}
code{padding:1px 4px} pre{padding:8px;overflow:auto;max-height:360px}
table{border-collapse:collapse;font-size:13px} th,td{padding:3px 8px;border-bottom:1px solid #eaeef2;text-align:right;
  white-space:nowrap} th{background:#f6f8fa;position:sticky;top:0} td.l,th.l{text-align:left}
td.err{white-space:normal;max-width:360px;text-align:left;color:#cf222e}
tr.front td{background:#ddf4ff} tr.failed td{color:#57606a}
.tablewrap{overflow:auto;max-height:640px;border:1px solid #d0d7de;border-radius:6px}
.state-complete{color:#1a7f37} .state-oom,.state-error{color:#cf222e} .state-diverged{color:#bc4c00}
.cards{display:flex;flex-wrap:wrap;gap:12px} .card{border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;
  min-width:220px} .card b{font-size:16px}
details{border:1px solid #d0d7de;border-radius:6px;margin:8px 0;padding:4px 12px}
details[open]{padding-bottom:12px} summary{cursor:pointer;font-weight:600;padding:4px 0}
.detail{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start} .detail table td{text-align:left}
.grid img{image-rendering:pixelated;width:256px;border:1px solid #d0d7de}
svg text{font-family:system-ui,sans-serif} .plot{max-width:100%;height:auto}
.bound{padding:0 4px;border-radius:3px;color:#fff;font-size:12px}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0} dl.kv dt{color:#57606a}
dl.kv dd{margin:0;overflow-wrap:anywhere}
"""

# Written into the page so a headless browser (the test) can read back what actually rendered.
MARKER_SCRIPT = """
window.addEventListener('load', function () {
  var plot = document.getElementById('pareto-plot');
  var pts = plot ? plot.querySelectorAll('.pt') : [];
  var box = plot ? plot.getBoundingClientRect() : {width: 0, height: 0};
  var drawn = 0;
  for (var i = 0; i < pts.length; i++) { var b = pts[i].getBBox(); if (b.width > 0 && b.height > 0) drawn++; }
  var imgs = Array.prototype.slice.call(document.images);
  var rows = document.querySelectorAll('#trials-table tbody tr').length;
  document.body.setAttribute('data-rendered', JSON.stringify({
    plot_width: box.width, plot_height: box.height, points: pts.length, points_drawn: drawn, rows: rows,
    images: imgs.length,
    images_decoded: imgs.filter(function (im) { return im.complete && im.naturalWidth > 0; }).length
  }));
});
"""


# ---------------------------------------------------------------------------------------------------- scales


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks, t = [], first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    return ticks


def log_ticks(lo: float, hi: float) -> list[float]:
    ticks = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10**e
            if lo <= v <= hi:
                ticks.append(float(v))
    return ticks


class Scale:
    """Maps data values to pixels, linear or log, with a little padding so points are not on the frame."""

    def __init__(self, values: list[float], px_lo: float, px_hi: float, *, log: bool = False, pad: float = 0.06,
                 zero: bool = False) -> None:
        lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
        if zero:
            lo = min(lo, 0.0)
        self.log = log and lo > 0
        if self.log:
            lo, hi = math.log10(lo), math.log10(hi)
        if hi == lo:
            lo, hi = (lo - 0.5, hi + 0.5) if self.log or lo == 0 else (lo - abs(lo) * 0.1, hi + abs(hi) * 0.1)
        span = hi - lo
        self.lo, self.hi = lo - (0 if zero else span * pad), hi + span * pad
        self.px_lo, self.px_hi = px_lo, px_hi

    def __call__(self, value: float) -> float:
        v = math.log10(value) if self.log else value
        return self.px_lo + (v - self.lo) / (self.hi - self.lo) * (self.px_hi - self.px_lo)

    def ticks(self, count: int = 5) -> list[float]:
        if self.log:
            return log_ticks(10**self.lo, 10**self.hi) or [10**self.lo, 10**self.hi]
        return nice_ticks(self.lo, self.hi, count)


def _t(x: float, y: float, text: str, anchor: str = "middle", size: int = 11, extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" {extra}>{escape(text)}</text>'


def _axes(sx: Scale, sy: Scale, x0: float, x1: float, y0: float, y1: float, xlabel: str, ylabel: str,
          grid: bool = True, tick_count: int = 5) -> list[str]:
    """Frame, grid lines, ticks and labels. (x0, y0) is the bottom-left corner in pixels, (x1, y1) the top-right."""
    out = [f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" fill="#fff" stroke="#d0d7de"/>']
    for v in sx.ticks(tick_count):
        x = sx(v)
        if x0 - 0.5 <= x <= x1 + 0.5:
            if grid:
                out.append(f'<line x1="{x:.1f}" y1="{y1}" x2="{x:.1f}" y2="{y0}" stroke="#eaeef2"/>')
            out.append(_t(x, y0 + 14, fmt(v, 4), size=10, extra='fill="#57606a"'))
    for v in sy.ticks(tick_count):
        y = sy(v)
        if y1 - 0.5 <= y <= y0 + 0.5:
            if grid:
                out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#eaeef2"/>')
            out.append(_t(x0 - 5, y + 3.5, fmt(v, 4), anchor="end", size=10, extra='fill="#57606a"'))
    if xlabel:
        out.append(_t((x0 + x1) / 2, y0 + 30, xlabel, size=12))
    if ylabel:
        cy = (y0 + y1) / 2
        out.append(f'<text x="14" y="{cy:.1f}" text-anchor="middle" font-size="12" '
                   f'transform="rotate(-90 14 {cy:.1f})">{escape(ylabel)}</text>')
    return out


def _marker(kind: str, x: float, y: float, r: float = 5.5) -> str:
    """A failure marker: oom a cross, diverged a triangle, error a square, a complete trial without score a ring."""
    c = COLORS.get(kind, COLORS["error"])
    if kind == "oom":
        return (f'<path class="pt" d="M{x - r:.1f},{y - r:.1f}L{x + r:.1f},{y + r:.1f}M{x - r:.1f},{y + r:.1f}'
                f'L{x + r:.1f},{y - r:.1f}" stroke="{c}" stroke-width="2.4" fill="none"/>')
    if kind == "diverged":
        return (f'<path class="pt" d="M{x:.1f},{y - r:.1f}L{x + r:.1f},{y + r * 0.8:.1f}'
                f'L{x - r:.1f},{y + r * 0.8:.1f}Z" fill="{c}"/>')
    if kind == "noscore":
        return (f'<circle class="pt" cx="{x:.1f}" cy="{y:.1f}" r="{r - 1:.1f}" fill="none" stroke="{c}" '
                f'stroke-width="2"/>')
    side = 2 * r - 2
    return f'<rect class="pt" x="{x - r + 1:.1f}" y="{y - r + 1:.1f}" width="{side:.1f}" height="{side:.1f}" fill="{c}"/>'


def _tooltip(study: Study, r: TrialRecord) -> str:
    parts = [f"trial {r.trial}: {STATE_NOTES.get(str(r.get('state')), r.get('state'))}"]
    for o in study.objectives:
        parts.append(f"{o.metric} {fmt(r.get(o.metric))}")
    parts += [f"{k}={fmt(v)}" for k, v in (r.params).items()]
    if r.get("error"):
        parts.append(str(r.error))
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------------- plots


def pareto_svg(study: Study, knee_trial: int | None) -> str:
    """Throughput (x) against quality (y) for ranked trials; the front joined by a line; failures in a strip below."""
    W, H = 760, 470
    x0, x1, y1, y0 = 74, W - 24, 20, H - 104  # plot area; the failure strip sits under it
    strip_y = y0 + 56
    quality = study.quality
    ranked = [r for r in study.records if study.rank(r) is not None]
    others = [r for r in study.records if study.rank(r) is None]
    thr_values = [v for r in study.records if (v := _num(r.get("throughput"))) is not None]
    log_x = bool(thr_values) and min(thr_values) > 0 and max(thr_values) / min(thr_values) > 20
    sx = Scale(thr_values, x0, x1, log=log_x)
    if quality is not None:
        q_values = [r.value(quality.metric) for r in ranked]
        sy = Scale([v for v in q_values if v is not None], y0, y1)
        better = "higher is better" if quality.maximize else "lower is better"
        ylabel = f"{quality.metric} ({better})"
    else:  # speed-only study: spread the trials by number
        sy = Scale([float(r.trial) for r in ranked], y0, y1)
        ylabel = "trial"

    def y_of(r: TrialRecord) -> float:
        value = r.value(quality.metric) if quality is not None else None
        return sy(value if value is not None else float(r.trial))

    out = [f'<svg id="pareto-plot" class="plot" viewBox="0 0 {W} {H}" '
           f'width="{W}" height="{H}" role="img" aria-label="Pareto front: throughput against {escape(ylabel)}">']
    xlabel = "throughput (samples/s, higher is better" + (", log scale)" if sx.log else ")")
    out += _axes(sx, sy, x0, x1, y0, y1, xlabel, ylabel)

    front = sorted(study.front(), key=lambda r: _num(r.get("throughput")) or 0.0)
    if len(front) > 1:
        pts = " ".join(f"{sx(r.get('throughput')):.1f},{y_of(r):.1f}" for r in front)
        out.append(f'<polyline class="front-line" points="{pts}" fill="none" stroke="{COLORS["front"]}" '
                   f'stroke-width="1.6" stroke-dasharray="5 3"/>')
    out.append('<g class="points">')
    for r in sorted(ranked, key=lambda r: -(study.rank(r) or 0)):  # front drawn last, on top
        x, y = sx(r.get("throughput")), y_of(r)
        on_front = study.rank(r) == 0
        color = COLORS["front"] if on_front else COLORS["dominated"]
        radius = 6.5 if on_front else 4.5
        out.append(f'<a href="#trial-{r.trial}"><circle class="pt{" front" if on_front else ""}" cx="{x:.1f}" '
                   f'cy="{y:.1f}" r="{radius}" fill="{color}" fill-opacity="{0.95 if on_front else 0.7}" '
                   f'stroke="#fff" stroke-width="1"><title>{escape(_tooltip(study, r))}</title></circle></a>')
        if on_front:
            out.append(_t(x + 8, y - 7, f"#{r.trial}", anchor="start", size=11, extra=f'fill="{COLORS["front"]}"'))
        if r.trial == knee_trial:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="11" fill="none" stroke="#1f2328" stroke-width="1.5"/>')
            out.append(_t(x + 14, y + 15, "knee", anchor="start", size=11, extra='font-weight="600"'))
    out.append("</g>")
    if not ranked:
        out.append(_t((x0 + x1) / 2, (y0 + y1) / 2, "no complete trial with a score yet", size=13,
                      extra='fill="#57606a"'))

    # failure strip: failed trials have no quality, so they sit apart, at their throughput when they measured one
    out.append(f'<rect x="{x0}" y="{strip_y - 12}" width="{x1 - x0}" height="24" fill="#f6f8fa" stroke="#eaeef2"/>')
    out.append(_t(x0 - 6, strip_y + 4, "no score", anchor="end", size=10, extra='fill="#57606a"'))
    na_x = x0 + 10
    unplaced = 0
    for r in others:
        state = str(r.get("state"))
        kind = state if state in ("oom", "diverged", "error") else "noscore"
        thr = _num(r.get("throughput"))
        if thr is not None and (not sx.log or thr > 0):
            x = min(max(sx(thr), x0), x1)
        else:
            x = na_x + 14 * unplaced  # no throughput measured: lined up at the left
            unplaced += 1
        out.append(f'<a href="#trial-{r.trial}"><g>{_marker(kind, x, strip_y)}'
                   f'<title>{escape(_tooltip(study, r))}</title></g></a>')
        if len(others) <= 30:  # beyond that the labels would only overlap
            out.append(_t(x, strip_y - 8 - 10 * (unplaced % 2 if thr is None else 0), f"#{r.trial}", size=9,
                          extra='fill="#57606a"'))
    legend = [("front", "Pareto front"), ("dominated", "dominated"), ("oom", "out of memory (infeasible)"),
              ("diverged", "diverged"), ("error", "error"), ("noscore", "complete, no score")]
    lx, ly = x0, H - 14
    for kind, label in legend:
        if kind in ("front", "dominated"):
            out.append(f'<circle cx="{lx + 5}" cy="{ly - 4}" r="5" fill="{COLORS[kind]}"/>')
        else:
            out.append(_marker(kind, lx + 5, ly - 4, 4.5).replace('class="pt"', 'class="legend"'))
        out.append(_t(lx + 14, ly, label, anchor="start", size=11))
        lx += 24 + 6.2 * len(label)
    out.append("</svg>")
    return "\n".join(out)


def windows_svg(r: TrialRecord) -> str:
    """Samples/s of each timed window as bars, with the median as a line: how steady the measurement was."""
    windows = [v for w in r.get("windows") or [] if (v := _num(w)) is not None]
    if not windows:
        return '<p class="note">no timed windows</p>'
    W, H = 300, 150
    x0, x1, y1, y0 = 52, W - 8, 10, H - 34
    sy = Scale(windows, y0, y1, zero=True)
    sx = Scale([0.0, float(len(windows))], x0, x1, pad=0)
    out = [f'<svg class="plot windows-plot" viewBox="0 0 {W} {H}" width="{W}" '
           f'height="{H}">']
    out += _axes(sx, sy, x0, x1, y0, y1, "", "", tick_count=3)[0:1]
    for v in sy.ticks(3):
        y = sy(v)
        if y1 - 0.5 <= y <= y0 + 0.5:
            out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#eaeef2"/>')
            out.append(_t(x0 - 4, y + 3.5, fmt(v, 4), anchor="end", size=10, extra='fill="#57606a"'))
    bw = (x1 - x0) / len(windows)
    for i, v in enumerate(windows):
        x = x0 + i * bw
        out.append(f'<rect x="{x + bw * 0.15:.1f}" y="{sy(v):.1f}" width="{bw * 0.7:.1f}" height="{y0 - sy(v):.1f}" '
                   f'fill="#54aeff"><title>window {i + 1}: {fmt(v)} samples/s</title></rect>')
    median = sorted(windows)[len(windows) // 2] if len(windows) % 2 else sum(sorted(windows)[len(windows) // 2 - 1:
                                                                                   len(windows) // 2 + 1]) / 2
    out.append(f'<line x1="{x0}" y1="{sy(median):.1f}" x2="{x1}" y2="{sy(median):.1f}" stroke="#0550ae" '
               f'stroke-width="1.5" stroke-dasharray="4 3"/>')
    out.append(_t((x0 + x1) / 2, H - 18, f"timed windows (median {fmt(median)} samples/s, dashed)", size=10))
    out.append("</svg>")
    return "".join(out)


def loss_svg(r: TrialRecord) -> str:
    """Mean training loss per window against samples seen."""
    pts = [(float(p[0]), float(p[1])) for p in r.get("loss_curve") or []
           if isinstance(p, (list, tuple)) and len(p) >= 2 and _num(p[0]) is not None and _num(p[1]) is not None]
    if not pts:
        return '<p class="note">no loss curve</p>'
    W, H = 300, 150
    x0, x1, y1, y0 = 52, W - 8, 10, H - 34
    sx = Scale([p[0] for p in pts], x0, x1)
    sy = Scale([p[1] for p in pts], y0, y1)
    out = [f'<svg class="plot loss-plot" viewBox="0 0 {W} {H}" width="{W}" '
           f'height="{H}">']
    out += _axes(sx, sy, x0, x1, y0, y1, "", "", tick_count=3)
    line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
    out.append(f'<polyline points="{line}" fill="none" stroke="#bc4c00" stroke-width="1.8"/>')
    for x, y in pts:
        out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.2" fill="#bc4c00">'
                   f'<title>{fmt(x)} samples: loss {fmt(y)}</title></circle>')
    out.append(_t((x0 + x1) / 2, H - 4, "train loss vs samples seen", size=10))
    out.append("</svg>")
    return "".join(out)


def data_wait_svg(study: Study) -> str:
    """Data-wait fraction per trial as horizontal bars, with the input-bound / compute-bound thresholds."""
    rows = [r for r in study.sorted_records() if _num(r.get("data_wait")) is not None]
    if not rows:
        return '<p class="note">no trial measured its data wait</p>'
    bar_h = 16
    W, H = 720, 40 + bar_h * len(rows) + 24
    x0, x1, top = 160, W - 140, 24
    sx = Scale([0.0, 1.0], x0, x1, pad=0)
    out = [f'<svg id="data-wait-plot" class="plot" viewBox="0 0 {W} {H}" '
           f'width="{W}" height="{H}">']
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        bottom = top + bar_h * len(rows)
        out.append(f'<line x1="{sx(v):.1f}" y1="{top}" x2="{sx(v):.1f}" y2="{bottom}" stroke="#eaeef2"/>')
        out.append(_t(sx(v), top + bar_h * len(rows) + 14, f"{v:.0%}", size=10, extra='fill="#57606a"'))
    for v, label in ((COMPUTE_BOUND_BELOW, "compute-bound below"), (INPUT_BOUND_ABOVE, "input-bound above")):
        out.append(f'<line x1="{sx(v):.1f}" y1="{top - 4}" x2="{sx(v):.1f}" y2="{top + bar_h * len(rows)}" '
                   f'stroke="#1f2328" stroke-dasharray="3 3"/>')
        out.append(_t(sx(v) + (4 if v == INPUT_BOUND_ABOVE else -4), top - 8, f"{label} {v:.0%}",
                      anchor="start" if v == INPUT_BOUND_ABOVE else "end", size=10))
    for i, r in enumerate(rows):
        wait = float(r.get("data_wait"))
        label = bound_label(wait)
        y = top + i * bar_h
        star = f" {FRONT_MARK}" if study.rank(r) == 0 else ""
        out.append(_t(x0 - 6, y + bar_h - 4, f"trial {r.trial}{star}", anchor="end", size=11))
        out.append(f'<rect x="{x0}" y="{y + 2}" width="{max(1.0, sx(min(max(wait, 0.0), 1.0)) - x0):.1f}" '
                   f'height="{bar_h - 4}" fill="{COLORS[label]}"><title>trial {r.trial}: {wait:.1%} of step time '
                   f'waiting for data ({label})</title></rect>')
        out.append(_t(x1 + 6, y + bar_h - 4, f"{wait:.1%} {label}", anchor="start", size=11,
                      extra=f'fill="{COLORS[label]}"'))
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------------------------------------------- sections


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


def _kv(items: list[tuple[str, Any]]) -> str:
    rows = "".join(f"<dt>{escape(str(k))}</dt><dd>{v}</dd>" for k, v in items if v not in (None, ""))
    return f'<dl class="kv">{rows}</dl>'


def _plain(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return f"<code>{escape(json.dumps(value, default=str))}</code>"
    return escape(fmt(value) if value is None or isinstance(value, (float, bool)) else str(value))


def _bound_badge(wait: Any) -> str:
    label = bound_label(wait)
    if not label:
        return "-"
    return f'{float(wait):.1%} <span class="bound" style="background:{COLORS[label]}">{label}</span>'


def trials_table(study: Study) -> str:
    params = study.params()
    metrics = [o.metric for o in study.objectives]
    head = (["rank", "trial", "state"] + [f"{o.metric} {'↑' if o.maximize else '↓'}" for o in study.objectives]
            + ["spread", "data wait", "peak MB", "train s"] + params + ["error"])
    out = ['<div class="tablewrap"><table id="trials-table"><thead><tr>']
    out += [f'<th class="{"l" if h in ("state", "error") else ""}">{escape(h)}</th>' for h in head]
    out.append("</tr></thead><tbody>")
    for r in study.sorted_records():
        rank = study.rank(r)
        state = str(r.get("state"))
        cls = "front" if rank == 0 else ("failed" if state != "complete" else "")
        spread = _num(r.get("throughput_spread"))
        cells = [
            f"{FRONT_MARK} 0" if rank == 0 else ("-" if rank is None else str(rank)),
            f'<a href="#trial-{r.trial}">{r.trial}</a>',
            f'<span class="state-{escape(state)}">{escape(state)}</span>' + (" (capped)" if r.get("capped") else ""),
            *[escape(fmt(r.get(m))) for m in metrics],
            f"{spread:.1%}" if spread is not None else "-",
            _bound_badge(r.get("data_wait")),
            escape(fmt(r.get("peak_mem_mb"), 5)),
            escape(fmt(r.get("train_seconds"), 3)),
            *[escape(fmt((r.params).get(p))) for p in params],
        ]
        row = "".join(f'<td class="{"l" if i == 2 else ""}">{c}</td>' for i, c in enumerate(cells))
        row += f'<td class="err">{escape(str(r.get("error") or ""))}</td>'
        out.append(f'<tr id="row-{r.trial}" class="{cls}" data-trial="{r.trial}">{row}</tr>')
    out.append("</tbody></table></div>")
    return "".join(out)


def _trial_detail(study: Study, r: TrialRecord, embed_grid: bool) -> str:
    rank = study.rank(r)
    state = str(r.get("state"))
    q = study.quality
    headline = [f"trial {r.trial}", STATE_NOTES.get(state, state)]
    if _num(r.get("throughput")) is not None:
        headline.append(f"{fmt(r.get('throughput'))} samples/s")
    if q is not None and r.get(q.metric) is not None:
        headline.append(f"{q.metric} {fmt(r.get(q.metric))}")
    if rank is not None:
        headline.append(f"rank {rank}" + (f" {FRONT_MARK} front" if rank == 0 else ""))
    metrics = [(o.metric, _plain(r.get(o.metric))) for o in study.objectives]
    spread = _num(r.get("throughput_spread"))
    metrics += [
        ("throughput spread", f"{spread:.1%}" if spread is not None else None),
        ("data wait", _bound_badge(r.get("data_wait")) if r.get("data_wait") is not None else None),
    ]
    metrics += [(k.replace("_", " "), _plain(r.get(k))) for k in
                ("peak_mem_mb", "train_seconds", "samples", "steps", "capped", "device", "accuracy", "fid_features",
                 "fid_samples", "quality_seconds", "started", "ended")
                if r.get(k) is not None and k not in {o.metric for o in study.objectives}]
    parts = [f'<div><h3>params</h3>{_kv([(k, _plain(v)) for k, v in (r.params).items()])}</div>',
             f"<div><h3>measured</h3>{_kv(metrics)}</div>",
             f"<div><h3>throughput windows</h3>{windows_svg(r)}</div>",
             f"<div><h3>loss curve</h3>{loss_svg(r)}</div>"]
    grid = study.sample_grid(r)
    if grid is not None:
        uri = _image_data_uri(grid) if embed_grid else None
        if uri is not None:
            parts.append(f'<div class="grid"><h3>generated samples</h3><img alt="sample grid of trial {r.trial}" '
                         f'src="{uri}"><br><span class="note">{escape(str(grid))}</span></div>')
        else:
            why = "not embedded (too many grids)" if embed_grid is False and grid.is_file() else "file missing"
            parts.append(f'<div class="grid"><h3>generated samples</h3><p class="note">{escape(str(grid))} '
                         f"({why})</p></div>")
    if r.get("error"):
        parts.append(f'<div><h3>error</h3><pre>{escape(str(r.error))}</pre></div>')
    open_attr = " open" if rank == 0 else ""
    return (f'<details id="trial-{r.trial}" class="trial"{open_attr}><summary>{escape(" · ".join(headline))}'
            f'</summary><div class="detail">{"".join(parts)}</div></details>')


def _picks(study: Study) -> tuple[str, int | None]:
    cards = []
    knee_trial = None
    for pick, label in (("knee", "balanced (knee)"), ("throughput", "fastest on the front"),
                        ("quality", "best quality")):
        try:
            r = choose(study.records, study.objectives, pick, study=study.name)  # type: ignore[arg-type]
        except StudyError as err:
            cards.append(f'<div class="card">{escape(label)}<br><span class="note">{escape(str(err))}</span></div>')
            continue
        if pick == "knee":
            knee_trial = r.trial
        q = study.quality
        qtext = f", {q.metric} {fmt(r.get(q.metric))}" if q is not None else ""
        cards.append(f'<div class="card">{escape(label)}<br><b><a href="#trial-{r.trial}">trial {r.trial}</a></b>'
                     f": {escape(fmt(r.get('throughput')))} samples/s{escape(qtext)}<br>"
                     f"<code>tuner export {escape(study.name)} --pick {pick}</code></div>")
    return f'<div class="cards" id="picks">{"".join(cards)}</div>', knee_trial


def _describe_budget(budget: Any) -> str:
    """study.json keeps the budget as a dict; describe it as the search did."""
    from pydantic import ValidationError

    from tuner.config import Budget

    try:
        return Budget.model_validate(budget).describe() + " per trial"
    except ValidationError:
        return "" if budget is None else str(budget)


def _provenance(study: Study) -> str:
    meta = study.meta.model_dump(mode="json")
    starts = sorted(str(r.started) for r in study.records if r.started)
    ends = sorted(str(r.ended) for r in study.records if r.ended)
    items = [
        ("study", escape(study.name)),
        ("folder", escape(str(study.dir))),
        ("created", _plain(meta.get("created")) if meta.get("created") else None),
        ("trials ran", f"{escape(starts[0])} to {escape(ends[-1])}" if starts and ends else None),
        ("report written", escape(dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))),
        ("workload", _plain(meta.get("workload")) if meta.get("workload") else None),
        ("dataset", _plain(meta.get("dataset")) if meta.get("dataset") else None),
        ("budget", escape(_describe_budget(meta.get("budget")))),
        ("trials asked for", _plain(meta.get("trials")) if meta.get("trials") is not None else None),
        ("objectives", escape(", ".join(f"{o.metric} ({o.direction})" for o in study.objectives))),
        ("sampler", _plain(meta.get("sampler")) if meta.get("sampler") else None),
        ("seed", _plain(meta.get("seed")) if meta.get("seed") is not None else None),
        ("space", _plain(meta.get("space")) if meta.get("space") else None),
        ("space source", _plain(meta.get("space_source")) if meta.get("space_source") else None),
        ("searched params", escape(", ".join(study.params()))),
        ("Optuna storage", _plain(meta.get("storage")) if meta.get("storage") else None),
    ]
    out = [_kv(items)]
    sections = (("hardware", "hardware"), ("resources", "resources per trial"), ("versions", "library versions"))
    for key, title in sections:
        value = meta.get(key)
        if isinstance(value, dict) and value:
            out.append(f"<h3>{title}</h3>" + _kv([(k, _plain(v)) for k, v in value.items()]))
        elif value:
            out.append(f"<h3>{title}</h3><p>{_plain(value)}</p>")
    if meta.get("space_def") is not None:
        space = meta["space_def"]
        if isinstance(space, str):
            text = space
        else:
            import yaml

            text = yaml.safe_dump(json.loads(json.dumps(space, default=str)), sort_keys=False, width=100,
                                  default_flow_style=None)
        out.append(f"<h3>search space</h3><pre>{escape(text)}</pre>")
    storage = meta.get("storage") or f"sqlite:///{study.dir / 'study.db'}"
    out.append(f'<p class="note">Browse the Optuna study interactively: <code>pip install optuna-dashboard</code> '
               f"then <code>optuna-dashboard {escape(str(storage))}</code>.</p>")
    return "".join(out)


def render_html(study: Study) -> str:
    """The whole report as one HTML string."""
    meta = study.meta.model_dump(mode="json")
    counts: dict[str, int] = {}
    for r in study.records:
        counts[str(r.get("state"))] = counts.get(str(r.get("state")), 0) + 1
    count_text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none finished yet"
    what = " ".join(str(x) for x in (meta.get("workload"), "on" if meta.get("dataset") else "", meta.get("dataset"))
                    if x)
    picks, knee_trial = _picks(study)
    sorted_records = study.sorted_records()
    embed = {r.trial for r in sorted_records if study.sample_grid(r) is not None}
    embed = set(sorted(embed, key=[r.trial for r in sorted_records].index)[:MAX_EMBEDDED_GRIDS])
    n_bound: dict[str, int] = {}
    for r in study.records:
        if (label := bound_label(r.get("data_wait"))):
            n_bound[label] = n_bound.get(label, 0) + 1
    bound_text = ", ".join(f"{n} {k}" for k, n in sorted(n_bound.items()))
    q = study.quality
    body = [
        f"<header><h1>Study {escape(study.name)}</h1>",
        f'<p class="sub">{escape(what)} · {escape(_describe_budget(meta.get("budget")))} · '
        f"{len(study.records)} trials: {escape(count_text)} · {len(study.front())} on the Pareto front</p></header>",
        '<section id="summary"><h2>Best trade-offs</h2>', picks,
        '<p class="note">knee: on the Pareto front, each objective rescaled to 0-1 (1 = best on the front); the trial '
        "closest to the point where all are 1. Export one with the command shown; it writes a config that "
        "<code>tuner train --config</code> runs.</p></section>",
        '<section id="pareto"><h2>Throughput vs quality</h2>', pareto_svg(study, knee_trial),
        '<p class="note">Each dot is a complete trial; the Pareto front (trials no other trial beats on both '
        f"throughput and {escape(q.metric if q else 'quality')}) is blue and joined by the dashed line, the knee is "
        "circled. Trials without a score sit in the strip below the axis: out of memory (infeasible, a cross), "
        "diverged (a triangle), error (a square). Hover a point for its params; click to jump to the trial.</p>"
        "</section>",
        '<section id="trials"><h2>Trials</h2>', trials_table(study),
        f'<p class="note">Sorted by Pareto rank ({FRONT_MARK} = front), then throughput. Spread = (max - min) / median '
        "of the timed windows.</p></section>",
        '<section id="bottleneck"><h2>Input-bound or compute-bound</h2>',
        f'<p class="note">{escape(BOUND_EXPLANATION)}{" Here: " + escape(bound_text) + "." if bound_text else ""}</p>',
        data_wait_svg(study), "</section>",
        '<section id="details"><h2>Each trial</h2>',
        *[_trial_detail(study, r, r.trial in embed) for r in sorted_records],
        "</section>",
        '<section id="provenance"><h2>Provenance</h2>', _provenance(study), "</section>",
    ]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>tuner report: {escape(study.name)}</title><style>{CSS}</style></head>\n<body>\n"
            + "\n".join(body) + f"\n<script>{MARKER_SCRIPT}</script>\n</body></html>\n")


def write_html(study: Study, out: Path | None = None) -> Path:
    """Write `<study>/report.html` (or `out`) atomically and return its path."""
    from tuner.files import atomic_write

    path = Path(out) if out is not None else study.dir / REPORT_FILE
    atomic_write(path, render_html(study))
    return path
