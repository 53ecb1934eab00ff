"""One typed record per trial: what training measured (`TrialResult`) and where it came from (`TrialRecord`).

Structure is typed (state, params, config, windows, ...); figures are a flat `metrics` mapping whose known keys
are described once in `tuner.study.metrics`, so a new metric needs no new field here. On disk (result.json), in
`tuner train --format json` and in `tuner report --format json` the metrics sit beside the structural keys, flat,
as pandas and jq users expect.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from tuner.study.metrics import finite

State = Literal["complete", "not reached", "stopped", "oom", "diverged", "error", "compile_timeout"]
# "stopped": a scheduler stopped it at a rung (issue 20); what it measured up to there is real data, not a failure.
# "not reached": a study with a target (issue 34) whose trial spent its budget without an evaluation meeting it:
# measured in full like a complete trial (and told to Optuna as one), only slower or worse than the target asks.
# "compile_timeout": torch.compile's first steps ran past the compile limit (tuner.train.compile.compile_limit).
STATES: tuple[str, ...] = ("complete", "not reached", "stopped", "oom", "diverged", "error", "compile_timeout")
FAILED_STATES: tuple[str, ...] = ("oom", "diverged", "error", "compile_timeout")
MetricValue = float | int | str | bool | None


BUSY_SHARE = 0.20  # others took 20% of a run's CPUs or more: its figures move with the machine's load


class RunEnvironment(BaseModel):
    """What a trial's process ran under besides its config, which changes what it reads: the environment variables
    that change torch's speed (tuner.config.SPEED_ENV, those set) and torch's CPU thread counts. A user's own loop
    run without them reads differently (OMP_WAIT_POLICY on a shared machine: up to 10x)."""

    model_config = ConfigDict(extra="forbid")

    variables: dict[str, str] = Field(default_factory=dict)
    torch_threads: int | None = None  # torch.get_num_threads() while it trained
    interop_threads: int | None = None  # torch.get_num_interop_threads()
    niceness: int | None = None  # the process's scheduling niceness: above the user's, it loses the CPU to their work
    # While it trained: the share of its CPUs other processes took (tuner.measure.load), the CPUs others kept busy
    # and the 1-minute load average at its end. A share of BUSY_SHARE or more: its figures move with that load.
    others_share: float | None = None
    others_cpus: float | None = None
    load1: float | None = None

    @property
    def busy(self) -> bool:
        return self.others_share is not None and self.others_share >= BUSY_SHARE


class TrialResult(BaseModel):
    """What one training run returns. Failures are states with a reason, never exceptions."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    state: State
    error: str | None = None  # one line: `Type: message`
    traceback: str | None = None  # the user's own frames, for an exception raised in their workload
    windows: list[float] = Field(default_factory=list)  # samples/s of each timed window
    loss_curve: list[list[float | None]] = Field(default_factory=list)  # [samples, mean train loss] per window (None: NaN)
    capped: bool = False  # stopped by the wall-time cap before the budget was spent
    device: str = ""
    sample_grid: str | None = None  # an image of generated samples, when the workload's evaluate wrote one
    optimizer: dict[str, dict[str, Any]] | None = None  # per phase: the optimizer and the hyperparameters it used
    rung: int | None = None  # the highest rung (0-based) it reached under a rung scheduler; None: no scheduler
    measured_at: float | None = None  # the budget used (the budget's unit: seconds or samples) when its figures were taken
    environment: RunEnvironment | None = None  # what its process ran under (None: a record from before it was kept)
    # With a target (tuner.study.target): [samples, training seconds, quality] at each evaluation every K samples.
    quality_curve: list[list[float | None]] = Field(default_factory=list)
    metrics: dict[str, MetricValue] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _fold_metrics(cls, data: Any) -> Any:
        """Flat input (result.json): every key that is not a field is a metric."""
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        folded = dict(data.get("metrics") or {})
        out = {}
        for k, v in data.items():
            if k == "metrics":
                continue
            if k in fields:
                out[k] = v
            else:
                folded[k] = v
        out["metrics"] = folded
        return out

    @model_serializer(mode="wrap")
    def _flatten(self, handler: Any) -> dict[str, Any]:
        d = handler(self)
        metrics = d.pop("metrics", {}) or {}
        return {**d, **{k: v for k, v in metrics.items() if k not in d}}

    # --- reading ------------------------------------------------------------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        """A structural field or a metric by name."""
        if key in type(self).model_fields and key != "metrics":
            return getattr(self, key)
        return self.metrics.get(key, default)

    def value(self, key: str) -> float | None:
        """The finite numeric value of a metric, or None."""
        return finite(self.metrics.get(key))

    @property
    def throughput(self) -> float | None:
        return self.value("throughput")

    @property
    def complete(self) -> bool:
        """Trained its whole budget (or to its target) and measured everything: "not reached" too."""
        return self.state in ("complete", "not reached")

    def to_json(self) -> dict[str, Any]:
        from tuner.files import json_safe

        return json_safe(self.model_dump(mode="json"))


class Rerun(TrialResult):
    """One confirmation re-run of a trial's config (trials/NNNN/confirm/KK.json)."""

    repeat: int
    # The confirmation round it was read in: 0 the planned trials, 1, 2, ... each moved pick's, with the baseline
    # read again beside it (tuner.search._confirm). None: recorded by a tuner that did not keep rounds.
    round: int | None = None
    # The training seed it ran with: each repeat its own (tuner.search._confirm.rerun_seed), so seed-to-seed
    # variation is in the confirmed figures. None: recorded by a tuner that re-ran with the trial's own seed.
    seed: int | None = None
    started: str | None = None
    ended: str | None = None


class ConfirmedFigure(BaseModel):
    """One metric over a trial's complete re-runs: the values, their centre and an interval (see method)."""

    model_config = ConfigDict(extra="forbid")

    values: list[float]
    centre: float
    low: float | None = None  # None: fewer than two complete re-runs
    high: float | None = None
    # Where ONE more run of this config (`tuner train` on the export) should read, 95%: the same pooled spread as a
    # prediction interval (wider than the mean's by sqrt(1 + n)); drift between sessions is not in it.
    rerun_low: float | None = None
    rerun_high: float | None = None
    # A to-target figure (tuner.study.TO_TARGET): the runs counted, the re-runs, reached or not;
    # `values` holds those that reached the target, the other runs did not, and low/high are the interval over
    # them (tuner.analysis.time_to_target, as the export's header). None: every re-run is one of `values`.
    runs: int | None = None
    # A to-target figure whose not-reached runs are counted at the target's cap: the centre is a lower bound
    # (the views say `at least`).
    at_least: bool = False
    censored: float | None = None  # a to-target figure: what each not-reached run counts at (None: left out)
    step: float | None = None  # a to-target figure: one evaluation step (seconds or samples) its runs were read at

    @property
    def not_reached(self) -> int:
        return (self.runs - len(self.values)) if self.runs is not None else 0

    def counted(self) -> list[float]:
        """The values the centre is read from: a to-target figure's not-reached runs at what they count as (the
        verdict compares these, as the export's header does: issue 51), else `values`."""
        return [*self.values, *[self.censored] * self.not_reached] if self.censored is not None else self.values


class Confirmed(BaseModel):
    """A confirmed trial: its config re-run after the search, interleaved with the other confirmed configs."""

    model_config = ConfigDict(extra="forbid")

    runs: int  # re-runs recorded, any state
    states: list[str] = Field(default_factory=list)
    figures: dict[str, ConfirmedFigure] = Field(default_factory=dict)
    method: str = ""
    suspect: str | None = None  # why most re-runs are suspect too (tuner.analysis.suspect); None: they clear it
    rounds: list[int | None] = Field(default_factory=list)  # each figure value's confirmation round, in order

    def groups(self, key: str) -> list[list[float]]:
        """The values of `key` per confirmation round: the run-to-run noise is pooled within rounds, so the drift
        between rounds (the baseline is read in several) does not pass for one config's spread."""
        values = self.figures[key].values
        if len(self.rounds) != len(values) or self.figures[key].runs is not None:  # a to-target figure: not by round
            return [values]
        by_round: dict[int | None, list[float]] = {}
        for v, r in zip(values, self.rounds):
            by_round.setdefault(r, []).append(v)
        return list(by_round.values())

    def beside(self, other: "Confirmed", key: str) -> list[float]:
        """This trial's values of `key` read in the rounds `other` was read in (the baseline re-read beside a
        later pick): drift between rounds is then not a difference between them. All of them when it has none
        there (a study confirmed in one round, or by a tuner that did not keep rounds)."""
        values = self.figures[key].values
        theirs = {r for r in other.rounds if r is not None}
        same = [v for v, r in zip(values, self.rounds) if r in theirs] if len(self.rounds) == len(values) else []
        return same or values

    def interval(self, key: str) -> "tuple[float, float | None, float | None] | None":
        f = self.figures.get(key)
        return None if f is None else (f.centre, f.low, f.high)


class TrialRecord(TrialResult):
    """A trial of a study: its result plus its number, sampled params, full config and bookkeeping."""

    trial: int
    params: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] | None = None  # the TrialConfig it ran (what `tuner export` writes back)
    wall_limit_s: float | None = None
    run_seconds: float | None = None  # whole trial in its process: set-up, training, scoring
    started: str | None = None  # ISO time the trial began (UTC)
    ended: str | None = None
    host: str | None = None  # the machine the trial ran on (its hostname)
    node: str | None = None  # the Ray node it ran on (Ray's node id; None outside Ray)
    confirmed: Confirmed | None = None  # re-runs after the search (tuner search's confirmation phase)

    @classmethod
    def of(cls, result: TrialResult, **where: Any) -> "TrialRecord":
        return cls.model_validate({**result.model_dump(), **where})
