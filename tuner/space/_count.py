"""How many distinct configs a resolved space holds: whether a study can run a new one each trial at all.

The space is define-by-run (conditions, the batch split), so it is walked, not multiplied out: every branch of
every draw, in order, the way Optuna would draw them (an odometer over the choices each draw offers). A float
without a step, or more than `cap` configs, is "many" (None): a sampler rarely draws the same point twice there.
"""

from __future__ import annotations

from typing import Any

from tuner.space._space import Space

CAP = 4096  # configs walked at most: beyond it the space counts as many


class _Many(Exception):
    """A draw with too many values to walk (a float range, a wide int range)."""


class _Walker:
    """A stand-in for an Optuna trial that answers each draw from a path of choice indices, and notes how many
    choices each draw offered (what the odometer turns over)."""

    def __init__(self, path: list[int], cap: int) -> None:
        self.path, self.cap, self.sizes, self.params = path, cap, [], {}

    def _pick(self, name: str, values: list[Any]) -> Any:
        if len(values) > self.cap:
            raise _Many(name)
        i = self.path[len(self.sizes)] if len(self.sizes) < len(self.path) else 0
        self.sizes.append(len(values))
        self.params[name] = values[i]
        return values[i]

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        return self._pick(name, list(choices))

    def suggest_int(self, name: str, low: int, high: int, step: int = 1, log: bool = False) -> int:
        if (high - low) // max(1, step) + 1 > self.cap:
            raise _Many(name)
        return self._pick(name, list(range(low, high + 1, max(1, step))))

    def suggest_float(self, name: str, low: float, high: float, step: float | None = None,
                      log: bool = False) -> float:
        if step is None:
            raise _Many(name)
        n = int((high - low) / step + 1e-9) + 1
        if n > self.cap:
            raise _Many(name)
        return self._pick(name, [low + i * step for i in range(n)])


def config_count(space: Space, context: dict[str, Any], skip: tuple[str, ...] | list[str] = (),
                 cap: int = CAP) -> int | None:
    """The number of distinct configs `space.sample(trial, context, skip)` can draw, or None for many (a float
    range, more than `cap`)."""
    seen: set[tuple] = set()
    path: list[int] = []
    for _ in range(cap * 4):  # leaves walked; distinct configs may be fewer (a split rounds to the same one)
        walker = _Walker(path, cap)
        try:
            space.sample(walker, context, skip)
        except _Many:
            return None
        seen.add(tuple(sorted((k, repr(v)) for k, v in walker.params.items())))
        if len(seen) > cap:
            return None
        taken = [path[i] if i < len(path) else 0 for i in range(len(walker.sizes))]
        turn = next((i for i in reversed(range(len(taken))) if taken[i] + 1 < walker.sizes[i]), None)
        if turn is None:
            return len(seen)
        path = taken[:turn] + [taken[turn] + 1]
    return None
