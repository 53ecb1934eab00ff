"""A param's domain (ParamSpec): its validation, its resolution for one study's resources and device (resource
expressions in bounds evaluated, rounded down and clamped to the param's own limits; native choices filtered), and
how Optuna draws it. The space file that holds params is tuner.space._space; conditions tuner.space._condition."""

from __future__ import annotations

import math
import sys
from typing import Any, Literal

from pydantic import field_validator, model_validator

from tuner.config import Params
from tuner.errors import ConfigError
from tuner.space._condition import Condition, _Strict
from tuner.space._expr import describe_resources, is_expression, parse_expr

# Params whose categorical choices `native: true` filters, and the context key that lists what the device runs.
NATIVE_PARAMS = {"precision": "precisions"}


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
