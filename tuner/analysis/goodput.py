"""Each trial's statistical efficiency and goodput, from the study's baseline: derived when the records are read.

A trial records its own effective batch (batch_size x accumulation_steps x ranks) and, where measured, its gradient
noise scale (tuner.train.noise). Its `efficiency` is the progress one of its training samples makes against one
of the baseline's (`efficiency` below: (phi + M0) / (phi + M), phi the *baseline's* noise scale,
M0 its effective batch), and its `goodput` its throughput x that efficiency: useful samples per second, the
figure that says whether a faster config with a larger batch is faster to a given loss. Neither is an objective:
a study without the baseline's noise scale shows them as "-".

Statistical efficiency (Pollux, OSDI'21, eq. 5; AdaptDL goodput.py `efficiency`): the progress one training sample
makes at effective batch M relative to M0, with phi the noise scale:

    E(M) = (phi + M0) / (phi + M)

(AdaptDL writes it as gain / (M / M0) with AdaScale's gain r = (phi + M0) / (phi + M) x M / M0, the progress of
one *step* at M against one at M0.) E < 1 for M > M0: each sample teaches less, so reaching the same loss takes
1 / E times the samples. Goodput = throughput x E: useful samples per second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from tuner.study import THROUGHPUT, TrialRecord, finite
from tuner.analysis.rounds import in_baseline_units

DERIVED = ("efficiency", "goodput")
LrRule = Literal["linear", "sqrt", "adascale"]
LR_RULES: tuple[str, ...] = ("linear", "sqrt", "adascale")


def efficiency(batch: float, base_batch: float, noise_scale: float) -> float:
    """Progress per training sample at effective batch `batch` relative to `base_batch` (Pollux eq. 5):
    (phi + M0) / (phi + M). 1 at the base batch; below 1 for a larger batch, above 1 for a smaller one."""
    if batch <= 0 or base_batch <= 0 or noise_scale < 0:
        raise ValueError("batch sizes must be positive and the noise scale non-negative")
    return (noise_scale + base_batch) / (noise_scale + batch)


def sample_cost(batch: float, base_batch: float, noise_scale: float) -> float:
    """How many times the base batch's training samples `batch` needs to reach the same loss: 1 / efficiency.
    Known before a trial runs, from the baseline's noise scale alone."""
    return 1.0 / efficiency(batch, base_batch, noise_scale)


def gain(batch: float, base_batch: float, noise_scale: float) -> float:
    """AdaScale's gain ratio r (Johnson et al. 2020; AdaptDL's `gain`): the progress of one step at `batch`
    against one at `base_batch`, efficiency x batch / base_batch, between 1 and batch / base_batch."""
    return efficiency(batch, base_batch, noise_scale) * batch / base_batch


def scaled_lr(lr: float, batch: float, base_batch: float, rule: LrRule, noise_scale: float | None = None) -> float:
    """The learning rate for `batch`, from `lr` tuned at `base_batch`: linear (Goyal et al. 2017: lr x M / M0),
    sqrt (Krizhevsky 2014, Hoffer et al. 2017: lr x sqrt(M / M0)) or adascale (lr x the gain; needs the noise
    scale)."""
    ratio = batch / base_batch
    if rule == "linear":
        return lr * ratio
    if rule == "sqrt":
        return lr * math.sqrt(ratio)
    if rule == "adascale":
        if noise_scale is None:
            raise ValueError("the adascale rule needs a noise scale")
        return lr * gain(batch, base_batch, noise_scale)
    raise ValueError(f"unknown lr rule {rule!r}; one of {', '.join(LR_RULES)}")


def baseline_record(baseline: dict[str, Any] | None, records: list[TrialRecord]) -> TrialRecord | None:
    """The study's baseline trial (study.json's `baseline`), unless the record under its number ran other knobs
    (as tuner.study.Study.baseline_trial decides)."""
    raw = (baseline or {}).get("trial")
    if raw is None:
        return None
    record = next((r for r in records if r.trial == int(raw)), None)
    want = (baseline or {}).get("params") or {}
    if record is None or any(record.params.get(k, v) != v for k, v in want.items()):
        return None
    return record


def base_point(base: TrialRecord | None) -> tuple[float, float] | None:
    """(the baseline's noise scale, its effective batch), or None when either is missing."""
    if base is None:
        return None
    phi, m0 = finite(base.get("noise_scale")), finite(base.get("effective_batch"))
    if phi is None or m0 is None or m0 <= 0 or phi < 0:
        return None
    return phi, m0


def add_goodput(records: list[TrialRecord], base: TrialRecord | None) -> None:
    """Set `efficiency`, `goodput` and `baseline_noise_scale` on every record with an effective batch, against
    `base`; drop stale ones where there is no baseline figure (never NaN: the views show "-"). Goodput is the
    throughput the table shows x efficiency: the confirmed centre where the trial was re-run, adjusted for the
    machine's drift between rounds as the table, the front and the pick rank it (tuner.analysis.rounds
    .in_baseline_units), so goodput / efficiency is the table's throughput."""
    point = base_point(base)
    throughput = in_baseline_units(records, base.trial if base is not None else None, _figure)
    for r in records:
        for key in (*DERIVED, "baseline_noise_scale"):
            r.metrics.pop(key, None)
        m = finite(r.get("effective_batch"))
        if point is None or m is None or m <= 0:
            continue
        phi, m0 = point
        eff = efficiency(m, m0, phi)
        r.metrics["efficiency"] = eff
        r.metrics["baseline_noise_scale"] = phi
        thr = throughput(r, THROUGHPUT)
        if thr is not None:
            r.metrics["goodput"] = thr * eff


def _figure(record: TrialRecord, metric: str) -> float | None:
    """The figure goodput is made of before the drift between rounds: the confirmed centre where the confirmation
    re-ran the trial (the search's one reading beside it made a confirmed trial's goodput disagree with its
    throughput), the search's reading otherwise."""
    fig = record.confirmed.figures.get(metric) if record.confirmed is not None else None
    return fig.centre if fig is not None and fig.centre > 0 else record.value(metric)


@dataclass(frozen=True)
class LrAdvice:
    """The lr that goes with a trial's effective batch, against the baseline's: which named rule the trial's lr
    followed (`rule`), and what each rule gives from the baseline's lr (linear, sqrt, and AdaScale's gain where the
    baseline's noise scale is known). tuner itself applies none: a space's lr / lr_scale is searched as given."""

    batch: float
    base_batch: float
    lr: float
    base_lr: float
    noise_scale: float | None
    rule: str  # "kept" (the baseline's lr at another batch), "linear", "sqrt", "adascale" or "searched"

    def rules(self) -> dict[str, float]:
        out = {r: scaled_lr(self.base_lr, self.batch, self.base_batch, r, self.noise_scale)  # type: ignore[arg-type]
               for r in LR_RULES if r != "adascale" or self.noise_scale is not None}
        return out

    def text(self) -> str:
        followed = {"kept": "the baseline's lr, no rule applied",
                    "searched": "searched, none of the rules below"}.get(self.rule, f"the {self.rule} rule")
        given = ", ".join(f"{'AdaScale gain' if r == 'adascale' else r} {v:.3g}" for r, v in self.rules().items())
        noise = f" (noise scale {self.noise_scale:.0f})" if self.noise_scale is not None else ""
        return (f"effective batch {self.batch:.0f} against the baseline's {self.base_batch:.0f} at lr "
                f"{self.base_lr:.3g}: trained at lr {self.lr:.3g} ({followed}); the rules give {given}{noise}")

    def to_json(self) -> dict[str, Any]:
        return {"effective_batch": self.batch, "baseline_effective_batch": self.base_batch, "lr": self.lr,
                "baseline_lr": self.base_lr, "rule": self.rule, "noise_scale": self.noise_scale,
                "rules": self.rules(), "text": self.text()}


def first_lr(record: TrialRecord) -> float | None:
    """The lr the record's first optimizer phase trained with (TrialResult.optimizer)."""
    for settings in (record.optimizer or {}).values():
        return finite(settings.get("lr"))
    return None


def lr_advice(record: TrialRecord, base: TrialRecord | None) -> LrAdvice | None:
    """The trial's lr against the baseline's, when its effective batch differs from the baseline's and both lrs
    were recorded; None otherwise."""
    if base is None:
        return None
    m, m0 = finite(record.get("effective_batch")), finite(base.get("effective_batch"))
    lr, lr0 = first_lr(record), first_lr(base)
    if m is None or m0 is None or m <= 0 or m0 <= 0 or m == m0 or lr is None or lr0 is None or lr0 <= 0:
        return None
    phi = finite(base.get("noise_scale"))
    ratio = lr / lr0
    rule = "searched"
    if math.isclose(ratio, 1.0, rel_tol=1e-3):
        rule = "kept"
    else:
        for name in LR_RULES:
            if name == "adascale" and phi is None:
                continue
            if math.isclose(lr, scaled_lr(lr0, m, m0, name, phi), rel_tol=1e-3):  # type: ignore[arg-type]
                rule = name
                break
    return LrAdvice(batch=m, base_batch=m0, lr=lr, base_lr=lr0, noise_scale=phi, rule=rule)
