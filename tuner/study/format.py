"""How values and states look, the same in the terminal, the live view, the HTML report and the export."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tuner.study.metrics import metric

if TYPE_CHECKING:
    from tuner.study.record import TrialRecord

# One colour per state, in rich's names and as hex for HTML. An oom and a divergence are the config's fault and
# teach the sampler (yellow/orange); an error is a bug or a crash (red).
STATE_COLORS: dict[str, tuple[str, str]] = {
    "complete": ("green", "#1a7f37"),
    "not reached": ("cyan", "#1b7c83"),  # trained its budget without meeting the study's target: slower or worse
    "stopped": ("blue", "#0969da"),  # a scheduler stopped it at a rung: measured, not failed
    "oom": ("yellow", "#9a6700"),
    "diverged": ("dark_orange", "#bc4c00"),
    "error": ("red", "#cf222e"),
    "compile_timeout": ("magenta", "#8250df"),  # the compiler's time, not the config's figures
}
STATE_NOTES = {
    "complete": "complete",
    "not reached": "not reached: its budget (or 3x the baseline's time to a target the baseline set) ended before "
                   "an evaluation met the study's target (it trains worse or slower; not a failure, its figures are "
                   "real)",
    "stopped": "stopped by the scheduler at a rung (not a failure; its figures are from that rung)",
    "oom": "infeasible: out of memory",
    "diverged": "diverged: loss became NaN/inf",
    "error": "error",
    "compile_timeout": "torch.compile ran past its time limit",
}


def state_style(state: str) -> str:
    return STATE_COLORS.get(state, ("", ""))[0]


def state_hex(state: str) -> str:
    return STATE_COLORS.get(state, ("", "#57606a"))[1]


def budget_unit(budget: Any) -> str:
    """The unit a study's budget (study.json's `budget`) is spent in: "s" or "samples"; "" when unknown."""
    if isinstance(budget, dict):
        if budget.get("seconds") is not None:
            return "s"
        if budget.get("samples") is not None:
            return "samples"
    return ""


def measured_at_text(record: Any, unit: str) -> str:
    """Where a trial's figures were taken under a rung scheduler: `rung 1, 15 s`; "" without a scheduler."""
    parts = []
    if record.rung is not None:
        parts.append(f"rung {record.rung}")
    if record.measured_at is not None:
        parts.append(f"{fmt(float(record.measured_at), 3)} {unit}".rstrip())
    return ", ".join(parts)


def fmt(value: Any, digits: int = 4) -> str:
    """Short human form: `digits` significant digits for floats (whole numbers when large), "-" for missing."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.0f}" if abs(value) >= 10**digits else f"{value:.{digits}g}"
    return str(value)


def fmt_metric(key: str, value: Any) -> str:
    """A metric's value as its entry in tuner.study.metrics says (a percentage for fractions, and so on)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return fmt(value)
    if not math.isfinite(value):
        return str(value)
    kind = metric(key).fmt
    if kind == "percent":
        return f"{value:.1%}"
    if kind == "rate":
        return f"{value:.1f}" if value < 1e4 else f"{value:.0f}"
    if kind == "seconds":
        return f"{value:.3g}" if value < 100 else f"{value:.0f}"
    if kind in ("mb", "count"):
        return f"{value:.0f}"
    if kind == "si":
        return si(value)
    return fmt(value)


def si(value: float) -> str:
    """3.2e9 -> "3.2G", 540000 -> "540k", 12 -> "12": FLOP counts and rates at a glance."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{prefix}"
    return f"{value:.3g}"


def ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8"."""
    parts: list[str] = []
    nums = sorted(numbers)
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(parts)


# An interval wider than this factor (high / low) ranks nothing: two re-runs of a ResNet-18 that read val_loss 0.83
# and 7.79 gave 1.664e-06-3878705 (geometric, t with 1 degree of freedom), which a user reads as a bug.
WIDE = 100.0
DISAGREE = 2.0  # re-runs this far apart (max / min) disagree themselves; closer, the pooled noise made it wide


def fmt_figure(record: "TrialRecord", key: str) -> str:
    """A trial's figure as reports show it: the confirmed centre and its interval, `7996 (7185-8897)`, where the
    confirmation phase re-ran the trial; the search's single reading otherwise. A to-target figure (TO_TARGET)
    counts the runs that did not reach the target, `4 (2.3-6.96; 1 of 4 runs not reached)`, and a trial none of
    whose runs reached it reads `not reached`. An interval over WIDE says the re-runs disagree instead."""
    from tuner.study.metrics import TO_TARGET

    confirmed = record.confirmed.figures.get(key) if record.confirmed is not None else None
    if confirmed is None:
        if key in TO_TARGET and record.get(key) is None and _not_reached(record):
            runs = 1 + sum(1 for s in record.confirmed.states if s in ("complete", "not reached")) \
                if record.confirmed is not None else 1
            return "not reached" if runs <= 1 else f"not reached (0 of {runs} runs)"
        return fmt_metric(key, record.get(key))
    text = ("at least " if confirmed.at_least else "") + fmt_metric(key, confirmed.centre)
    inside = [f"{fmt_metric(key, confirmed.low)}-{fmt_metric(key, confirmed.high)}"] \
        if confirmed.low is not None and confirmed.high is not None else []
    if inside and confirmed.low > 0 and confirmed.high / confirmed.low > WIDE:
        values = ", ".join(fmt_metric(key, v) for v in confirmed.values)
        own = [v for v in confirmed.values if v > 0]
        # its own re-runs may agree where the study's pooled noise is what is wide (another trial's re-runs)
        why = "re-runs disagree" if len(own) < 2 or max(own) / min(own) > DISAGREE else \
            "the study's noise too wide for an interval; re-runs"
        inside = [f"{why}: {values}; no interval"]
    if confirmed.not_reached:
        inside.append(f"{confirmed.not_reached} of {confirmed.runs} runs not reached")
    return text + (f" ({'; '.join(inside)})" if inside else "")


def _not_reached(record: "TrialRecord") -> bool:
    """Whether the trial, or any of its confirmation re-runs, ended `not reached` (a study with a target)."""
    return record.state == "not reached" or (record.confirmed is not None and "not reached" in record.confirmed.states)


def tf32_on(record: Any) -> bool:
    """Whether a trial ran fp32 matmuls/convolutions as TF32: its sampled `tf32`, else its config's."""
    if "tf32" in record.params:
        return bool(record.params["tf32"])
    return bool(((record.config or {}).get("params") or {}).get("tf32"))


def precision_label(precision: Any, tf32: bool) -> str:
    """`fp32 + TF32` where fp32 ran on TF32 tensor cores (a different numeric than plain fp32), else the name."""
    return f"{precision} + TF32" if precision == "fp32" and tf32 else fmt(precision)


def fmt_param(record: Any, name: str) -> str:
    """A trial's param as reports show it: like fmt, but precision says when fp32 ran as TF32, and a knob set
    through the environment that the trial did not sample (the probes kept yours) shows what it ran under, from its
    config, as the baseline's cell does (`default`), not `-`."""
    from tuner.knobs import env_knobs

    value = record.params.get(name)
    if value is None and name in env_knobs():
        value = ((getattr(record, "config", None) or {}).get("params") or {}).get(name)
    if name == "precision" and value is not None:
        return precision_label(value, tf32_on(record))
    return fmt(value)


def optimizer_text(settings: dict[str, dict[str, Any]]) -> str:
    """`Adam lr 0.0002, betas 0.5/0.999` per phase (`d: ...; g: ...` for several): what the trial trained with."""
    def one(s: dict[str, Any]) -> str:
        parts = [f"{k} {'/'.join(f'{x:g}' if isinstance(x, float) else str(x) for x in v)}" if isinstance(v, list)
                 else f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                 for k, v in s.items() if k != "optimizer"]
        return f"{s.get('optimizer', '?')} " + ", ".join(parts)

    if len(settings) == 1:
        return one(next(iter(settings.values())))
    return "; ".join(f"{phase}: {one(s)}" for phase, s in settings.items())
