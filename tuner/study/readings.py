"""The readings a trial stores beside its figures, each a function of those figures alone: its headroom against
its two ceilings (`assess`: the bound and the sentence that says what to change) and its compile break-even
(`break_even_seconds`). The trial that writes them (tuner.train) and the analysis that re-derives them for a record
read back (tuner.analysis.headroom, .compile_cost) call the same functions, so a producer needs nothing of the
judge above it and both say the same sentence.

- compute ceiling: the same workload, batch, accumulation and precision fed one batch already on the device (no
  loader); what the model could take if input were free.
- input ceiling: the trial's DataLoader alone with the same knobs, host-to-device copy included, no model; what
  the input pipeline can deliver.

End to end a trial cannot beat the lower of the two. Which one is lower says what to change (loader knobs or
batch/precision); how close the trial gets to it says whether anything between them (serial loading, per-step
overhead) is lost. The thresholds are named here and tested, so the terminal, the JSON, the HTML report, the
export and `tuner profile` all say the same sentence. Without ceilings the data-wait share is the only evidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from tuner.study.metrics import finite

Bound = Literal["input-bound", "compute-bound", "overhead-bound", "mixed"]

# The loader is the limit when it delivers less than this share of what the model could take.
INPUT_SHORT_OF = 0.9
# Compute-bound when the trial reaches this share of its compute ceiling.
COMPUTE_BOUND_AT = 0.8
# Below this share of the device's measured matmul peak, the step's kernels are too small to fill the device.
LOW_OF_PEAK = 0.3
# Data-wait thresholds, for records without ceilings (evidence measured inside the training loop).
INPUT_BOUND_ABOVE = 0.3
COMPUTE_BOUND_BELOW = 0.1

BOUND_EXPLANATION = (
    "compute ceiling: the model fed one batch already on the device (no loader); input ceiling: the DataLoader "
    "alone with the trial's knobs, host-to-device copy included (no model). A trial is input-bound when the "
    f"loader delivers under {INPUT_SHORT_OF:.0%} of what the model could take, compute-bound when it reaches "
    f"{COMPUTE_BOUND_AT:.0%} of its compute ceiling, and overhead-bound when neither ceiling explains the gap "
    "(loading serialized with compute, per-step overhead). Without ceilings the data-wait share decides: above "
    f"{INPUT_BOUND_ABOVE:.0%} input-bound, below {COMPUTE_BOUND_BELOW:.0%} compute-bound, mixed in between."
)


def bound_label(data_wait: Any) -> str:
    """input-bound / compute-bound / mixed from a data-wait share alone; "" when unknown."""
    wait = finite(data_wait)
    if wait is None:
        return ""
    if wait > INPUT_BOUND_ABOVE:
        return "input-bound"
    if wait < COMPUTE_BOUND_BELOW:
        return "compute-bound"
    return "mixed"


def rate(value: float) -> str:
    """5100 -> "5.1k", 74000 -> "74k", 830 -> "830"."""
    if value >= 1e5:
        return f"{value / 1e3:.0f}k"
    if value >= 1e3:
        return f"{value / 1e3:.1f}k".replace(".0k", "k")
    return f"{value:.0f}"


@dataclass(frozen=True)
class Headroom:
    bound: str  # a Bound, or "" when nothing is known
    of_compute: float | None  # throughput / compute ceiling
    of_input: float | None  # throughput / input ceiling
    sentence: str

    def metrics(self) -> dict[str, Any]:
        """As the record's metrics (tuner.study.metrics lists these keys)."""
        return {"of_compute_ceiling": self.of_compute, "of_input_ceiling": self.of_input,
                "bound": self.bound or None, "headroom": self.sentence or None}


def peak_clause(of_peak: Any, params: dict[str, Any], device: str) -> str:
    """ "6% of this CPU's measured fp32 matmul peak", or "" when of_peak is unknown."""
    share = finite(of_peak)
    if share is None:
        return ""
    precision = params.get("precision") or "fp32"
    if precision == "fp32" and params.get("tf32") and device.startswith("cuda"):
        precision = "TF32"
    clause = f"{share:.0%} of this {'GPU' if device.startswith('cuda') else 'CPU'}'s measured {precision} matmul peak"
    if share > 1:  # a ResNet-18 on 2 CPUs read 102%: said, not hidden, with what can cause it
        clause += (" (over 100%: the FLOP counter counts each convolution's direct work, which a faster algorithm "
                   "such as Winograd does in fewer operations, or the peak was read while the machine was busy)")
    return clause


def assess(throughput: Any, compute: Any, input_: Any, *, params: dict[str, Any] | None = None,
           data_wait: Any = None, device: str = "", of_peak: Any = None) -> Headroom:
    """The verdict for one trial. `params` are its knobs (num_workers, precision, pin_memory, batch_size),
    `device` its device description ("cuda ..." or "cpu ..."), `of_peak` its share of the device's measured
    matmul peak (tuner.measure.flops): how far compute itself is from what the hardware does."""
    thr, c, i = finite(throughput), finite(compute), finite(input_)
    peak = peak_clause(of_peak, params or {}, device)
    p = params or {}
    workers = int(p.get("num_workers") or 0)
    wait = finite(data_wait)
    evidence = f" (waited for data {wait:.0%} of the time)" if wait is not None else ""
    of_c = thr / c if thr is not None and c else None
    of_i = thr / i if thr is not None and i else None
    if thr is None or c is None or i is None:
        label = bound_label(data_wait)
        # name the ceiling not measured: the other one may be shown right above this sentence
        missing = [name for name, v in (("compute", c), ("input", i)) if v is None]
        unmeasured = f"no {missing[0]} ceiling measured" if len(missing) == 1 else "no ceilings measured"
        sentence = f"{label} by the data-wait share alone{evidence}; {unmeasured}" if label else ""
        if sentence and peak:
            sentence += f"; it runs at {peak}"
        return Headroom(label, of_c, of_i, sentence)

    if i < INPUT_SHORT_OF * c:
        with_workers = f"with {workers} worker{'s' if workers != 1 else ''}" if workers else "in the training process"
        tips = ["loader workers (num_workers > 0)" if workers == 0 else "more workers or a larger prefetch_factor"]
        if device.startswith("cuda") and not p.get("pin_memory"):
            tips.append("pin_memory")
        tips.append("decoded samples cached in memory")
        at_peak = f"; it runs at {peak}" if peak else ""
        return Headroom("input-bound", of_c, of_i,
                        f"input-bound at {of_c:.0%} of the compute ceiling: the loader delivers {rate(i)} samples/s "
                        f"{with_workers}, the model could take {rate(c)}; try {_join(tips)}{evidence}{at_peak}")

    if of_c is not None and of_c >= COMPUTE_BOUND_AT:
        tips = ["larger batches"]
        if p.get("precision", "fp32") == "fp32":
            tips.append("bf16 or fp16 autocast" if device.startswith("cuda") else "a lower precision where the "
                        "device runs it natively")
        fill = ""
        if peak:
            small = finite(of_peak) is not None and finite(of_peak) < LOW_OF_PEAK  # type: ignore[operator]
            fill = (f", which is {peak}" + (": the model is too small to fill the device" if small else
                                            ": its matmuls keep the device busy"))
            if small and p.get("compile") in (None, False, "off", "none"):
                tips.append("compile")
        return Headroom("compute-bound", of_c, of_i,
                        f"compute-bound at {of_c:.0%} of the compute ceiling ({rate(c)} samples/s){fill}"
                        f"{';' if fill else ','} the loader could deliver {rate(i)}: loader knobs will not help; {_join(tips)} might{evidence}")

    on_gpu = device.startswith("cuda")
    if workers == 0 and on_gpu:
        why = "loading runs in the training process, one batch after another with compute: loader workers would overlap it"
    elif workers == 0:
        turns = 1.0 / (1.0 / c + 1.0 / i)
        why = (f"loading and compute take turns on the same cores ({rate(turns)} samples/s expected so): loader "
               f"workers would load on those cores too, so cheaper loading helps (decoded samples cached in memory, "
               f"lighter transforms)")
    elif not on_gpu:
        why = (f"the loader's {workers} worker process{'es share' if workers != 1 else ' shares'} the CPU cores with "
               f"the model's compute: try fewer workers, or none when loading is cheap")
    else:
        why = ("per-step overhead between loading and compute (host syncs, small batches, worker start-up at epoch "
               "ends: persistent_workers)")
    at_peak = f"; it runs at {peak}" if peak else ""
    return Headroom("overhead-bound", of_c, of_i,
                    f"overhead-bound at {of_c:.0%} of the compute ceiling ({rate(c)} samples/s) although the loader "
                    f"delivers {rate(i)}: {why}{evidence}{at_peak}")


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def break_even_seconds(compile_s: float, compiled: float, eager: float) -> float | None:
    """Wall seconds of training after which the compiled run is ahead of eager (compile included); None: never
    (compiled no faster than eager), or a speed that is missing. Training for t seconds, eager reaches `eager * t`
    samples, compiled `compiled * (t - compile_s)`: they meet at t = compile_s / (1 - eager / compiled)."""
    if not (compiled > 0 and eager > 0) or not math.isfinite(compile_s) or compiled <= eager:
        return None
    return max(compile_s, 0.0) / (1.0 - eager / compiled)
