"""study.json's schema: StudyMeta, and the types of its free-form sections that tuner reads back (the pre-flight's
timings, the baseline, the scheduler, the sampling context), checked as the file is read (StudyFolder.read_meta)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tuner.config import Budget
from tuner.study.objective import Objective


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _BaselineShape(_Loose):
    trial: int | None = None
    params: dict[str, Any] | None = None


class _SchedulerShape(_Loose):
    name: str = "fifo"
    eta: float | None = None
    min_budget: float | None = None
    rungs: list[float] = Field(default_factory=list)


class _AskedShape(_Loose):
    concurrency: int | None = None
    cpus_per_trial: float | None = None
    gpus_per_trial: float | None = None


class _ResourcesShape(_Loose):
    asked: _AskedShape | None = None


class HeavyStep(_Loose):
    """The space's heaviest step, timed by the pre-flight after the baseline's (its micro-batch, times its
    accumulation): where the study says its slowest trials do not fit the budget, and what the probes skip."""

    batch_size: int
    accumulation_steps: int = 1
    step_seconds: float
    step_samples: int | None = None  # under batch_size x accumulation_steps where the dataset is smaller
    needs_budget: float | None = None  # the budget those trials need, where it is over the study's


class SizedBudget(_Loose):
    """The space's default budget, raised by the pre-flight to one its step fits."""

    model_config = ConfigDict(extra="allow", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    from_: float = Field(alias="from")  # study.json's key
    to: float


class Preflight(_Loose):
    """The pre-flight's timings on the trials' device (study.json's `preflight`): every trial's scoring reserve
    and pace, the parity check's and the probes' plans, and the report's split role come from them. Empty (every
    field None) where nothing was timed on the trials' device: a cluster's study."""

    step_seconds: float | None = None  # the baseline's optimizer step, accumulation included (device synced)
    step_samples: int | None = None  # the samples of that step
    score_seconds: float | None = None  # a full scoring (evaluate()), estimated
    device: str | None = None  # the trials' device, as it describes itself
    batch_size: int | None = None  # the baseline's, which that step was
    accumulation_steps: int | None = None
    sized: SizedBudget | None = None
    heaviest: HeavyStep | None = None
    # The models' batch-statistics layers (tuner.measure.batch_stats): [] where the micro-batch split of an
    # effective batch computes the same gradient; None where not looked at.
    batch_statistics: list[str] | None = None

    def timed(self) -> bool:
        """Whether the pre-flight timed anything on the trials' device."""
        return bool(self.model_dump(exclude_none=True))

    def pace(self) -> float | None:
        """Seconds per training sample of the baseline's step (None: not timed)."""
        return self.step_seconds / self.step_samples if self.step_seconds and self.step_samples else None


class _ContextShape(_Loose):
    cpus: int | None = None
    gpus: float | None = None
    device: str | None = None
    precisions: list[str] | None = None
    tf32_available: bool | None = None


class MetaShape(_Loose):
    """The types inside study.json's free-form sections that tuner reads back (StudyMeta keeps them as dicts):
    checked as the file is read, so a wrong one is one line naming the key, before any command does any work.
    A stored domain (`domains.<param>`) is tuner.space's to check (tuner.search on --resume)."""

    baseline: _BaselineShape | None = None
    scheduler: _SchedulerShape | None = None
    resources: _ResourcesShape | None = None
    preflight: Preflight | None = None
    context: _ContextShape | None = None
    budget: Budget | None = None
    domains: dict[str, dict[str, Any]] | None = None


class StudyMeta(BaseModel):
    """study.json. Unknown keys are kept (a newer tuner may add some)."""

    model_config = ConfigDict(extra="allow")

    name: str  # also the Optuna study's name in the database, whatever the folder is called now
    id: str | None = None  # the study's identity, also kept in its Optuna study (absent in studies before it)
    space: str = ""
    space_source: str = ""
    space_def: dict[str, Any] | None = None
    params: list[str] = Field(default_factory=list)  # the searched params, in space order
    objectives: list[Objective] = Field(default_factory=list)
    workload: str = "gan"
    workload_options: dict[str, Any] = Field(default_factory=dict)
    dataset: str | None = None
    budget: dict[str, Any] | None = None
    trials: int = 0
    sampler: str = "tpe"
    seed: int = 0
    baseline: dict[str, Any] | None = None
    storage: str = ""
    created: str | None = None
    resumed: list[str] = Field(default_factory=list)
    hardware: dict[str, Any] = Field(default_factory=dict)
    resources: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, Any] = Field(default_factory=dict)
    confirm: dict[str, int] = Field(default_factory=dict)  # {"trials": K, "repeats": R} of the confirmation phase
    noise: dict[str, Any] | None = None  # the noise floor the confirmation measured (tuner.analysis.stats)
    # The sampling context of the first run (cpus, gpus, device, native precisions, tf32_available) and the
    # domains the space resolved to for it: what --resume samples from, on whatever machine it runs.
    context: dict[str, Any] | None = None
    domains: dict[str, Any] | None = None
    # sha256 of each FID cache file the driver built and shipped to every trial (relative to the cache folder).
    fid_cache: dict[str, str] | None = None
    # The rung scheduler (tuner.search._rungs.SchedulerPlan): name, eta, min_budget, rungs. None: fifo (older studies).
    scheduler: dict[str, Any] | None = None
    # The pre-flight's timings on the trials' device that every trial's scoring reserve comes from, and `sized`
    # when the study raised the space's default budget to fit them.
    preflight: Preflight | None = None
    # This invocation's --study-seconds allowance (tuner.search._allowance): seconds, margin, estimates, spent_s.
    allowance: dict[str, Any] | None = None
    # The machine the study was started on: the user's own speed environment variables (kept as they were: tuner
    # sets none of its own) and what other processes took of its CPUs in the sample before the study (issue 58).
    machine: dict[str, Any] | None = None
    # The horizon check `tuner search --horizon` runs after the confirmation (kept by --resume): {"budget": a
    # Budget, "seeds": n}; its result is horizon.json (tuner.study.horizon).
    horizon: dict[str, Any] | None = None

    def model_post_init(self, __context: Any) -> None:
        if not self.objectives:  # an old study without objectives: what every tuner study was scored on
            quality = "loss" if self.workload == "cnn" else "fid"
            self.objectives = [Objective(metric="throughput", direction="maximize"),
                               Objective(metric=quality, direction="minimize")]

    def describe_budget(self) -> str:
        from tuner.config import Budget

        try:
            return Budget.model_validate(self.budget).describe()
        except ValidationError:
            return "" if self.budget is None else str(self.budget)
