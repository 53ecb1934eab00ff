"""Bounds that depend on the trial's resources: `high: cpus`, `high: cpus - 1`, `low: 2 * gpus`, `high: cpus / 2`.

A bound is a number or an expression over the trial's resources, parsed once with `ast` and a whitelist (never
`eval`): integer and decimal literals, the names in RESOURCE_NAMES, `+ - * / //`, unary minus, parentheses, and
`min(a, b, ...)` / `max(a, b, ...)`. Arithmetic is exact (fractions); an int param's bound is rounded down at the
end (`cpus / 2` with 3 CPUs is 1).

The names: `cpus` is the CPUs one training process of the trial has (per rank under DDP), `gpus` the GPUs of the
trial (0 for a CPU trial).
"""

from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

RESOURCE_NAMES = ("cpus", "gpus")
# The resources a space is checked against when it is loaded (a study's own are known only when it starts).
PLAUSIBLE = {"cpus": range(1, 257), "gpus": range(0, 9)}
MAX_LENGTH = 200

_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//"}
_FUNCTIONS = {"min": min, "max": max}


@dataclass(frozen=True)
class Expr:
    """A parsed bound expression. `evaluate({"cpus": 16, "gpus": 1})` -> an exact Fraction."""

    text: str
    tree: ast.expr = field(compare=False, repr=False)
    names: tuple[str, ...] = ()

    def evaluate(self, values: dict[str, Any]) -> Fraction:
        """The value for these resources; ZeroDivisionError when a divisor is 0, KeyError for a missing name."""
        return _eval(self.tree, values)

    def __str__(self) -> str:
        return self.text


def is_expression(value: Any) -> bool:
    """A bound given as text (YAML reads `high: cpus` as a string); numbers are plain bounds."""
    return isinstance(value, str)


@functools.lru_cache(maxsize=256)
def parse_expr(text: str) -> Expr:
    """Parse and check an expression; ValueError says what is wrong in words a space author can act on."""
    src = text.strip()
    if not src:
        raise ValueError("empty expression; give a number or an expression such as cpus or cpus - 1")
    if len(src) > MAX_LENGTH:
        raise ValueError(f"expression longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(src, mode="eval").body
    except SyntaxError:
        raise ValueError(f"{src!r} is not an expression (use numbers, {', '.join(RESOURCE_NAMES)}, + - * / //, "
                         f"parentheses, min(), max())") from None
    names: list[str] = []
    _check(tree, src, names, depth=0)
    return Expr(src, tree, tuple(dict.fromkeys(names)))


def _check(node: ast.AST, src: str, names: list[str], depth: int) -> None:
    if depth > 32:
        raise ValueError(f"{src!r} is nested too deeply")
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ValueError(f"{src!r}: {node.value!r} is not a number")
        if not math.isfinite(node.value):
            raise ValueError(f"{src!r}: numbers must be finite")
        return
    if isinstance(node, ast.Name):
        if node.id not in RESOURCE_NAMES:
            raise ValueError(f"{src!r}: unknown name {node.id!r}; an expression may use "
                             f"{', '.join(RESOURCE_NAMES)} (the trial's resources)")
        names.append(node.id)
        return
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _check(node.left, src, names, depth + 1)
        _check(node.right, src, names, depth + 1)
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        _check(node.operand, src, names, depth + 1)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        if node.keywords or len(node.args) < 2:
            raise ValueError(f"{src!r}: {node.func.id}() takes two or more values, e.g. {node.func.id}(cpus, 8)")
        for arg in node.args:
            _check(arg, src, names, depth + 1)
        return
    what = {ast.Pow: "**", ast.Mod: "%"}.get(type(getattr(node, "op", None)), type(node).__name__)
    raise ValueError(f"{src!r}: {what} is not allowed (use numbers, {', '.join(RESOURCE_NAMES)}, + - * / //, "
                     f"parentheses, min(), max())")


def _eval(node: ast.AST, values: dict[str, Any]) -> Fraction:
    if isinstance(node, ast.Constant):
        return Fraction(str(node.value)) if isinstance(node.value, float) else Fraction(node.value)
    if isinstance(node, ast.Name):
        return Fraction(values[node.id])
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, values)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Call):
        return _FUNCTIONS[node.func.id](_eval(a, values) for a in node.args)  # type: ignore[union-attr]
    assert isinstance(node, ast.BinOp)
    left, right = _eval(node.left, values), _eval(node.right, values)
    op = type(node.op)
    if op is ast.Add:
        return left + right
    if op is ast.Sub:
        return left - right
    if op is ast.Mult:
        return left * right
    if op is ast.Div:
        return left / right
    return Fraction(left // right)


def plausible_resources(names: tuple[str, ...]) -> list[dict[str, int]]:
    """Every combination of plausible values of the names an expression uses (others at their first value)."""
    combos: list[dict[str, int]] = [{}]
    for name in RESOURCE_NAMES:
        values = PLAUSIBLE[name] if name in names else [PLAUSIBLE[name][0]]
        combos = [{**c, name: v} for c in combos for v in values]
    return combos


def describe_resources(values: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {values[k]}" for k in RESOURCE_NAMES if k in values)
