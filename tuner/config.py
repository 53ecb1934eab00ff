"""Typed, validated trial configuration: the file `tuner train --config` reads and `tuner export` writes.

One `TrialConfig` describes one training run completely (workload, dataset, budget, knobs), so it can be
saved with every trial and run again bit-for-bit in settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model, field_validator,
                      model_serializer, model_validator)

from tuner.errors import ConfigError, unknown_key_hint
from tuner.knobs import KNOBS, Knob
from tuner.knobs import CompileMode, DeviceKind, OptimizerImpl, Precision, WaitPolicy  # noqa: F401  (as before)

FidFeatures = Literal["classifier", "inception"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class _Knobs(_Strict):
    """What Params does beyond its fields; the fields themselves come from tuner.knobs.KNOBS (`_field`)."""

    @model_validator(mode="after")
    def _loader_combinations(self) -> Any:
        if self.num_workers == 0 and self.prefetch_factor is not None:
            raise ValueError("prefetch_factor needs num_workers > 0 (set num_workers or drop prefetch_factor)")
        if self.num_workers == 0 and self.persistent_workers:
            raise ValueError("persistent_workers needs num_workers > 0 (set num_workers or drop persistent_workers)")
        return self

    @property
    def effective_batch(self) -> int:
        return self.batch_size * self.accumulation_steps

    @classmethod
    def defaults(cls, names: Any) -> dict[str, Any]:
        """Tuner's default of each knob in `names` (a query on tuner.knobs): e.g. the in-process loader, fp32."""
        return {name: cls.model_fields[name].default for name in names}


def _field(k: Knob) -> tuple[Any, Any]:
    """A knob's Params field, from its table entry: type, default, domain, description, and what turns a spelling
    users write (compile: off, a lower-case wait policy) into its value."""
    annotation = Annotated[k.annotation, BeforeValidator(k.coerce)] if k.coerce else k.annotation
    return annotation, Field(k.default, description=k.doc, **k.domain)


def params_model(knobs: Mapping[str, Knob]) -> type[_Knobs]:
    """The knobs' config model: one field per entry of `knobs`, in its order (tests plant a table to show that a
    new entry is a new field)."""
    return create_model("Params", __base__=_Knobs, __module__=__name__,
                        __doc__="The knobs, one field per entry of tuner.knobs.KNOBS (each one's type, default, "
                                "domain, role, and what it needs and moves are there).",
                        **{k.name: _field(k) for k in knobs.values()})


Params = params_model(KNOBS)  # a new knob is one entry in tuner.knobs.KNOBS


# The longest budget a clock can hold with room to spare: the trial's deadlines add set-up and scoring to it and
# threading's timers take at most threading.TIMEOUT_MAX (about 9.2e9 s); 1e8 s is over three years of training.
MAX_SECONDS = 1e8
MAX_SAMPLES = 10 ** 15  # so the samples budget's float arithmetic (rungs, paces) stays exact and finite


class Budget(_Strict):
    """How long a trial trains: by wall seconds or by training samples, exactly one."""

    # Finite only: an infinite budget never ends, and a NaN one compares false with everything.
    seconds: float | None = Field(None, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                  description="wall seconds of training")
    samples: int | None = Field(None, gt=0, le=MAX_SAMPLES,
                                description="training samples (the same work on any machine)")

    @model_validator(mode="after")
    def _exactly_one(self) -> "Budget":
        if (self.seconds is None) == (self.samples is None):
            raise ValueError("give exactly one of budget.seconds or budget.samples")
        return self

    def describe(self) -> str:
        return f"{self.seconds:g} seconds" if self.seconds is not None else f"{self.samples} samples"


def budget_from_options(seconds: float | None, samples: int | None) -> Budget | None:
    """The budget `--budget-seconds` / `--budget-samples` give (None: neither); a bad value is one ConfigError line
    naming the option, whatever the command."""
    if seconds is not None and samples is not None:
        raise ConfigError("give at most one of --budget-seconds and --budget-samples")
    if seconds is None and samples is None:
        return None
    try:
        return Budget(seconds=seconds, samples=samples)
    except ValidationError:
        option, value, top = ("--budget-seconds", seconds, f"{MAX_SECONDS:g}") if seconds is not None \
            else ("--budget-samples", samples, f"{MAX_SAMPLES:g}")
        raise ConfigError(f"{option} must be a finite number > 0 and at most {top} (got {value:g})") from None


HORIZON_SEEDS = 3  # seeds of each side a horizon check trains by default (--horizon-seeds)
_HORIZON_UNITS = {"s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
                  "minutes": 60.0, "h": 3600.0, "hour": 3600.0, "hours": 3600.0}
_HORIZON_SPELLING = "a number and its unit: 120s, 2m or 1.5h (training seconds, as --budget-seconds), or " \
                    "50000samples (training samples, as --budget-samples)"


def parse_horizon(text: str) -> Budget:
    """--horizon DURATION (`tuner export` and `tuner search`, issue 51): `120s`, `2m`, `1.5h` (seconds of training,
    as a budget's seconds) or `50000samples` (training samples): the two units a budget has (--budget-seconds,
    --budget-samples). A bare number or another unit is refused: which of the two it meant cannot be guessed."""
    import re

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*", text.strip().lower())
    if m is None or not m.group(2):
        raise ConfigError(f"--horizon {text!r}: give {_HORIZON_SPELLING}")
    number, unit = float(m.group(1)), m.group(2)
    try:
        if unit in ("samples", "sample"):
            if number != int(number):
                raise ConfigError(f"--horizon {text!r}: samples are whole numbers")
            return Budget(samples=int(number))
        if unit in _HORIZON_UNITS:
            return Budget(seconds=number * _HORIZON_UNITS[unit])
    except ValueError:  # pydantic's bounds (0, or past the largest budget)
        raise ConfigError(f"--horizon {text!r}: out of range for a budget (above 0, at most a budget's largest)") \
            from None
    raise ConfigError(f"--horizon {text!r}: unknown unit {unit!r}; give {_HORIZON_SPELLING}")


def horizon_words(budget: Budget) -> str:
    """A horizon (or a budget beside it) as the horizon check says it: `60 s`, `2 min`, `50,000 samples`."""
    if budget.samples is not None:
        return f"{budget.samples:,} samples"
    s = budget.seconds or 0.0
    return f"{s:g} s" if s < 120 else f"{s / 60:g} min"


def check_horizon_longer(horizon: Budget, trained: Budget, pace: float | None = None) -> None:
    """A horizon no longer than the trials' budget checks nothing the study did not read: one ConfigError line.
    Across units (a seconds horizon, a samples budget), `pace` (samples/s) converts; without one they pass."""
    h_s = horizon.seconds if horizon.seconds is not None else (horizon.samples / pace if pace else None)  # type: ignore[operator]
    t_s = trained.seconds if trained.seconds is not None else (trained.samples / pace if pace else None)  # type: ignore[operator]
    if horizon.samples is not None and trained.samples is not None:
        shorter = horizon.samples <= trained.samples
    elif h_s is not None and t_s is not None:
        shorter = h_s <= t_s
    else:
        return
    if shorter:
        raise ConfigError(f"--horizon {horizon_words(horizon)} is no longer than the study's trials "
                          f"({horizon_words(trained)}): the horizon check trains longer than they did; give a longer "
                          f"one")


class Measure(_Strict):
    """How throughput is measured: warm-up until the step time settles, then a few timed windows, each long enough
    to mean something.

    Window minimums, from a measurement here (built-in gan, batch 64, 50 steps on the 2-core CPU while other jobs
    kept its load near 12): a step's time varied by 32% (coefficient of variation) from one to the next; the
    figure of a window varied by 57% over 1-step windows, 54% over 2, 50% over 3, 27% over 8. So a one-step window
    reads the machine's noise as a speed. Three steps are the least that averages some of it and keeps a slow
    model (1 s a step) affordable: warm-up and 3 windows of 3 steps is ~12 s; 0.25 s is many scheduler slices
    and clock reads, so a fast step's window is not one hiccup either. A budget too short for `windows` such
    windows takes fewer (down to `min_windows`), never shorter ones; the pre-flight refuses a budget that cannot
    hold `min_windows` of them.
    """

    warmup_steps: int = Field(2, ge=0, le=10000, description="at least this many optimizer steps left out of "
                              "timing (0: none); warm-up goes on until the step time settles")
    warmup_max_steps: int = Field(20, ge=0, le=10000, description="warm-up ends here even if the step time has "
                                  "not settled")
    warmup_settle: float = Field(0.1, gt=0, le=10, description="settled: two consecutive warm-up steps within "
                                 "this fraction of each other")
    windows: int = Field(5, ge=1, le=1000, description="timed windows at most; throughput and spread are read over these")
    min_windows: int = Field(3, ge=1, le=1000, description="fewest timed windows a budget too short for `windows` "
                             "takes (the pre-flight refuses a budget that cannot fit them; a step that slowed "
                             "since takes fewer rather than overrun the budget)")
    window_min_steps: int = Field(3, ge=1, le=100000, description="optimizer steps each timed window holds at least")
    window_min_seconds: float = Field(0.25, ge=0, le=3600, description="seconds each timed window lasts at least")
    ceiling_seconds: float = Field(1.0, ge=0, le=600, description="wall-time deadline of each of the two ceilings "
                                   "(compute, input), at most 5% of the budget each; 0: none")


class Quality(_Strict):
    """How the trained model is scored. FID settings must be equal across the trials of a study."""

    enabled: bool = Field(True, description="false: throughput only (the `loader` space turns it off)")
    fid_features: FidFeatures = Field("classifier", description="the FID's feature extractor")
    fid_weights: Path | None = Field(None, description="Inception weights file for fid_features=inception")
    fid_samples: int = Field(1000, ge=16, le=100000, description="generated images per FID (same N in a study)")
    fid_seed: int = Field(1234, ge=0, description="latent seed of the generated images")


# Environment variables that change how fast torch runs: its OpenMP threads (how many, how they wait at a barrier,
# where they run), the math libraries' threads, glibc's malloc thresholds, CUDA's launches, allocator and cuBLAS
# workspace. A trial records
# those its process had (TrialResult.environment); `tuner export` writes them back as the config's `env`.
SPEED_ENV = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "OMP_DYNAMIC", "OMP_SCHEDULE",
             "GOMP_SPINCOUNT", "GOMP_CPU_AFFINITY", "KMP_BLOCKTIME", "KMP_AFFINITY", "KMP_HW_SUBSET",
             "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CUBLAS_WORKSPACE_CONFIG", "PYTORCH_CUDA_ALLOC_CONF",
             "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def speed_env(environ: Any) -> dict[str, str]:
    """The SPEED_ENV variables `environ` sets, in SPEED_ENV's order."""
    return {k: str(environ[k]) for k in SPEED_ENV if k in environ}


def env_command(env: dict[str, str], program: str = "python train.py") -> str:
    """`env` as the shell spells running `program` under it: OMP_WAIT_POLICY=PASSIVE python train.py."""
    import shlex

    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), program])


EVAL_EVERY_STEPS = 25  # a target study's default evaluation interval: the baseline's effective batch x this


class ReferenceSeed(_Strict):
    """One seed of a derived target's reference run (issue 51): the quality it settled at (the mean of its last
    evaluations) and when it first met the target the seeds set (None: it did not, within the reference budget)."""

    seed: int
    quality: float = Field(allow_inf_nan=False, description="the mean of its last 3 evaluations")
    time_to_target: float | None = Field(None, ge=0, allow_inf_nan=False, description="training seconds to the "
                                         "first evaluation that met the target; None: none did")


class Target(_Strict):
    """A quality to reach (issue 34): training runs until the first evaluation that meets `value` on `metric` (in
    its direction), evaluating every `eval_every_samples` training samples, the same for every trial of a study,
    so batch sizes compare at equal samples. `source` says how the value was set (--target, the space, ...)."""

    metric: str = Field(min_length=1, description="the study's quality metric, as the workload's evaluate() names it")
    direction: Literal["minimize", "maximize"] = Field("minimize", description="the metric's better side")
    value: float | None = Field(None, allow_inf_nan=False, description="reached at the first evaluation at or past it; "
                                "None: to be set from the baseline's evaluations (source 'baseline'), which then "
                                "trains its whole budget")
    eval_every_samples: int = Field(ge=1, le=10**15, description="training samples between two evaluations")
    source: str = Field("", description="how the value was set: '--target', 'space', '--until-target', 'baseline'")
    # A derived target (source 'baseline'): the baseline's evaluations it came from, [samples, seconds, quality].
    evaluations: list[list[float | None]] | None = Field(None, description="a target the baseline set: the "
                                                         "evaluations it was read from, each seed's last 3, "
                                                         "[samples, seconds, quality]")
    reference_seeds: list[ReferenceSeed] | None = Field(None, description="a target the baseline set: each seed of "
                                                        "its reference run, what it settled at; the target is their "
                                                        "median")
    cap_seconds: float | None = Field(None, gt=0, allow_inf_nan=False, description="training seconds after which "
                                      "a trial that has not met the target ends 'not reached' (3x the baseline's "
                                      "time to target); None: its budget")
    reference_budget: Budget | None = Field(None, description="a derived target: the budget the baseline trained "
                                            "to set it (a third of the trials', so the cap is about their budget)")
    reference_seconds: float | None = Field(None, ge=0, allow_inf_nan=False, description="a derived target: the "
                                            "wall seconds its reference runs took, set-up included (the summary's "
                                            "time split counts them apart from the overhead)")
    eval_subset: int | None = Field(None, ge=1, description="a derived target: the validation samples each of its "
                                    "evaluations scored (the workload's target_eval_samples; null: the whole split), "
                                    "so a resume under a workload that scores another is refused")

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: Any) -> dict[str, Any]:
        """A given target's record stays as it was (no derived-only keys); a derived one's `eval_subset` is kept
        where it was said (null: the whole split), and absent from a record that predates it (not known)."""
        d = handler(self)
        derived_only = ("evaluations", "cap_seconds", "reference_budget", "reference_seeds", "reference_seconds")
        if "eval_subset" not in self.model_fields_set:
            d.pop("eval_subset", None)
        return {k: v for k, v in d.items() if v is not None or k not in derived_only}

    def met(self, quality: float | None) -> bool:
        """`quality` meets the target (a missing or non-finite reading never does, nor any before it is set)."""
        import math

        if quality is None or not math.isfinite(quality) or self.value is None:
            return False
        return quality <= self.value if self.direction == "minimize" else quality >= self.value

    def describe(self) -> str:
        op = '<=' if self.direction == 'minimize' else '>='
        value = f"{self.value:g}" if self.value is not None else "(the baseline's, not set yet)"
        return f"{self.metric} {op} {value}"


class TrialConfig(_Strict):
    """Everything one training run needs."""

    workload: str = Field("gan", min_length=1, description="gan, cnn, package.module:make or path/to/file.py:make")
    workload_options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the factory")
    dataset: str | None = Field(None, description="passed to the workload factory as dataset= when set")
    budget: Budget = Field(default_factory=lambda: Budget(seconds=20), description="how long the run trains: "
                           "exactly one of seconds or samples")
    params: Params = Field(default_factory=Params, description="the knobs")
    measure: Measure = Field(default_factory=Measure, description="how throughput is measured")
    quality: Quality = Field(default_factory=Quality, description="how the trained model is scored")
    gpus: int = Field(1, ge=0, le=1024, description="GPUs for this trial; > 1 runs DDP through Ray Train")
    setup_timeout_s: float = Field(300.0, gt=0, le=86400, description="at most this long for each of the "
                                   "workload's factory and its datasets() (the budget covers only training)")
    env: dict[str, str] | None = Field(None, description="environment variables that change torch's speed "
                                       "(OMP_WAIT_POLICY, OMP_NUM_THREADS, ...; tuner.config.SPEED_ENV), set by "
                                       "`tuner train` before torch loads: `tuner export` writes those its trial "
                                       "ran under, so a re-run reads what the trial read")
    provenance: dict[str, Any] | None = Field(None, description="written by `tuner export`; ignored by training")
    target: Target | None = Field(None, description="train until this quality, evaluating every K samples, and "
                                  "report the time to it (an export of a study with a target carries it); none: "
                                  "train the whole budget")

    @field_validator("env", mode="before")
    @classmethod
    def _speed_env_only(cls, env: Any) -> Any:
        if not isinstance(env, dict):
            return env
        for key in env:
            if key not in SPEED_ENV:
                raise ValueError(f"{key} is not a variable tuner sets for a run; use one of {', '.join(SPEED_ENV)}")
        return {k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for k, v in env.items()}

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and "image_size" in data:
            raise ValueError("moved to workload_options.image_size (an option of the built-in gan and cnn)")
        return data


def format_validation_error(err: ValidationError, source: str, model: type[BaseModel] | None = None,
                            hidden: tuple[str, ...] = ()) -> str:
    """One line naming the source and the first offending key; for an unknown key in `model`, the key it was
    probably meant to be or the keys it may be (`hidden`: top-level fields the caller fills, not the user)."""
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "(top level)"
    if key == "(top level)" and "moved to workload_options.image_size" in first["msg"]:
        key = "image_size"
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown key" + unknown_key_hint(model, tuple(first["loc"]), hidden)
    extra = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{source}: {key}: {msg}{extra}"


def parse_config(data: Any, source: str = "config") -> TrialConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with keys workload, dataset, budget, params")
    try:
        return TrialConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, source, TrialConfig)) from None


def load_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping from a readable UTF-8 file; anything else is a ConfigError naming the file."""
    from tuner.files import load_yaml_mapping

    return load_yaml_mapping(Path(path), "config file")


def load_config(path: Path) -> TrialConfig:
    """Read and validate a config file; errors name the file and the key. A relative workload path in it is read
    from the file's folder, so `tuner train --config exports/best.yaml` finds it from any folder."""
    cfg = parse_config(load_yaml(path), str(path))
    workload = workload_beside(cfg.workload, Path(path).parent, str(path))
    return cfg if workload == cfg.workload else cfg.model_copy(update={"workload": workload})


def workload_beside(workload: str, folder: Path, source: str) -> str:
    """`workload` as named in the file `source`: a relative `path/to/file.py:make` read from `folder` (the file's
    own), else from the current folder (exports and the examples name paths from where the study ran), and made
    absolute; a built-in name, `package.module:make` and an absolute path stay as written (a path on the command
    line stays relative to the current folder: it goes through tuner.builtin.resolve_workload)."""
    import os

    where, sep, attr = workload.strip().rpartition(":")
    if not sep or not where or not (where.endswith(".py") or "/" in where or os.sep in where):
        return workload
    given = Path(where).expanduser()
    if given.is_absolute():
        return workload
    path = next((p.resolve() for p in (folder / given, given) if p.is_file()), None)
    if path is None:
        raise ConfigError(f"{source}: workload {workload!r}: no such file in the file's folder ({folder.resolve()}) "
                          f"or the current one ({Path.cwd()}): fix the path or make it absolute")
    return f"{path}:{attr}"


def dump_config(cfg: TrialConfig) -> dict[str, Any]:
    """Plain-YAML-able dict of a config (paths as strings, unset optionals dropped)."""
    return cfg.model_dump(mode="json", exclude_none=True)
