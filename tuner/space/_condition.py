"""Conditions: a param's `when:` entries (`num_workers: ">0"`, `precision: [bf16, fp16]`), parsed and checked
against the params drawn so far and the facts about the trial known before sampling (CONTEXT_NAMES); and the
strict base every schema type of a space shares (an unknown key is an error, not ignored)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

# Condition names that are not params: facts about the trial known before sampling (the sampling context).
CONTEXT_NAMES = ("gpus", "cpus", "tf32_available")
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
