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
condition names an earlier param or a fact about the trial (CONTEXT_NAMES: `gpus`, the trial's GPU count; `cpus`,
the CPUs of one training process; `tf32_available`, whether its GPU has TF32 tensor cores) and is a value
(equality), a list (one of), or a string with an operator: ">0", ">=2", "<4", "<=8", "==fp16", "!=fp32".

Resources in bounds: `low` and `high` may be expressions over the trial's resources (`high: cpus`,
`high: cpus - 1`, `low: 2 * gpus`, `high: "min(cpus, 16)"`; see tuner.space._expr). They are resolved once per study,
when its resources are known (`Space.resolve`): an int bound is rounded down, and a value beyond the param's own
limit in `tuner.config.Params` is clamped to it (num_workers at most 128). A domain that comes out empty for the
study's trials (low > high) is refused before any trial runs.

Native choices: `precision: {type: categorical, choices: [fp32, bf16, fp16], native: true}` keeps only the
choices the trial's device runs natively (the context's `precisions`, from `tuner.device`): on a CPU fp32, and
bf16 where the CPU has native bf16 (AVX512-BF16 / AMX-BF16, Arm's BF16), so the study spends no trial on emulated
half precision; without `native` every listed choice is searched. A
categorical left with one choice is a fixed value (Optuna samples nothing for it).

Why one module of ~500 lines: the schema (ParamSpec, Condition, Space), its resolution for a study's resources
and its sampling are one contract that each part validates against the others; finding a space file on disk
and parsing it live apart, in tuner.space._load, and expressions in tuner.space._expr.
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Callable
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tuner.config import Budget, Params, TrialConfig, parse_config
from tuner.errors import ConfigError
from tuner.knobs import KNOBS, heavy_knobs
from tuner.space._expr import describe_resources, is_expression, parse_expr
from tuner.study import Objective, QUALITY

SPACE_SUFFIXES = (".yaml", ".yml")
# Condition names that are not params: facts about the trial known before sampling (the sampling context).
CONTEXT_NAMES = ("gpus", "cpus", "tf32_available")
# Params whose categorical choices `native: true` filters, and the context key that lists what the device runs.
NATIVE_PARAMS = {"precision": "precisions"}
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
    low: int | float | str | None = None  # a number, or an expression over the trial's resources (tuner.space._expr)
    high: int | float | str | None = None
    log: bool = False
    step: int | float | None = None
    choices: list[Any] | None = None
    native: bool = False  # categorical: keep only the choices the trial's device runs natively
    value: Any = None
    when: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _type_or_value(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("type" in data) == ("value" in data):
            raise ValueError("give either a type (int, float, categorical, bool) or a fixed value, not both or neither")
        return data

    @field_validator("low", "high", mode="before")
    @classmethod
    def _not_a_bool(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("must be a number or an expression such as cpus - 1, not a bool")
        return v

    @field_validator("low", "high")
    @classmethod
    def _number_or_expression(cls, v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError("must be finite")
        if is_expression(v):
            expr = parse_expr(v)  # ValueError names what is wrong
            return expr.text
        return v

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
        given |= {k for k in ("log", "native") if getattr(self, k)}
        allowed = {"int": {"low", "high", "log", "step"}, "float": {"low", "high", "log", "step"},
                   "categorical": {"choices", "native"}, "bool": set()}.get(self.type or "", set())
        extra = sorted(given - allowed)
        if extra:
            what = "a fixed value" if fixed else f"type {self.type}"
            raise ValueError(f"{', '.join(extra)} {'does' if len(extra) == 1 else 'do'} not apply to {what}")
        if self.type in ("int", "float"):
            if self.low is None or self.high is None:
                raise ValueError(f"type {self.type} needs low and high")
            if not self.has_expressions and self.low > self.high:  # type: ignore[operator]
                raise ValueError(f"low ({self.low:g}) is greater than high ({self.high:g})")
            if self.type == "int":
                for k in ("low", "high", "step"):
                    v = getattr(self, k)
                    if v is not None and not is_expression(v) and v != int(v):
                        raise ValueError(f"{k} must be a whole number for type int (got {v:g})")
            if self.log and not is_expression(self.low) and self.low <= 0:  # type: ignore[operator]
                raise ValueError(f"log scale needs low > 0 (got {self.low:g})")
            if self.step is not None and self.has_expressions:
                raise ValueError("step cannot be combined with an expression bound (the grid would move with the "
                                 "resources); drop step or give numbers")
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

    @property
    def has_expressions(self) -> bool:
        return is_expression(self.low) or is_expression(self.high)

    @property
    def unresolved(self) -> bool:
        """Whether this domain depends on the trial (resource expressions or native choices)."""
        return self.has_expressions or self.native

    @property
    def single(self) -> bool:
        """A domain of one value (e.g. a native categorical left with one choice): Optuna samples nothing."""
        if self.type == "categorical":
            return len(self.choices or []) == 1
        if self.type in ("int", "float") and not self.has_expressions:
            return self.low == self.high
        return False

    def resolve(self, name: str, context: dict[str, Any], *, source: str = "space", strict: bool = True
                ) -> "ParamSpec":
        """This domain for one study's trials: expression bounds evaluated for the context's `cpus` and `gpus`
        (int bounds rounded down, clamped to the param's own limits), native choices filtered by the context's
        precisions. `strict`: an empty domain is a ConfigError naming the param; otherwise it shrinks to low (a
        valid point for the pre-flight check, which does not know the trial's resources yet)."""
        if not self.unresolved:
            return self
        data = self.model_dump(exclude_none=True, exclude_defaults=True)
        data["type"] = self.type
        key = f"{source}: params.{name}"
        if self.has_expressions:
            resources = {k: context[k] for k in ("cpus", "gpus") if k in context}
            low, high = (bound_value(self, which, name, resources, key) for which in ("low", "high"))
            problem = None
            if low > high:
                problem = (f"low ({_bound_text(self.low, low)}) is greater than high ({_bound_text(self.high, high)}) "
                           f"for trials with {describe_resources(resources)}")
            elif self.log and low <= 0:
                problem = (f"log scale needs low > 0, but low is {_bound_text(self.low, low)} for trials with "
                           f"{describe_resources(resources)}")
            if problem is not None:
                if strict:
                    raise ConfigError(f"{key}: {problem}; change the bounds, or give each trial other resources "
                                      f"(--cpus-per-trial / --gpus-per-trial)")
                high = low = max(low, 1) if self.log else low
            data["low"], data["high"] = low, high
        if self.native:
            data.pop("native", None)
            names = context.get(NATIVE_PARAMS.get(name, ""))
            if names is None:
                raise ValueError(f"{key}: native choices need the device's precisions in the sampling context")
            kept = [c for c in self.choices or [] if c in names]
            if not kept:
                if strict:
                    where = context.get("device") or "this device"
                    raise ConfigError(f"{key}: none of {', '.join(map(str, self.choices or []))} runs natively on "
                                      f"{where} (it runs {', '.join(names)}); add one of those, or drop native: "
                                      f"true to search them anyway")
                kept = list(self.choices or [])[:1]
            data["choices"] = kept
        return ParamSpec.model_validate(data)

    def conditions(self) -> list[Condition]:
        return [Condition.parse(k, v) for k, v in (self.when or {}).items()]

    def endpoints(self) -> list[Any]:
        """Values that must all be valid for the param (the range ends, every choice, or the fixed value).
        Expression bounds are left out: they are checked over plausible resources (spaces.check_expressions)."""
        if self.fixed:
            return [self.value]
        if self.type in ("int", "float"):
            ends = [v for v in (self.low, self.high) if not is_expression(v)]
            return [int(v) for v in ends] if self.type == "int" else ends  # type: ignore[arg-type]
        if self.type == "bool":
            return [False, True]
        return list(self.choices or [])

    def suggest(self, trial: Any, name: str) -> Any:
        """Draw this param from an Optuna trial (or the captor Ray wraps around it)."""
        if self.unresolved:
            raise ValueError(f"params.{name} depends on the trial's resources or device; resolve the space first")
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
            text = f"{self.type} [{_fmt_bound(self.low)}, {_fmt_bound(self.high)}]" + (" log" if self.log else "")
            text += f" step {self.step:g}" if self.step is not None else ""
        elif self.type == "bool":
            text = "bool"
        else:
            text = "one of " + ", ".join(str(c) for c in self.choices or [])
            if self.native:
                text += " (those the device runs natively)"
        if self.when:
            text += "  when " + " and ".join(c.describe() for c in self.conditions())
        return text


def field_limits(name: str, kind: str | None) -> tuple[float | None, float | None]:
    """The inclusive limits of a Params field that a resolved bound is clamped to: ge/le as they are, gt/lt moved
    one step inward for an int param; None where a float has an open limit (nothing to clamp to exactly)."""
    field = Params.model_fields.get(name)
    lo = hi = None
    for m in field.metadata if field is not None else []:
        if getattr(m, "ge", None) is not None:
            lo = m.ge
        if getattr(m, "le", None) is not None:
            hi = m.le
        if getattr(m, "gt", None) is not None and kind == "int":
            lo = m.gt + 1
        if getattr(m, "lt", None) is not None and kind == "int":
            hi = m.lt - 1
    return lo, hi


def evaluate_bound(spec: ParamSpec, which: str, name: str, resources: dict[str, Any]) -> tuple[Any, Any]:
    """(raw value, clamped value) of `spec.low` or `spec.high` for these resources: the expression's value, an int
    param's rounded down, then clamped to the param's own limits. Raises ZeroDivisionError / KeyError, and
    OverflowError when a float param's value is beyond a float (callers name the param)."""
    raw = getattr(spec, which)
    if not is_expression(raw):
        return raw, raw
    value = parse_expr(raw).evaluate(resources)
    number: int | float = math.floor(value) if spec.type == "int" else float(value)  # float(): OverflowError
    lo, hi = field_limits(name, spec.type)
    clamped = number
    if lo is not None and clamped < lo:
        clamped = type(number)(lo)
    if hi is not None and clamped > hi:
        clamped = type(number)(hi)
    return number, clamped


def bound_value(spec: ParamSpec, which: str, name: str, resources: dict[str, Any], key: str) -> Any:
    try:
        return evaluate_bound(spec, which, name, resources)[1]
    except KeyError as err:
        raise ValueError(f"{key}.{which}: {getattr(spec, which)} needs {err.args[0]} in the sampling context") from None
    except ZeroDivisionError:
        raise ConfigError(f"{key}.{which}: {getattr(spec, which)} divides by zero for trials with "
                          f"{describe_resources(resources)}") from None
    except OverflowError:
        raise ConfigError(overflow_message(key, which, spec, resources)) from None


def overflow_message(key: str, which: str, spec: ParamSpec, resources: dict[str, Any]) -> str:
    return (f"{key}.{which}: {getattr(spec, which)} is too large for a number (over {sys.float_info.max:.1e}) for "
            f"trials with {describe_resources(resources)}; give a smaller bound")


def _fmt_bound(v: Any) -> str:
    return str(v) if is_expression(v) else f"{v:g}"


def _bound_text(raw: Any, value: Any) -> str:
    return f"{raw} = {value:g}" if is_expression(raw) else f"{value:g}"


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
    # Time to a target quality (issue 34): a value of the study's quality metric, in its direction (--target too).
    target: float | Literal["baseline"] | None = None  # baseline: set by its training; finite (tuner.target)
    # An explicit effective batch to search (issue 40; tuner.space._batch): without it the workload's own is kept.
    effective_batch: ParamSpec | None = None

    @field_validator("effective_batch", mode="before")
    @classmethod
    def _bare_effective_batch_is_fixed(cls, v: Any) -> Any:
        return v if v is None or isinstance(v, dict) else {"value": v}

    @field_validator("params", mode="before")
    @classmethod
    def _bare_scalars_are_fixed(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: (p if isinstance(p, dict) else {"value": p}) for k, p in v.items()}
        return v

    @field_validator("objectives", mode="before")
    @classmethod
    def _list_means_every_workload(cls, v: Any) -> Any:
        v = {DEFAULT_OBJECTIVES: v} if isinstance(v, list) else v
        if isinstance(v, dict):  # a bare metric name (`objectives: [time_to_target]`): Objective.of's direction
            v = {k: [bare_objective(o) for o in objs] if isinstance(objs, list) else objs for k, objs in v.items()}
        return v

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
        d = self.model_dump(mode="json", exclude={"name", "source"} | ({"target"} if self.target is None else set())
                            | ({"effective_batch"} if self.effective_batch is None else set()))
        if self.effective_batch is not None:
            d["effective_batch"] = self.effective_batch.model_dump(mode="json", exclude_none=True,
                                                                   exclude_defaults=True)
        for k, p in self.params.items():
            d["params"][k] = {kk: vv for kk, vv in d["params"][k].items() if vv is not None and vv is not False}
            if p.fixed:
                d["params"][k]["value"] = p.model_dump(mode="json")["value"]
        return d

    @property
    def unresolved(self) -> bool:
        """Whether some domain depends on the trial's resources or device (see `resolve`)."""
        return any(p.unresolved for p in self.params.values())

    def resolve(self, context: dict[str, Any], *, strict: bool = True) -> "Space":
        """This space for one study's trials: every domain resolved for the context (`cpus`, `gpus`, `precisions`,
        `device`; see ParamSpec.resolve). `strict`: a domain left empty, or a space left with nothing to search
        (every searched param down to one value), is a ConfigError naming the file and the param."""
        if not self.unresolved:
            return self
        params = {name: spec.resolve(name, context, source=self.source or "space", strict=strict)
                  for name, spec in self.params.items()}
        resolved = self.model_copy(update={"params": params})
        if strict and all(params[n].single for n in resolved.searched):
            collapsed = ", ".join(f"{n} = {params[n].choices[0] if params[n].choices else params[n].low}"
                                  for n in resolved.searched if self.params[n].unresolved)
            where = context.get("device") or "this machine"
            raise ConfigError(f"{self.source}: params: nothing left to search on {where} ({collapsed}); search "
                              f"another param, or drop native: true to search the listed choices anyway")
        return resolved

    def reachable(self, context: dict[str, Any]) -> list[str]:
        """The searched params a study with this context can sample at all: those whose conditions on the context
        hold (a CPU study never samples pin_memory or tf32, so its reports need no column for them)."""
        return [n for n in self.searched
                if all(c.holds(context.get(c.name)) for c in self.params[n].conditions() if c.name in CONTEXT_NAMES)]

    def sample(self, trial: Any, context: dict[str, Any], skip: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
        """Define-by-run: draw the searched params in order, skipping those whose conditions fail and those in
        `skip` (decided elsewhere: the loader knobs a study probed). A space that depends on the trial is resolved
        for `context` first (a study passes it resolved once)."""
        if self.unresolved:
            return self.resolve(context).sample(trial, context, skip)
        from tuner.space._batch import sample_split, splits

        split = splits(self)
        drawn: dict[str, Any] = {}
        for name, spec in self.params.items():
            if split and name in heavy_knobs():  # one effective batch, split (_batch.py), unless decided elsewhere
                if "batch_size" not in drawn and "batch_size" not in skip:
                    drawn.update(sample_split(self, trial))
                continue
            if spec.fixed or name in skip:
                continue
            known = {**context, **self.fixed_values(), **drawn}
            if all(c.holds(known.get(c.name, getattr(Params(), c.name, None))) for c in spec.conditions()):
                drawn[name] = spec.suggest(trial, name)
        return drawn

    def baseline_point(self, context: dict[str, Any], own: dict[str, Any] | None = None) -> dict[str, Any]:
        """tuner's default knobs as a point of this space: each searched param at its Params default when the
        domain contains it (others are left to the sampler), conditionals as sample() would treat them. A param
        whose default is the workload's own (lr, beta1, beta2; lr_scale 1) takes it from `own`."""
        own = {"lr_scale": 1.0, **(own or {})}
        if self.unresolved:
            return self.resolve(context).baseline_point(context, own)
        defaults = Params()
        point: dict[str, Any] = {}
        for name, spec in self.params.items():
            if spec.fixed:
                continue
            known = {**context, **self.fixed_values(), **point}
            if not all(c.holds(known.get(c.name, getattr(defaults, c.name, None))) for c in spec.conditions()):
                continue
            value = getattr(defaults, name)
            if value is None:
                value = own.get(name)
            if value is None and name in KNOBS and KNOBS[name].default_from:  # torch's threads: the trial's CPUs
                value = context.get(str(KNOBS[name].default_from))
            if spec.contains(value):
                point[name] = value
        from tuner.space._batch import baseline_split, splits

        if splits(self):  # the baseline's own split of its own effective batch (_batch.py), or the sampler's draw
            point = {k: v for k, v in point.items() if k not in heavy_knobs()}
            point.update(baseline_split(self, defaults.batch_size))
        return point

    def fixed_values(self) -> dict[str, Any]:
        return {k: p.value for k, p in self.params.items() if p.fixed}

    def trial_config(self, params: dict[str, Any], base: dict[str, Any], source: str = "trial") -> TrialConfig:
        """A full, validated TrialConfig: `base` (workload, dataset, budget, gpus...) + the space's `trial:` section
        + fixed params + the sampled `params`. Raises ConfigError naming `source` and the key."""
        data = {**self.trial, **base}
        merged_params = {**dict(self.trial.get("params") or {}), **dict(base.get("params") or {}),
                         **self.fixed_values(), **{k: v for k, v in params.items() if not k.startswith("_")}}
        data["params"] = merged_params
        return parse_config(data, source)


def bare_objective(raw: Any) -> Any:
    """A space's objective given as a bare metric name, as a mapping (throughput and accuracy maximized, others
    minimized; `quality` the workload's own, in its direction); anything else as it is."""
    if not isinstance(raw, str):
        return raw
    return {"metric": raw} if raw == QUALITY else Objective.of(raw).model_dump()


def check_finite(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)
