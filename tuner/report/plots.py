"""The HTML report's plots, drawn as SVG by hand: small, crisp at any zoom, no plotting library, and each point
carries a tooltip (`<title>`) and a link to its trial (`#trial-N`).

Every drawing returns one SVG string (or a short `<p class="note">` when there is nothing to draw); the report's
template places them. User text (errors, param values) is escaped here, as it is written into the SVG.
A little over 350 lines: four plots and the scale and axis helpers they share.
"""

from __future__ import annotations

import math
import statistics

from markupsafe import escape

from tuner.analysis import COMPUTE_BOUND_BELOW, INPUT_BOUND_ABOVE, Study, bound_label
from tuner.report.view import FRONT_MARK
from tuner.study import FAILED_STATES, STATE_NOTES, TrialRecord, finite, fmt, fmt_metric, metric, state_hex

# Plot colours that are not a trial state (states take theirs from tuner.study.format).
COLORS = {
    "front": "#1f6feb",
    "dominated": "#8c959f",
    "noscore": "#57606a",
    "text": "#1f2328",
    "muted": "#57606a",
    "grid": "#eaeef2",
    "frame": "#d0d7de",
    "strip": "#f6f8fa",
    "bar": "#54aeff",
    "median": "#0550ae",
    "loss": "#bc4c00",
}
BOUND_COLORS = {"input-bound": "#cf222e", "overhead-bound": "#bc4c00", "mixed": "#9a6700", "compute-bound": "#1a7f37"}


# ---------------------------------------------------------------------------------------------------- scales


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
    """The 1-2-5 values of each decade within [lo, hi] (lo > 0)."""
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


# ---------------------------------------------------------------------------------------------------- pieces


def _text(x: float, y: float, text: str, anchor: str = "middle", size: int = 11, extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" {extra}>{escape(text)}</text>'


def _muted(x: float, y: float, text: str, anchor: str = "middle", size: int = 10) -> str:
    return _text(x, y, text, anchor, size, f'fill="{COLORS["muted"]}"')


def _svg_open(width: float, height: float, attrs: str) -> str:
    return f'<svg {attrs} viewBox="0 0 {width} {height}" width="{width}" height="{height}">'


def _axes(sx: Scale, sy: Scale, x0: float, x1: float, y0: float, y1: float, xlabel: str = "", ylabel: str = "",
          tick_count: int = 5, x_ticks: bool = True) -> list[str]:
    """Frame, grid lines, ticks and labels. (x0, y0) is the bottom-left corner in pixels, (x1, y1) the top-right."""
    out = [f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" fill="#fff" stroke="{COLORS["frame"]}"/>']
    for v in sx.ticks(tick_count) if x_ticks else []:
        x = sx(v)
        if x0 - 0.5 <= x <= x1 + 0.5:
            out.append(f'<line x1="{x:.1f}" y1="{y1}" x2="{x:.1f}" y2="{y0}" stroke="{COLORS["grid"]}"/>')
            out.append(_muted(x, y0 + 14, fmt(v, 4)))
    for v in sy.ticks(tick_count):
        y = sy(v)
        if y1 - 0.5 <= y <= y0 + 0.5:
            out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="{COLORS["grid"]}"/>')
            out.append(_muted(x0 - 5, y + 3.5, fmt(v, 4), anchor="end"))
    if xlabel:
        out.append(_text((x0 + x1) / 2, y0 + 30, xlabel, size=12))
    if ylabel:
        cy = (y0 + y1) / 2
        out.append(f'<text x="14" y="{cy:.1f}" text-anchor="middle" font-size="12" '
                   f'transform="rotate(-90 14 {cy:.1f})">{escape(ylabel)}</text>')
    return out


def marker(kind: str, x: float, y: float, r: float = 5.5, cls: str = "pt") -> str:
    """A trial without a rank: oom a cross, diverged a triangle, error a square, stopped (by the scheduler, at a
    lower rung) a diamond in its own colour, a complete trial a ring."""
    c = state_hex(kind) if kind in FAILED_STATES or kind == "stopped" else COLORS["noscore"]
    if kind == "stopped":
        return (f'<path class="{cls} stopped" d="M{x:.1f},{y - r:.1f}L{x + r:.1f},{y:.1f}L{x:.1f},{y + r:.1f}'
                f'L{x - r:.1f},{y:.1f}Z" fill="none" stroke="{c}" stroke-width="2"/>')
    if kind == "oom":
        return (f'<path class="{cls}" d="M{x - r:.1f},{y - r:.1f}L{x + r:.1f},{y + r:.1f}M{x - r:.1f},{y + r:.1f}'
                f'L{x + r:.1f},{y - r:.1f}" stroke="{c}" stroke-width="2.4" fill="none"/>')
    if kind == "diverged":
        return (f'<path class="{cls}" d="M{x:.1f},{y - r:.1f}L{x + r:.1f},{y + r * 0.8:.1f}'
                f'L{x - r:.1f},{y + r * 0.8:.1f}Z" fill="{c}"/>')
    if kind in ("error", "compile_timeout"):
        side = 2 * r - 2
        return (f'<rect class="{cls}" x="{x - r + 1:.1f}" y="{y - r + 1:.1f}" width="{side:.1f}" '
                f'height="{side:.1f}" fill="{c}"/>')
    return (f'<circle class="{cls}" cx="{x:.1f}" cy="{y:.1f}" r="{r - 1:.1f}" fill="none" stroke="{c}" '
            f'stroke-width="2"/>')


def tooltip(study: Study, r: TrialRecord) -> str:
    """A point's hover text: trial, state, objectives, params, error."""
    parts = [f"trial {r.trial}: {STATE_NOTES.get(r.state, r.state)}"]
    if study.measured_at(r):
        parts.append(f"measured at {study.measured_at(r)}")
    parts += [f"{o.metric} {fmt_metric(o.metric, r.get(o.metric))}" for o in study.objectives]
    parts += [f"{k}={fmt(v)}" for k, v in r.params.items()]
    if r.error:
        parts.append(r.error)
    return "\n".join(parts)


def axis_label(key: str, maximize: bool | None = None) -> str:
    """"throughput (samples/s, higher is better)": the metric's label, unit and direction."""
    m = metric(key)
    notes = [m.unit] if m.unit else []
    if maximize is not None:
        notes.append("higher is better" if maximize else "lower is better")
    return f"{m.label} ({', '.join(notes)})" if notes else m.label


# ---------------------------------------------------------------------------------------------------- plots


def pareto_svg(study: Study, knee_trial: int | None) -> str:
    """Throughput (x) against quality (y) for ranked trials; the front joined by a line, the knee ringed; trials
    without a score in a strip below, at their throughput when they measured one."""
    W, H = 760, 470
    x0, x1, y1, y0 = 74, W - 24, 20, H - 104  # plot area; the failure strip sits under it
    strip_y = y0 + 56
    quality = study.quality
    ranked = [r for r in study.records if study.rank(r) is not None]
    others = [r for r in study.records if study.rank(r) is None]
    val = study.value  # confirmed centres where the confirmation phase re-ran a trial
    thr_values = [v for r in study.records if (v := val(r, "throughput")) is not None]
    log_x = bool(thr_values) and min(thr_values) > 0 and max(thr_values) / min(thr_values) > 20
    sx = Scale(thr_values, x0, x1, log=log_x)
    if quality is not None:
        sy = Scale([v for r in ranked if (v := val(r, quality.metric)) is not None], y0, y1)
        ylabel = axis_label(quality.metric, quality.maximize)
    else:  # speed-only study: spread the trials by number
        sy = Scale([float(r.trial) for r in ranked], y0, y1)
        ylabel = "trial"

    def y_of(r: TrialRecord) -> float:
        value = val(r, quality.metric) if quality is not None else None
        return sy(value if value is not None else float(r.trial))

    def x_of(r: TrialRecord) -> float:
        return sx(val(r, "throughput") or 0.0)

    def bars(r: TrialRecord) -> list[str]:
        """A confirmed trial's 95% intervals: throughput across, quality up and down."""
        if r.confirmed is None:
            return []
        x, y, marks = x_of(r), y_of(r), []
        f = r.confirmed.figures.get("throughput")
        if f is not None and f.low is not None and f.high is not None and f.low > 0:
            # around the dot: scaled as the ranked figure was for drift between rounds (Study.value)
            k = (val(r, "throughput") or f.centre) / f.centre if f.centre else 1.0
            lo, hi = min(max(sx(k * f.low), x0), x1), min(max(sx(k * f.high), x0), x1)
            marks.append(f'<path class="interval" d="M{lo:.1f},{y:.1f}H{hi:.1f}M{lo:.1f},{y - 4:.1f}V{y + 4:.1f}'
                         f'M{hi:.1f},{y - 4:.1f}V{y + 4:.1f}" stroke="{COLORS["text"]}" stroke-width="1.2"/>')
        q = r.confirmed.figures.get(quality.metric) if quality is not None else None
        if q is not None and q.low is not None and q.high is not None:
            lo, hi = min(max(sy(q.low), y1), y0), min(max(sy(q.high), y1), y0)
            marks.append(f'<path class="interval" d="M{x:.1f},{lo:.1f}V{hi:.1f}M{x - 4:.1f},{lo:.1f}H{x + 4:.1f}'
                         f'M{x - 4:.1f},{hi:.1f}H{x + 4:.1f}" stroke="{COLORS["text"]}" stroke-width="1.2"/>')
        return marks

    xlabel = axis_label("throughput", True) + (", log scale" if sx.log else "")
    out = [_svg_open(W, H, f'id="pareto-plot" class="plot" role="img" '
                           f'aria-label="Pareto front: throughput against {escape(ylabel)}"')]
    out += _axes(sx, sy, x0, x1, y0, y1, xlabel, ylabel)

    front = sorted(study.front(), key=lambda r: val(r, "throughput") or 0.0)
    if len(front) > 1:
        pts = " ".join(f"{x_of(r):.1f},{y_of(r):.1f}" for r in front)
        out.append(f'<polyline class="front-line" points="{pts}" fill="none" stroke="{COLORS["front"]}" '
                   f'stroke-width="1.6" stroke-dasharray="5 3"/>')
    out.append('<g class="intervals">')
    for r in ranked:
        out += bars(r)
    out.append("</g>")
    out.append('<g class="points">')
    for r in sorted(ranked, key=lambda r: -(study.rank(r) or 0)):  # front drawn last, on top
        x, y = x_of(r), y_of(r)
        on_front = study.rank(r) == 0
        color = COLORS["front"] if on_front else COLORS["dominated"]
        out.append(f'<a href="#trial-{r.trial}"><circle class="pt{" front" if on_front else ""}" cx="{x:.1f}" '
                   f'cy="{y:.1f}" r="{6.5 if on_front else 4.5}" fill="{color}" '
                   f'fill-opacity="{0.95 if on_front else 0.7}" stroke="#fff" stroke-width="1">'
                   f'<title>{escape(tooltip(study, r))}</title></circle></a>')
        if on_front:
            out.append(_text(x + 8, y - 7, f"#{r.trial}", anchor="start", extra=f'fill="{COLORS["front"]}"'))
        if r.trial == knee_trial:
            out.append(f'<circle class="knee" cx="{x:.1f}" cy="{y:.1f}" r="11" fill="none" '
                       f'stroke="{COLORS["text"]}" stroke-width="1.5"/>')
            out.append(_text(x + 14, y + 15, "knee", anchor="start", extra='font-weight="600"'))
    out.append("</g>")
    if not ranked:
        out.append(_muted((x0 + x1) / 2, (y0 + y1) / 2, "no complete trial with a score yet", size=13))

    # failure strip: failed trials have no quality, so they sit apart, at their throughput when they measured one
    out.append(f'<rect x="{x0}" y="{strip_y - 12}" width="{x1 - x0}" height="24" fill="{COLORS["strip"]}" '
               f'stroke="{COLORS["grid"]}"/>')
    out.append(_muted(x0 - 6, strip_y + 4, "no score", anchor="end"))
    unplaced = 0
    for r in others:
        thr = r.value("throughput")
        if thr is not None and (not sx.log or thr > 0):
            x = min(max(sx(thr), x0), x1)
        else:
            x = x0 + 10 + 14 * unplaced  # no throughput measured: lined up at the left
            unplaced += 1
        out.append(f'<a href="#trial-{r.trial}"><g>{marker(r.state, x, strip_y)}'
                   f'<title>{escape(tooltip(study, r))}</title></g></a>')
        if len(others) <= 30:  # beyond that the labels would only overlap
            out.append(_muted(x, strip_y - 8 - 10 * (unplaced % 2 if thr is None else 0), f"#{r.trial}", size=9))

    legend = [("front", "Pareto front"), ("dominated", "dominated"), ("oom", "out of memory (infeasible)"),
              ("diverged", "diverged"), ("error", "error"), ("complete", "complete, no score")]
    if any(r.state == "compile_timeout" for r in others):
        legend.insert(-1, ("compile_timeout", "compile timeout"))
    if any(r.state == "stopped" for r in others):  # measured at a lower rung: real figures, never ranked
        present = {r.state for r in others}  # one more entry would overflow the line: only the kinds drawn
        legend = [(k, label) for k, label in legend[:2] + [("stopped", "stopped at a rung")] + legend[2:]
                  if k in ("front", "dominated") or k in present]
    lx, ly = x0, H - 14
    for kind, label in legend:
        if kind in ("front", "dominated"):
            out.append(f'<circle cx="{lx + 5}" cy="{ly - 4}" r="5" fill="{COLORS[kind]}"/>')
        else:
            out.append(marker(kind, lx + 5, ly - 4, 4.5, cls="legend"))
        out.append(_text(lx + 14, ly, label, anchor="start"))
        lx += 24 + 6.2 * len(label)
    out.append("</svg>")
    return "\n".join(out)


def windows_svg(r: TrialRecord) -> str:
    """Samples/s of each timed window as bars, with the trial's throughput (all their samples / all their seconds)
    as a dashed line: how steady the measurement was."""
    windows = [v for w in r.windows if (v := finite(w)) is not None]
    if not windows:
        return '<p class="note">no timed windows</p>'
    W, H = 300, 150
    x0, x1, y1, y0 = 52, W - 8, 10, H - 34
    sy = Scale(windows, y0, y1, zero=True)
    sx = Scale([0.0, float(len(windows))], x0, x1, pad=0)
    out = [_svg_open(W, H, 'class="plot windows-plot"')]
    out += _axes(sx, sy, x0, x1, y0, y1, tick_count=3, x_ticks=False)
    bw = (x1 - x0) / len(windows)
    for i, v in enumerate(windows):
        x = x0 + i * bw
        out.append(f'<rect x="{x + bw * 0.15:.1f}" y="{sy(v):.1f}" width="{bw * 0.7:.1f}" height="{y0 - sy(v):.1f}" '
                   f'fill="{COLORS["bar"]}"><title>window {i + 1}: {fmt(v)} samples/s</title></rect>')
    rate, what = finite(r.value("throughput")), "throughput"
    if rate is None:  # a diverged trial's windows: no throughput was read
        rate, what = statistics.median(windows), "median"
    out.append(f'<line x1="{x0}" y1="{sy(rate):.1f}" x2="{x1}" y2="{sy(rate):.1f}" stroke="{COLORS["median"]}" '
               f'stroke-width="1.5" stroke-dasharray="4 3"/>')
    out.append(_text((x0 + x1) / 2, H - 18, f"timed windows ({what} {fmt(rate)} samples/s, dashed)", size=10))
    out.append("</svg>")
    return "".join(out)


def loss_svg(r: TrialRecord) -> str:
    """Mean training loss per window against samples seen."""
    pts = [(x, y) for p in r.loss_curve if len(p) >= 2
           and (x := finite(p[0])) is not None and (y := finite(p[1])) is not None]
    if not pts:
        return '<p class="note">no loss curve</p>'
    W, H = 300, 150
    x0, x1, y1, y0 = 52, W - 8, 10, H - 34
    sx = Scale([p[0] for p in pts], x0, x1)
    sy = Scale([p[1] for p in pts], y0, y1)
    out = [_svg_open(W, H, 'class="plot loss-plot"')]
    out += _axes(sx, sy, x0, x1, y0, y1, tick_count=3)
    line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
    out.append(f'<polyline points="{line}" fill="none" stroke="{COLORS["loss"]}" stroke-width="1.8"/>')
    for x, y in pts:
        out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.2" fill="{COLORS["loss"]}">'
                   f'<title>{fmt(x)} samples: loss {fmt(y)}</title></circle>')
    out.append(_text((x0 + x1) / 2, H - 4, "train loss vs samples seen", size=10))
    out.append("</svg>")
    return "".join(out)


def data_wait_svg(study: Study) -> str:
    """Data-wait fraction per trial as horizontal bars, with the input-bound / compute-bound thresholds."""
    rows = [(r, wait) for r in study.sorted_records() if (wait := r.value("data_wait")) is not None]
    if not rows:
        return '<p class="note">no trial measured its data wait</p>'
    bar_h = 16
    W, H = 720, 40 + bar_h * len(rows) + 24
    x0, x1, top = 160, W - 140, 24
    bottom = top + bar_h * len(rows)
    sx = Scale([0.0, 1.0], x0, x1, pad=0)
    out = [_svg_open(W, H, 'id="data-wait-plot" class="plot"')]
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<line x1="{sx(v):.1f}" y1="{top}" x2="{sx(v):.1f}" y2="{bottom}" stroke="{COLORS["grid"]}"/>')
        out.append(_muted(sx(v), bottom + 14, f"{v:.0%}"))
    for v, label in ((COMPUTE_BOUND_BELOW, "compute-bound below"), (INPUT_BOUND_ABOVE, "input-bound above")):
        above = v == INPUT_BOUND_ABOVE
        out.append(f'<line x1="{sx(v):.1f}" y1="{top - 4}" x2="{sx(v):.1f}" y2="{bottom}" '
                   f'stroke="{COLORS["text"]}" stroke-dasharray="3 3"/>')
        out.append(_text(sx(v) + (4 if above else -4), top - 8, f"{label} {v:.0%}",
                         anchor="start" if above else "end", size=10))
    for i, (r, wait) in enumerate(rows):
        label = bound_label(wait)
        color = BOUND_COLORS[label]
        y = top + i * bar_h
        star = f" {FRONT_MARK}" if study.rank(r) == 0 else ""
        out.append(_text(x0 - 6, y + bar_h - 4, f"trial {r.trial}{star}", anchor="end"))
        out.append(f'<rect x="{x0}" y="{y + 2}" width="{max(1.0, sx(min(max(wait, 0.0), 1.0)) - x0):.1f}" '
                   f'height="{bar_h - 4}" fill="{color}"><title>trial {r.trial}: {wait:.1%} of step time '
                   f'waiting for data ({label})</title></rect>')
        out.append(_text(x1 + 6, y + bar_h - 4, f"{wait:.1%} {label}", anchor="start", extra=f'fill="{color}"'))
    out.append("</svg>")
    return "".join(out)

