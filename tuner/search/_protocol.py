"""The typed protocol between a trial process and the study's driver, across Ray.

What a trial is told is one `TrialOrder` (its number, sampled params, time limits and, for a confirmation re-run,
its repeat and round); what it tells is a `TrialReport` (a window, a phase, a rung, its final outcome: the one set
of report types, tuner.study.reports, that the engine makes and a scheduler reads). Ray Tune
carries plain data only: an order travels in Tune's config under ORDER_KEY (`to_config` / `from_config`), a report
as Tune's result dict (`to_tune` / `from_tune`). These two pairs are the only code that knows the keys, so the rest
of the search reads and writes typed objects; an objective's value sits under Tune's metric key
(`objective_key`), which only `to_tune` writes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from tuner.study import (FinalReport, Objective, PhaseReport, RungReport, StartReport, TrialRecord, TrialReport,
                         WindowReport)

ORDER_KEY = "tuner_order"  # the TrialOrder in Tune's config
_KIND = "tuner_report"  # which report a Tune result is
_BUDGET = "tuner_budget_used"  # the trial budget used so far, in the budget's unit (seconds or samples)
_RUNG = "tuner_rung"
_STATE = "tuner_state"
_FEASIBLE = "tuner_feasible"
_RECORD = "tuner_record"
_PHASE = "tuner_phase"
_LIMIT = "tuner_limit_s"
_OBJECTIVE = "objective_"
_STOPPED = "tuner_stopped"  # a final report a scheduler made for a trial it stopped (the race): told as PRUNED
_WORKERS = "tuner_ddp_workers"  # the hex id of a DDP trial's workers' placement group, beside each of its reports


def objective_key(o: Objective) -> str:
    """Tune's metric key of an objective (what the searcher's `metric` names)."""
    return f"{_OBJECTIVE}{o.metric}"


@dataclass(frozen=True)
class TrialLimits:
    """Every time limit a trial runs under besides its budget (the study's, in TrialSetup.base): the wall cap, the
    rung budgets under a rung scheduler (the last is the whole budget), the scoring kept out of training's share,
    and the pre-flight's seconds per sample (a slower trial keeps more for its scoring)."""

    wall_limit_s: float | None = None
    rungs: tuple[float, ...] = ()
    score_reserve_s: float | None = None
    preflight_pace_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "rungs": list(self.rungs)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TrialLimits":
        def num(key: str) -> float | None:
            return float(data[key]) if data.get(key) is not None else None

        return cls(wall_limit_s=num("wall_limit_s"), rungs=tuple(float(b) for b in data.get("rungs") or ()),
                   score_reserve_s=num("score_reserve_s"), preflight_pace_s=num("preflight_pace_s"))


@dataclass(frozen=True)
class TrialOrder:
    """What one trial runs: its study number, sampled params and limits; `repeat`/`round` for a confirmation re-run
    (tuner.search._confirm), and `seed`, the training seed it runs with in place of the config's (None: the
    config's own; a re-run's: tuner.search._confirm.rerun_seed)."""

    trial: int
    params: dict[str, Any] = field(default_factory=dict)
    limits: TrialLimits = TrialLimits()
    repeat: int | None = None
    round: int | None = None
    seed: int | None = None

    @property
    def rerun(self) -> bool:
        return self.repeat is not None

    @property
    def searched(self) -> dict[str, Any]:
        """The params a trial's record keeps: the sampler's own draws (a leading `_`, e.g. the micro-batch drawn
        before it steps to a divisor of an explicit effective batch: tuner.space._batch) stay with the sampler."""
        return {k: v for k, v in self.params.items() if not k.startswith("_")}

    def to_config(self) -> dict[str, Any]:
        """Tune's config for this order: plain data under one key."""
        return {ORDER_KEY: {"trial": int(self.trial), "params": dict(self.params), "limits": self.limits.to_json(),
                            "repeat": self.repeat, "round": self.round, "seed": self.seed}}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "TrialOrder":
        data = config[ORDER_KEY]
        return cls(trial=int(data["trial"]), params=dict(data.get("params") or {}),
                   limits=TrialLimits.from_json(data.get("limits") or {}),
                   repeat=None if data.get("repeat") is None else int(data["repeat"]),
                   round=None if data.get("round") is None else int(data["round"]),
                   seed=None if data.get("seed") is None else int(data["seed"]))


def order_of(config: dict[str, Any] | None) -> TrialOrder | None:
    """The order a Tune trial's config holds, or None (a config tuner did not make)."""
    return TrialOrder.from_config(config) if config and ORDER_KEY in config else None


def to_tune(report: TrialReport) -> dict[str, Any]:
    """The plain dict Tune takes (tune.report / ray.train.report)."""
    if isinstance(report, StartReport):
        return {_KIND: "start", _BUDGET: 0.0}
    if isinstance(report, WindowReport):
        return {_KIND: "window", _BUDGET: float(report.budget_used), "window": report.window,
                "samples": report.samples, "throughput": report.throughput,
                "throughput_spread": report.throughput_spread, "train_loss": report.train_loss,
                "train_seconds": report.train_seconds, "time_to_target": report.time_to_target}
    if isinstance(report, PhaseReport):
        return {_KIND: "phase", _BUDGET: 0.0, _PHASE: report.phase, _LIMIT: float(report.limit_s)}
    out: dict[str, Any] = {f"{_OBJECTIVE}{m}": float(v) for m, v in report.values.items()}
    out.update({_FEASIBLE: bool(report.feasible), _RECORD: json.dumps(report.record.to_json())})
    if isinstance(report, RungReport):
        out.update({_KIND: "rung", _RUNG: int(report.rung), _BUDGET: float(report.budget_used)})
        return out
    out.update({_KIND: "final", _STATE: report.record.state})
    if report.stopped:
        out[_STOPPED] = True
    if report.rung is not None:
        out.update({_RUNG: int(report.rung), _BUDGET: float(report.budget_used or 0.0)})
    return out


def from_tune(result: dict[str, Any] | None) -> TrialReport | None:
    """The report a Tune result carries (Tune adds keys of its own, ignored here); None for none."""
    kind = (result or {}).get(_KIND)
    if result is None or kind is None:
        return None
    if kind == "start":
        return StartReport()
    if kind == "window":
        return WindowReport(budget_used=float(result[_BUDGET]), window=result.get("window"),
                            samples=result.get("samples"), throughput=result.get("throughput"),
                            throughput_spread=result.get("throughput_spread"), train_loss=result.get("train_loss"),
                            train_seconds=result.get("train_seconds"), time_to_target=result.get("time_to_target"))
    if kind == "phase":
        return PhaseReport(phase=str(result[_PHASE]), limit_s=float(result[_LIMIT]))
    values = {k[len(_OBJECTIVE):]: float(v) for k, v in result.items() if k.startswith(_OBJECTIVE)}
    record = TrialRecord.model_validate(json.loads(result[_RECORD]))
    feasible = bool(result.get(_FEASIBLE))
    if kind == "rung":
        return RungReport(rung=int(result[_RUNG]), budget_used=float(result[_BUDGET]), result=record,
                          values=values, feasible=feasible)
    if kind == "final":
        rung = result.get(_RUNG)
        return FinalReport(values=values, feasible=feasible, record=record,
                           rung=None if rung is None else int(rung),
                           budget_used=None if rung is None else float(result[_BUDGET]),
                           stopped=bool(result.get(_STOPPED)))
    raise ValueError(f"unknown trial report kind {kind!r}")


def record_of(result: dict[str, Any] | None) -> TrialRecord | None:
    """The record a Tune result carries: the finished trial's (its final report), or the `stopped` one of a rung
    report (the last report of a trial a scheduler stopped there). None for any other report or none."""
    report = from_tune(result)
    return report.record if isinstance(report, (RungReport, FinalReport)) else None


def final_record(result: dict[str, Any] | None) -> TrialRecord | None:
    """The record of a finished trial's own final report only (a rung report's `stopped` record is not one)."""
    report = from_tune(result)
    return report.record if isinstance(report, FinalReport) else None


def rung_closed(result: dict[str, Any] | None) -> RungReport | FinalReport | None:
    """The report when a Tune result closes a rung (a rung report, or a final one at the top rung), else None."""
    report = from_tune(result)
    if isinstance(report, RungReport) or (isinstance(report, FinalReport) and report.rung is not None):
        return report
    return None


__all__ = ["ORDER_KEY", "FinalReport", "PhaseReport", "RungReport", "StartReport", "TrialLimits", "TrialOrder",
           "TrialReport", "WindowReport", "final_record", "from_tune", "objective_key", "order_of", "record_of",
           "rung_closed", "to_tune"]


def with_workers(payload: dict[str, Any], group_hex: str | None) -> dict[str, Any]:
    """A DDP worker's report as Tune's dict, tagged with its workers' placement group (tuner.search._ddp releases
    the group of a trial that ended, whatever report it ended on)."""
    return {**payload, _WORKERS: group_hex} if group_hex else dict(payload)


def workers_of(result: dict[str, Any] | None) -> str | None:
    """The placement group (hex id) a DDP trial's report names, or None (not a DDP trial)."""
    hex_id = (result or {}).get(_WORKERS)
    return str(hex_id) if hex_id else None
