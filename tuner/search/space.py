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
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tuner.config import Budget, Params, TrialConfig, parse_config
from tuner.errors import ConfigError
from tuner.study import Objective
from tuner.study.objective import QUALITY

SPACE_SUFFIXES = (".yaml", ".yml")
# Condition names that are not params: facts about the trial known before sampling.
CONTEXT_NAMES = ("gpus",)
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt,
}


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
                    try:
                        operand = yaml.safe_load(text[len(op):].strip()) if text[len(op):].strip() else None
                    except yaml.YAMLError:
                        raise ValueError(f"condition {raw!r}: {text[len(op):].strip()!r} is not a value") from None
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


DEFAULT_OBJECTIVES = "default"  # the key a plain list of objectives is stored under: every workload


class SpaceDefaults(_Strict):
    workload: str = "gan"
    workload_options: dict[str, Any] = Field(default_factory=dict)
    dataset: str | None = None  # applies with the default workload only (another workload brings its own data)
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
    objectives: dict[str, list[Objective]]
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
        return {DEFAULT_OBJECTIVES: v} if isinstance(v, list) else v

    @property
    def searched(self) -> list[str]:
        """Names of the params the sampler draws, in space order."""
        return [k for k, p in self.params.items() if not p.fixed]

    def objectives_for(self, workload: str, quality: Objective | None = None) -> list[Objective]:
        """The objectives for `workload` (its own entry, else the space's list for every workload), with
        `metric: quality` replaced by the workload's declared quality objective."""
        objs = self.objectives.get(workload) or self.objectives.get(DEFAULT_OBJECTIVES)
        if not objs:
            have = ", ".join(self.objectives) or "none"
            raise ConfigError(f"{self.source}: objectives: no objectives for workload {workload} (has: {have}); "
                              f"give a list of objectives for every workload, or add objectives.{workload}")
        out = []
        for o in objs:
            if o.metric == QUALITY:
                if quality is None:
                    raise ConfigError(f"{self.source}: objectives: 'quality' stands for the workload's quality "
                                      f"objective, but workload {workload} declares none (Workload.quality); name a "
                                      f"metric instead")
                o = quality
            out.append(o)
        if len({o.metric for o in out}) != len(out):
            raise ConfigError(f"{self.source}: objectives: {workload}'s quality objective is already listed; list it "
                              f"once")
        return out

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


def check_finite(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)
