"""Search-quality measures for two objectives: normalisation, 2-D hypervolume, trials to reach a target.

Kept free of heavy imports so they are unit-tested on fixed points in milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence

Point = tuple[float, float]


def hypervolume_2d(points: Sequence[Point], ref: Point) -> float:
    """Area dominated by `points` and bounded below by `ref`, both objectives MAXIMIZED.

    Sweep from the largest x down: each point adds the strip between its y and the best y seen so far.
    Points that do not strictly dominate `ref` on both axes add nothing.
    """
    rx, ry = ref
    pts = sorted(((x, y) for x, y in points if x > rx and y > ry), key=lambda p: (-p[0], -p[1]))
    area, best_y = 0.0, ry
    for x, y in pts:
        if y > best_y:
            area += (x - rx) * (y - best_y)
            best_y = y
    return area


def pareto_front_2d(points: Sequence[Point]) -> list[Point]:
    """Non-dominated points (both objectives maximized), sorted by x descending."""
    front: list[Point] = []
    best_y = float("-inf")
    for x, y in sorted(set(points), key=lambda p: (-p[0], -p[1])):
        if y > best_y:
            front.append((x, y))
            best_y = y
    return front


class Normalizer:
    """Maps (throughput, quality) to 'goodness' in [0, 1] over a reference set (the whole grid): 1 is the grid's
    best value of that objective, 0 its worst. `minimize_second` flips a loss/FID so that larger is better."""

    def __init__(self, points: Sequence[Point], minimize_second: bool = True) -> None:
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        if not xs:
            raise ValueError("no points to normalise over")
        self.x_lo, self.x_hi = min(xs), max(xs)
        self.y_lo, self.y_hi = min(ys), max(ys)
        self.minimize_second = minimize_second

    def __call__(self, p: Point) -> Point:
        x, y = p
        gx = (x - self.x_lo) / (self.x_hi - self.x_lo) if self.x_hi > self.x_lo else 1.0
        if self.y_hi > self.y_lo:
            gy = (self.y_hi - y) / (self.y_hi - self.y_lo) if self.minimize_second else \
                (y - self.y_lo) / (self.y_hi - self.y_lo)
        else:
            gy = 1.0
        return gx, gy


# Reference point in goodness space: 10% of the range beyond the grid's worst value on each axis (the usual
# "nadir plus a margin"), so the grid's worst points still add a little area.
REF: Point = (-0.1, -0.1)


def hv_fraction(found: Sequence[Point], norm: Normalizer, full: Sequence[Point]) -> float:
    """Hypervolume of the points found, as a fraction of the hypervolume of every point of the grid."""
    total = hypervolume_2d([norm(p) for p in full], REF)
    return hypervolume_2d([norm(p) for p in found], REF) / total if total > 0 else 0.0


def trials_to_reach(values: Sequence[float | None], target: float) -> int | None:
    """1-based index of the first value >= target; None when no value reaches it."""
    for i, v in enumerate(values, 1):
        if v is not None and v >= target:
            return i
    return None
