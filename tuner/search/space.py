"""Search spaces: YAML files that say which knobs a study searches, over which values, and what it scores.

A space file (see `search_spaces/*.yaml`):

    description: one line for `tuner spaces`
    defaults: {workload: gan, dataset: digits, budget: {seconds: 20}, trials: 12}
    objectives:
      gan: [{metric: throughput, direction: max}, {metric: fid, direction: min}]
      cnn: [{metric: throughput, direction: max}, {metric: loss, direction: min}]
    params:                       # names are `tuner.config.Params` fields, sampled in this order
      batch_size: {type: int, low: 16, high: 256, log: true}
      beta1: {type: float, low: 0.0, high: 0.9}
      precision: {type: categorical, choices: [fp32, bf16, fp16]}
      pin_memory: {type: bool, when: {gpus: ">0"}}
      prefetch_factor: {type: int, low: 1, high: 8, when: {num_workers: ">0"}}
      lr: {value: 0.0002}         # fixed (a bare scalar works too: `lr: 0.0002`)
    trial: {quality: {fid_samples: 500}}   # optional: fixed TrialConfig settings (measure, quality, image_size)

`when` makes a param conditional: it is sampled only when every condition holds, and otherwise keeps its
`Params` default (so prefetch_factor is never proposed with num_workers 0, which the config refuses). A
condition names an earlier param or `gpus` (the trial's GPU count) and is a value (equality), a list (one of),
or a string with an operator: ">0", ">=2", "<4", "<=8", "==fp16", "!=fp32".
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from tuner.config import Budget, Params, TrialConfig, Workload, format_validation_error, load_yaml, parse_config
from tuner.errors import ConfigError

SPACE_SUFFIXES = (".yaml", ".yml")
# Condition names that are not params: facts about the trial known before sampling.
CONTEXT_NAMES = ("gpus",)
# Metrics a trial reports per workload that can be objectives (numbers; see tuner.train.result.TrialResult).
_COMMON_METRICS = ("throughput", "throughput_spread", "data_wait", "peak_mem_mb", "train_seconds", "quality_seconds")
OBJECTIVE_METRICS: dict[str, tuple[str, ...]] = {
    "gan": (*_COMMON_METRICS, "fid"),
    "cnn": (*_COMMON_METRICS, "loss", "accuracy"),
}
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt,
}


def spaces_dir() -> Path:
    """The bundled spaces: `search_spaces/` at the repository root (or `tuner/spaces/` in an installed wheel)."""
    repo = Path(__file__).resolve().parents[2] / "search_spaces"
    packaged = Path(__file__).resolve().parents[1] / "spaces"
    return repo if repo.is_dir() or not packaged.is_dir() else packaged


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Condition(_Strict):
    """One `when` entry, parsed: `name op operand` (op "in" for a list)."""

    name: str
    op: str
    operand: Any

    def holds(self, value: Any) -> bool:
        if self.op == "in":
            return value in self.operand
        try:
            return bool(_OPS[self.op](value, self.operand))
        except TypeError:  # e.g. "fp16" > 0: a condition that cannot hold for this value
            return False

    def describe(self) -> str:
        return f"{self.name} in {self.operand}" if self.op == "in" else f"{self.name} {self.op} {self.operand}"

    @classmethod
    def parse(cls, name: str, raw: Any) -> "Condition":
        if isinstance(raw, list):
            return cls(name=name, op="in", operand=raw)
        if isinstance(raw, str):
            text = raw.strip()
            for op in _OPS:  # two-character operators come first in _OPS
                if text.startswith(op):
                    operand = yaml.safe_load(text[len(op):].strip()) if text[len(op):].strip() else None
                    if operand is None:
                        raise ValueError(f"condition {raw!r} has no value after {op!r}")
                    return cls(name=name, op=op, operand=operand)
        return cls(name=name, op="==", operand=raw)


class ParamSpec(_Strict):
    """One param's domain. Exactly one of: a `type` with its fields, or a fixed `value`."""

    type: Literal["int", "float", "categorical", "bool"] | None = None
    low: int | float | None = None
    high: int | float | None = None
    log: bool = False
    step: int | float | None = None
    choices: list[Any] | None = None
    value: Any = None
    when: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _type_or_value(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("type" in data) == ("value" in data):
            raise ValueError("give either a type (int, float, categorical, bool) or a fixed value, not both or neither")
        return data

    @field_validator("choices")
    @classmethod
    def _scalar_choices(cls, v: list[Any] | None) -> list[Any] | None:
        if v is not None:
            if not v:
                raise ValueError("choices must not be empty")
            for c in v:
                if c is not None and not isinstance(c, (bool, int, float, str)):
                    raise ValueError(f"choice {c!r} is not a number, string, bool or null")
            if len({repr(c) for c in v}) != len(v):
                raise ValueError("choices must not repeat")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "ParamSpec":
        fixed = self.type is None
        given = {k for k in ("low", "high", "step", "choices") if getattr(self, k) is not None}
        if self.log:
            given.add("log")
        allowed = {"int": {"low", "high", "log", "step"}, "float": {"low", "high", "log", "step"},
                   "categorical": {"choices"}, "bool": set()}.get(self.type or "", set())
        extra = sorted(given - allowed)
        if extra:
            what = "a fixed value" if fixed else f"type {self.type}"
            raise ValueError(f"{', '.join(extra)} {'does' if len(extra) == 1 else 'do'} not apply to {what}")
        if self.type in ("int", "float"):
            if self.low is None or self.high is None:
                raise ValueError(f"type {self.type} needs low and high")
            if self.low > self.high:
                raise ValueError(f"low ({self.low:g}) is greater than high ({self.high:g})")
            if self.type == "int":
                for k in ("low", "high", "step"):
                    v = getattr(self, k)
                    if v is not None and v != int(v):
                        raise ValueError(f"{k} must be a whole number for type int (got {v:g})")
            if self.log and self.low <= 0:
                raise ValueError(f"log scale needs low > 0 (got {self.low:g})")
            if self.step is not None:
                if self.step <= 0:
                    raise ValueError(f"step must be > 0 (got {self.step:g})")
                if self.log:
                    raise ValueError("step and log cannot be combined")
        if self.type == "categorical" and self.choices is None:
            raise ValueError("type categorical needs choices")
        return self

    @property
    def fixed(self) -> bool:
        return self.type is None

    def conditions(self) -> list[Condition]:
        return [Condition.parse(k, v) for k, v in (self.when or {}).items()]

    def endpoints(self) -> list[Any]:
        """Values that must all be valid for the param (the range ends, every choice, or the fixed value)."""
        if self.fixed:
            return [self.value]
        if self.type == "int":
            return [int(self.low), int(self.high)]  # type: ignore[arg-type]
        if self.type == "float":
            return [self.low, self.high]
        if self.type == "bool":
            return [False, True]
        return list(self.choices or [])

    def suggest(self, trial: Any, name: str) -> Any:
        """Draw this param from an Optuna trial (or the captor Ray wraps around it)."""
        if self.type == "int":
            step = int(self.step) if self.step is not None else 1
            return trial.suggest_int(name, int(self.low), int(self.high), step=step, log=self.log)  # type: ignore[arg-type]
        if self.type == "float":
            return trial.suggest_float(name, self.low, self.high, step=self.step, log=self.log)
        if self.type == "bool":
            return trial.suggest_categorical(name, [False, True])
        if self.type == "categorical":
            return trial.suggest_categorical(name, list(self.choices or []))
        return self.value

    def contains(self, value: Any) -> bool:
        """Whether `value` is a point of this domain (what an enqueued baseline may use)."""
        if self.type == "bool":
            return isinstance(value, bool)
        if self.type == "categorical":
            return any(value == c and type(value) is type(c) for c in self.choices or [])
        if self.type in ("int", "float"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return False
            if not self.low <= value <= self.high:  # type: ignore[operator]
                return False
            if self.type == "int" and value != int(value):
                return False
            return self.step is None or abs(((value - self.low) / self.step) - round((value - self.low) / self.step)) < 1e-9
        return False

    def describe(self) -> str:
        if self.fixed:
            text = f"= {self.value!r}"
        elif self.type in ("int", "float"):
            text = f"{self.type} [{self.low:g}, {self.high:g}]" + (" log" if self.log else "")
            text += f" step {self.step:g}" if self.step is not None else ""
        elif self.type == "bool":
            text = "bool"
        else:
            text = "one of " + ", ".join(str(c) for c in self.choices or [])
        if self.when:
            text += "  when " + " and ".join(c.describe() for c in self.conditions())
        return text


class Objective(_Strict):
    metric: str
    direction: Literal["maximize", "minimize"]

    @field_validator("direction", mode="before")
    @classmethod
    def _long_form(cls, v: Any) -> Any:
        long = {"max": "maximize", "min": "minimize", "maximize": "maximize", "minimize": "minimize"}
        if not isinstance(v, str) or v not in long:
            raise ValueError(f"direction must be max or min (got {v!r})")
        return long[v]

    @property
    def mode(self) -> str:
        """Ray Tune's spelling."""
        return "max" if self.direction == "maximize" else "min"


class SpaceDefaults(_Strict):
    workload: Workload = "gan"
    dataset: str = "digits"
    budget: Budget = Field(default_factory=lambda: Budget(seconds=20))
    trials: int = Field(12, gt=0, le=100000)
    # Trial 0 of a new study runs tuner's default knobs (Params defaults, where the space allows them): the
    # reference every other trial is compared against, and a known-sane point for the sampler to start from.
    baseline: bool = True


class Space(_Strict):
    """A parsed, validated search space. `name` is the file's stem; `source` the file it came from."""

    name: str = ""
    source: str = ""
    description: str = ""
    defaults: SpaceDefaults = Field(default_factory=SpaceDefaults)
    objectives: dict[Workload, list[Objective]]
    params: dict[str, ParamSpec]
    trial: dict[str, Any] = Field(default_factory=dict)

    @field_validator("params", mode="before")
    @classmethod
    def _bare_scalars_are_fixed(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: (p if isinstance(p, dict) else {"value": p}) for k, p in v.items()}
        return v

    @field_validator("objectives", mode="before")
    @classmethod
    def _list_means_every_workload(cls, v: Any) -> Any:
        return {"gan": v, "cnn": v} if isinstance(v, list) else v

    @property
    def searched(self) -> list[str]:
        """Names of the params the sampler draws, in space order."""
        return [k for k, p in self.params.items() if not p.fixed]

    def objectives_for(self, workload: str) -> list[Objective]:
        objs = self.objectives.get(workload)  # type: ignore[call-overload]
        if not objs:
            have = ", ".join(self.objectives) or "none"
            raise ConfigError(f"{self.source}: objectives: no objectives for workload {workload} (has: {have}); "
                              f"add objectives.{workload} or use --workload {next(iter(self.objectives), 'gan')}")
        return objs

    def definition(self) -> dict[str, Any]:
        """The space as plain data (what study.json stores and `--resume` compares)."""
        d = self.model_dump(mode="json", exclude={"name", "source"})
        for k, p in self.params.items():
            d["params"][k] = {kk: vv for kk, vv in d["params"][k].items() if vv is not None and vv is not False}
            if p.fixed:
                d["params"][k]["value"] = p.model_dump(mode="json")["value"]
        return d

    def sample(self, trial: Any, context: dict[str, Any]) -> dict[str, Any]:
        """Define-by-run: draw the searched params in order, skipping those whose conditions fail."""
        drawn: dict[str, Any] = {}
        for name, spec in self.params.items():
            if spec.fixed:
                continue
            known = {**context, **self.fixed_values(), **drawn}
            if all(c.holds(known.get(c.name, getattr(Params(), c.name, None))) for c in spec.conditions()):
                drawn[name] = spec.suggest(trial, name)
        return drawn

    def baseline_point(self, context: dict[str, Any]) -> dict[str, Any]:
        """tuner's default knobs as a point of this space: each searched param at its Params default when the
        domain contains it (others are left to the sampler), conditionals as sample() would treat them."""
        defaults = Params()
        point: dict[str, Any] = {}
        for name, spec in self.params.items():
            if spec.fixed:
                continue
            known = {**context, **self.fixed_values(), **point}
            if not all(c.holds(known.get(c.name, getattr(defaults, c.name, None))) for c in spec.conditions()):
                continue
            value = getattr(defaults, name)
            if spec.contains(value):
                point[name] = value
        return point

    def fixed_values(self) -> dict[str, Any]:
        return {k: p.value for k, p in self.params.items() if p.fixed}

    def trial_config(self, params: dict[str, Any], base: dict[str, Any], source: str = "trial") -> TrialConfig:
        """A full, validated TrialConfig: `base` (workload, dataset, budget, gpus...) + the space's `trial:` section
        + fixed params + the sampled `params`. Raises ConfigError naming `source` and the key."""
        data = {**self.trial, **base}
        merged_params = {**dict(self.trial.get("params") or {}), **dict(base.get("params") or {}),
                         **self.fixed_values(), **params}
        data["params"] = merged_params
        return parse_config(data, source)


def list_spaces() -> list[Space]:
    """Every bundled space, by name. A file that does not parse is listed by load_space's error instead."""
    d = spaces_dir()
    files = sorted(p for p in d.glob("*") if p.suffix in SPACE_SUFFIXES) if d.is_dir() else []
    return [load_space_file(p) for p in files]


def space_names() -> list[str]:
    d = spaces_dir()
    return sorted(p.stem for p in d.glob("*") if p.suffix in SPACE_SUFFIXES) if d.is_dir() else []


def resolve_space_path(name_or_path: str) -> Path:
    """A bundled space's name (`amp_loader`) or a path to a user's YAML file."""
    text = str(name_or_path).strip()
    as_path = Path(text).expanduser()
    looks_like_path = "/" in text or as_path.suffix in SPACE_SUFFIXES or as_path.is_file()
    if looks_like_path:
        if not as_path.is_file():
            raise ConfigError(f"space file {as_path} does not exist; give a bundled space name "
                              f"({', '.join(space_names()) or 'none found'}) or a path to a YAML file")
        return as_path.resolve()
    for suffix in SPACE_SUFFIXES:
        candidate = spaces_dir() / f"{text}{suffix}"
        if candidate.is_file():
            return candidate
    raise ConfigError(f"unknown space {text!r}; known: {', '.join(space_names()) or 'none'} "
                      f"(see `tuner spaces`), or give a path to a YAML file")


def load_space(name_or_path: str) -> Space:
    return load_space_file(resolve_space_path(name_or_path))


def load_space_file(path: Path) -> Space:
    """Read and validate a space file; every error names the file and the key."""
    path = Path(path)
    data = load_yaml(path)
    return parse_space(data, source=str(path), name=path.stem)


def parse_space(data: Any, *, source: str, name: str) -> Space:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with keys description, defaults, objectives, params")
    if "params" not in data or "objectives" not in data:
        missing = "params" if "params" not in data else "objectives"
        raise ConfigError(f"{source}: {missing}: missing (a space needs params and objectives)")
    try:
        space = Space.model_validate({**data, "name": name, "source": source})
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, source)) from None
    _check_against_config(space, source)
    return space


def _check_against_config(space: Space, source: str) -> None:
    """Names must be Params fields, every domain value a valid value of that field, conditions well-formed,
    objectives known metrics, and the `trial:` section plus defaults a valid TrialConfig."""
    fields = Params.model_fields
    if not space.searched:
        raise ConfigError(f"{source}: params: nothing to search (every param is fixed); give at least one a type")
    seen: list[str] = []
    for name, spec in space.params.items():
        key = f"{source}: params.{name}"
        if name not in fields:
            raise ConfigError(f"{key}: unknown param; use one of {', '.join(fields)}")
        field = fields[name]
        adapter = TypeAdapter(Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation)
        for value in spec.endpoints():
            try:
                adapter.validate_python(value)
            except ValidationError as err:
                msg = err.errors()[0]["msg"]
                raise ConfigError(f"{key}: value {value!r} is not valid for {name}: {msg}") from None
        if spec.type == "float" and fields[name].annotation is int:
            raise ConfigError(f"{key}: {name} is a whole number; use type int")
        try:
            conditions = spec.conditions()
        except (ValueError, ValidationError) as err:
            raise ConfigError(f"{key}.when: {err}") from None
        for c in conditions:
            if c.name not in seen and c.name not in CONTEXT_NAMES:
                where = "a later param" if c.name in space.params else "not a param"
                raise ConfigError(f"{key}.when.{c.name}: {where}; a condition may name an earlier param or "
                                  f"{', '.join(CONTEXT_NAMES)}")
        seen.append(name)
    for workload, objectives in space.objectives.items():
        metrics = [o.metric for o in objectives]
        if not objectives:
            raise ConfigError(f"{source}: objectives.{workload}: empty; give at least one {{metric, direction}}")
        for i, o in enumerate(objectives):
            if o.metric not in OBJECTIVE_METRICS[workload]:
                raise ConfigError(f"{source}: objectives.{workload}.{i}.metric: unknown metric {o.metric!r} for "
                                  f"{workload}; use one of {', '.join(OBJECTIVE_METRICS[workload])}")
        if len(set(metrics)) != len(metrics):
            raise ConfigError(f"{source}: objectives.{workload}: a metric is listed twice")
    for banned in ("workload", "dataset", "budget", "gpus"):
        if banned in space.trial:
            raise ConfigError(f"{source}: trial.{banned}: set it under defaults (or on the command line), not trial")
    try:
        TrialConfig.model_validate({**space.trial, "params": dict(space.trial.get("params") or {})})
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, f"{source}: trial")) from None


def check_finite(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)
