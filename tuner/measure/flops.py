"""How far a trial is from the hardware's peak: FLOPs per training sample over the device's measured matmul peak.

- FLOPs per sample: `torch.utils.flop_counter.FlopCounterMode` around one real training step (every phase's
  forward and backward, and its optimizer step, whose elementwise updates count nothing), divided by the samples
  that step consumed. It counts only the operators PyTorch's counter knows: matrix products (mm, addmm, bmm,
  baddbmm, _scaled_mm), convolutions (forward and backward) and the fused attention kernels (flash, efficient,
  cuDNN, flex). Elementwise work (activations, normalization, the loss, bias adds, optimizer updates) and
  attention that runs as a CPU kernel the counter does not list (`_scaled_dot_product_flash_attention_for_cpu`)
  count nothing: the figure is the work a device's matmul units could do, a lower bound of the step's work. A
  convolution's backward is counted here, not by PyTorch's formula: that one (torch 2.14) multiplies a grouped
  convolution's backward by its groups (a depthwise 3x3's by its channels), which read an EfficientNet-B0 trial at
  191% of the peak; here each gradient it computes costs what the forward did (`_conv_backward_flops`).
- small batches first: the step is counted at the micro-batch sizes SMALL_BATCHES (a few samples each, not the
  trial's). A counted operator's FLOPs are a product of its shapes, each the batch size B (or a multiple) or free
  of it, so a step's FLOPs per sample are c/B + a + b*B + d*B**2 + ... with counts, never negative, as
  coefficients (c: work that does not grow with the batch, a product of weights; b: a B x B similarity of a
  contrastive loss). That sum is convex in B, and constant on no interval unless c = b = d = ... = 0; a convex
  function with one value at three sizes is constant between them. So the same FLOPs per sample, exactly
  (integers), at 2, 4 and 8, from batches that differ in their batch size alone (not a collate's padding to the
  longest sample), is the count at every batch size. Else (or the small batches fail, or the trial's batch is no
  larger) the step is counted at the trial's own batch size.
- peak: FLOP/s of large square matmuls in the trial's precision (fp32, TF32 where the trial enables it, bf16,
  fp16), the best of short readings within a second or two. A measured peak, not a datasheet's, so it holds on any
  CPU or GPU and counts what this machine delivers with these threads.

Both are one-time costs: the count is cached by what it depends on (workload, options, dataset and, unless it held
at the small batches, batch size), in the study folder's flops.json, as is a model's being batch-dependent (it is
not checked again at its next batch size); the peak once per machine, device and precision, in the reports' cache
folder (`<reports-dir>/.cache/peak.json`, beside the dataset and FID caches) and in the process.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any

from tuner.device import Device, dtype_of
from tuner.measure.ceiling import CeilingCache, cache_key
from tuner.measure.timing import Clock

PEAK_SECONDS = 1.5  # the peak benchmark's wall time at most (a trial's measure.ceiling_seconds when shorter)
PEAK_READINGS = 3  # readings per matrix size: the best of them is the peak
CPU_SIZES = (256, 512, 1024)  # grown while the next size fits the time left
CUDA_SIZES = (1024, 2048, 4096, 8192)
PEAK_FILE = "peak.json"
FLOPS_FILE = "flops.json"  # in the study folder, beside ceilings.json
# Micro-batch sizes of the batch-independence check (module docstring): three, so that a term that shrinks per sample
# and one that grows cannot cancel out (they can at two sizes); 2 and more, as BatchNorm refuses one sample.
SMALL_BATCHES = (2, 4, 8)
# The counting rules' version, in every count's cache key: a study folder's flops.json counted by older rules (2:
# a grouped convolution's backward no longer counted `groups` times over) is counted again, not read.
COUNT_RULES = 2

_MEMO: dict[str, float] = {}  # this process's peaks by key: a reused process (Ray actor, tests) measures once


def count_step_flops(step: Callable[[Any], int], batch: Any) -> tuple[int, int]:
    """(FLOPs, samples) of one call of `step` (a tuner.train.step.PhaseStep) fed `batch` for every micro-batch.

    Counted on one CPU thread: the count is read from the operators' shapes, not from their speed, and a small step
    on every thread of a CPU that other work shares waits at each operator's barrier for a thread the neighbour holds
    (libgomp's default wait policy spins): an EfficientNet-B0 trial's count of three 2-8 sample steps took 40 s
    beside one busy process, against 1.2 s on one thread (lab notes, thirty-fourth session)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with FlopCounterMode(display=False,
                             custom_mapping={torch.ops.aten.convolution_backward: _conv_backward_flops}) as counter:
            samples = step(repeat(batch))
    finally:
        torch.set_num_threads(threads)
    return int(counter.get_total_flops()), int(samples)


def _conv_backward_flops(grad_out_shape: Sequence[int], x_shape: Sequence[int], w_shape: Sequence[int], _bias: Any,
                         _stride: Any, _padding: Any, _dilation: Any, transposed: bool, _output_padding: Any,
                         _groups: int, output_mask: Sequence[bool], out_shape: Any = None, **_: Any) -> int:
    """A convolution's backward: the forward's count for each gradient it computes (input's, weight's).

    The gradient of the input is a (transposed) convolution of the output's gradient with the same weight, and the
    weight's a convolution of the input with the output's gradient: each pairs the same elements as the forward did,
    once. The weight's shape already holds the groups (its channels in per group), so the forward's count is right
    for any groups; PyTorch's backward formula computes each gradient's count from shapes that drop them. For
    groups=1 this is PyTorch's own count."""
    from torch.utils.flop_counter import conv_flop_count

    forward = conv_flop_count(list(x_shape), list(w_shape), list(grad_out_shape), transposed=bool(transposed))
    return forward * (bool(output_mask[0]) + bool(output_mask[1]))


def flops_key(cfg: Any, *, any_batch: bool = False) -> str:
    """The cache key of TrialConfig `cfg`'s FLOP count: its workload, options and dataset, and the knobs the role
    table says the count depends on (tuner.knobs, counts `flops`: the batch size, the batch's shape). `any_batch`:
    the key of a count that holds at every batch size (found at SMALL_BATCHES), its batch size `any`."""
    from tuner.knobs import count_knobs

    knobs = {name: getattr(cfg.params, name) for name in count_knobs("flops")}
    if any_batch:
        knobs["batch_size"] = "any"
    return cache_key("flops", {"workload": cfg.workload, "options": cfg.workload_options, "dataset": cfg.dataset,
                               "rules": COUNT_RULES, **knobs})


def same_per_sample(counts: Sequence[tuple[int, int]]) -> bool:
    """Whether (FLOPs, samples) `counts` all have the same non-zero FLOPs per sample, exactly: integer cross
    products, no rounding to hide a term that grows with the batch."""
    flops0, samples0 = counts[0]
    return flops0 > 0 and samples0 > 0 and all(f * samples0 == flops0 * s for f, s in counts[1:])


def _parts(batch: Any) -> list[Any]:
    """`batch` flattened: each tensor's torch.Size, each container's kind and size or keys, each other leaf's repr."""
    import torch

    if isinstance(batch, torch.Tensor):
        return [batch.shape]
    if isinstance(batch, Mapping):
        return [("map", tuple(batch))] + [x for v in batch.values() for x in _parts(v)]
    if isinstance(batch, (list, tuple)):
        return [(type(batch).__name__, len(batch))] + [x for v in batch for x in _parts(v)]
    return [("leaf", repr(batch))]


def differ_in_batch_only(batches: Sequence[Any], sizes: Sequence[int]) -> bool:
    """Whether `batches` (micro-batches of `sizes` samples) are alike but for their batch size: the same containers
    and leaves, their tensors the same in every dimension but ones proportional to the sizes. A collate that pads to
    the batch's longest sample fails this: its small batches are shorter than the trial's."""
    import torch

    parts = [_parts(b) for b in batches]
    if len({len(p) for p in parts}) != 1:
        return False
    for items in zip(*parts):
        first = items[0]
        if not isinstance(first, torch.Size):
            if any(x != first for x in items):  # a container's kind and size or keys, a leaf's repr
                return False
        elif not all(isinstance(x, torch.Size) and len(x) == len(first) for x in items):
            return False
        elif any(len(set(dims)) > 1 and any(d * sizes[0] != dims[0] * n for d, n in zip(dims, sizes))
                 for dims in zip(*items)):
            return False
    return True


def precision_name(precision: str, tf32: bool) -> str:
    """What the peak was measured in: `tf32` for fp32 matmuls on TF32 tensor cores, else the precision."""
    return "tf32" if precision == "fp32" and tf32 else precision


def peak_knobs(params: Any, device: Device, threads: int) -> dict[str, Any]:
    """The knobs the role table says the peak depends on (tuner.knobs, counts `peak`), as a trial with `params`
    runs them: TF32 only where the device has it, the compute threads torch uses (`threads`)."""
    from tuner.knobs import count_knobs

    def ran(name: str) -> Any:
        if name == "tf32":
            return bool(params.tf32 and device.is_cuda)
        return threads if name == "threads" else getattr(params, name)

    return {name: ran(name) for name in count_knobs("peak")}


def peak_key(device: Device, knobs: dict[str, Any]) -> str:
    """One machine (its host name), device, and the peak's knobs (peak_knobs: precision, TF32, threads, the wait policy)."""
    from tuner.knobs import count_knobs

    return cache_key("peak", {"host": platform.node(), "device": device.describe(),
                              **{name: knobs[name] for name in count_knobs("peak")}})


def matmul_peak(device: Device, precision: str, seconds: float = PEAK_SECONDS,
                clock: Clock = time.perf_counter) -> float:
    """FLOP/s of n x n matmuls in `precision` (TF32 follows torch's current setting), the best reading within
    about `seconds`: sizes grow while the next one fits the time left at 4x the best rate so far (a CPU without
    bf16 hardware stops early rather than run for minutes), each size read PEAK_READINGS times, each reading a tenth of `seconds` or one
    product. The device is synced before each clock read."""
    import torch

    dtype = dtype_of(precision)
    dev = device.torch_device
    sizes = CUDA_SIZES if dev.type == "cuda" else CPU_SIZES
    deadline = clock() + seconds
    best = 0.0
    for k, n in enumerate(sizes):
        # this size would not fit even at 4x the best rate so far (small products read slow: thread start-up,
        # overhead per call; a CPU without bf16 hardware still stops before a product of seconds)
        if best > 0 and clock() + (3 + PEAK_READINGS) * 2 * n**3 / (4 * best) > deadline:
            break
        a = torch.randn(n, n, device=dev).to(dtype)
        b = torch.randn(n, n, device=dev).to(dtype)
        out = torch.mm(a, b)  # warm-up: allocation, kernel choice
        device.synchronize()
        one = 0.0  # seconds of one product at this size, from the last reading
        reps = 1
        # the first size reads twice more: the first readings of a process pay its thread pool's start-up
        for _ in range(PEAK_READINGS + (2 if k == 0 else 0)):
            if one > 0:  # a tenth of `seconds`, growing at most tenfold a reading (one fast reading is no rate)
                reps = max(1, min(10 * reps, int(seconds / 10 / one)))
            if one > 0 and clock() + reps * one > deadline:
                break
            t0 = clock()
            for _ in range(reps):
                torch.mm(a, b, out=out)
            device.synchronize()
            one = max(clock() - t0, 1e-9) / reps
            best = max(best, 2 * n**3 / one)
        del a, b, out
    return best


class PeakBusy(Exception):
    """The only peak known was read while other processes took a share of the CPUs it ran on: it reads low."""


def peak_flops(device: Device, knobs: dict[str, Any], cache_dir: Path, seconds: float = PEAK_SECONDS, *,
               at_least: float = 0.0, measure: Callable[..., float] | None = None,
               memo: dict[str, float] | None = None, meter: Callable[[], Any] | None = None) -> tuple[float, bool]:
    """(the device's matmul peak in FLOP/s for the peak's `knobs` (peak_knobs), whether it was measured now):
    from this process's memo, else from
    `<cache_dir>/peak.json`, else measured (under a lock, so trials of one machine starting together measure it
    once and not beside each other) and stored in both. A known peak below `at_least` (FLOP/s a trial achieved:
    the peak was read while something else ran) is measured once more and the higher reading kept.

    A CPU reading is watched (`meter`: a tuner.measure.load.OthersMeter over the threads it runs on; tests plant
    one): one taken while others took BUSY_SHARE or more of them reads low (a 4x low peak beside one busy process
    with a spinning wait policy) and, cached, would set every later of_peak of the machine against it. It is
    stored marked busy, as a lower bound that the next reading replaces (a later trial measures again), never
    memoized, and PeakBusy is raised while no quiet reading is known, so no of_peak is read from it."""
    from tuner.files import locked

    memo = _MEMO if memo is None else memo
    measure = measure or matmul_peak
    key = peak_key(device, knobs)
    precision = knobs["precision"]
    known = memo.get(key)
    again = f"{key} measured again"  # once per process: a trial faster than any reading is not re-read forever
    if known is not None and (known >= at_least or again in memo):
        return known, False
    if meter is None and not device.is_cuda:
        from tuner.measure.load import OthersMeter

        def meter() -> Any:
            return OthersMeter(int(knobs.get("threads") or 0) or None)
    cache = CeilingCache(Path(cache_dir) / PEAK_FILE)
    measured = False
    with locked(Path(cache_dir) / ".peak"):  # not cache_dir itself: CeilingCache.put locks that
        value = cache.get(key)
        busy = (cache.entry(key) or {}).get("busy")  # the stored value was read under load: a lower bound
        if value is None or value < at_least or busy:
            watch = meter() if meter is not None else None
            fresh = measure(device, precision, seconds)
            share = watch.read() if watch is not None else None
            # a reading shorter than a few of the CPU clock's 10 ms ticks says nothing of the load
            now_busy = share.describe() if share is not None and share.busy and share.seconds >= 0.2 else None
            measured = True
            if value is not None and not busy:
                memo[again] = fresh
            # a quiet reading replaces a busy one; otherwise the higher reading is kept (a low one read under load)
            if fresh > (value or 0.0) or (busy and not now_busy):
                value, busy = fresh, now_busy
                cache.put(key, value, {"kind": "peak", "device": device.describe(), "host": platform.node(),
                                       **knobs, "precision": precision_name(precision, bool(knobs.get("tf32"))),
                                       **({"busy": busy} if busy else {})})
    if busy:
        raise PeakBusy(f"read while {busy}: a peak read so reads low, kept as a lower bound until a quiet reading "
                       f"replaces it")
    memo[key] = value or 0.0
    return memo[key], measured


def of_peak(throughput: float | None, flops_per_sample: float | None, peak: float | None,
            world: int = 1) -> float | None:
    """Achieved FLOP/s (samples/s of all ranks x FLOPs per sample) over the peak of the `world` devices."""
    if not throughput or not flops_per_sample or not peak:
        return None
    return throughput * flops_per_sample / (peak * world)
