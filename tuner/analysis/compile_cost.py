"""When torch.compile pays for itself: its compile time against the speed it gains over eager.

Training for t seconds of wall time, eager reaches `eager * t` samples; compiled, `compiled * (t - compile_s)`.
They meet at t = compile_s / (1 - eager / compiled): past it the compiled run is ahead. A compiled run no faster
than eager never pays back. The eager speed comes from the study's eager trials at the same batch, accumulation
and precision (`eager_reference`), or in `tuner train` from the pre-flight's eager steps (rough: two steps, no
loader workers).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from tuner.knobs import heavy_knobs, numerics_knobs
from tuner.study import break_even_seconds  # the trial stores it too: one function, below both

# What eager must share to compare (tuner.knobs): the step's work and its rounding, all but compile itself
SAME_CONFIG = heavy_knobs() + tuple(n for n in numerics_knobs() if n != "compile")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def break_even_text(compile_s: float | None, compiled: float | None, eager: float | None,
                    source: str) -> str | None:
    """One sentence: "pays back its 41 s of compiling after 6 min of training at this speed (eager 1.2k
    samples/s, <source>)"; None without a compile time."""
    if compile_s is None or not isinstance(compile_s, (int, float)):
        return None
    if not compiled or not eager:
        return f"{_duration(compile_s)} of compiling; no eager speed at this batch and precision to compare"
    seconds = break_even_seconds(compile_s, compiled, eager)
    ratio = compiled / eager
    speed = f"{ratio:.2f}x eager's {eager:.3g} samples/s, {source}"
    if seconds is None:
        return f"never pays back its {_duration(compile_s)} of compiling: {speed}"
    return f"pays back its {_duration(compile_s)} of compiling after {_duration(seconds)} of training at this speed " \
           f"({speed})"


def eager_reference(record: Any, records: Iterable[Any]) -> tuple[float | None, int]:
    """The median throughput of the complete eager trials (compile off) with the record's batch, accumulation
    and precision, and how many there are."""
    mine = {k: record.params.get(k) for k in SAME_CONFIG}
    speeds = [r.throughput for r in records
              if r.complete and r.params.get("compile", "off") in ("off", False, None)
              and all(r.params.get(k) == v for k, v in mine.items()) and r.throughput]
    return (statistics.median(speeds) if speeds else None), len(speeds)


def study_payback(record: Any, records: Iterable[Any]) -> str | None:
    """A compiled trial's break-even sentence against the study's eager trials; None for an eager trial."""
    if record.value("compile_seconds") is None:
        return None
    eager, n = eager_reference(record, records)
    source = f"the median of the study's {n} eager trial{'s' if n != 1 else ''} at this batch and precision"
    line = break_even_text(record.value("compile_seconds"), record.throughput, eager, source)
    breaks, again = record.get("graph_breaks"), record.get("recompiles")
    return f"{line}; {breaks} graph breaks, {again} recompiles" if line else None
