"""`tuner profile`: a few steps of one configuration under torch.profiler, and the verdict a trial would get.

The config's workload, loader and models are built as a trial builds them (tuner.train.trial.build_training), then:

1. warm-up: the config's `measure.warmup_steps` steps (at least one), untimed;
2. timed: `steps` steps timed as a trial times a window (device synced at both ends, data loading inside):
   the end-to-end throughput and data-wait share the verdict compares with the ceilings. They run without the
   profiler and without the phase syncs of step 3, both of which slow a step down;
3. recorded: `steps` steps under torch.profiler (CPU activity, and CUDA on a GPU), each part of the step in a
   `tuner.data` / `tuner.forward` / `tuner.backward` / `tuner.optimizer` range and timed with the device synced at
   its ends (tuner.measure.profile.PhaseClock): the Chrome trace, the operator table and each part's share of the
   step's wall time;
4. the compute and input ceilings (tuner.train.ceilings, as a trial measures them, `measure.ceiling_seconds` each)
   and tuner.study.readings.assess: the same sentence `tuner train` and `tuner report` print.

One process, one device: a config with `gpus` > 1 is profiled on one GPU, without DDP.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tuner.config import TrialConfig
from tuner.device import Device, is_oom, resolve_device
from tuner.errors import ConfigError, RunFailed, TunerError, UserError, error_line
from tuner.knobs import check_device
from tuner.measure.profile import PhaseClock, activities, top_operators
from tuner.measure.timing import WaitMeter, WindowTimer, summarize
from tuner.study import Headroom, assess
from tuner.train.ceilings import ceilings
from tuner.train._build import Training, build_training, trial_scope
from tuner.workload import user_error_line


@dataclass
class ProfileResult:
    trace: Path
    steps: int
    device: str
    step_ms: float  # mean wall time of a recorded step (profiler and phase syncs included)
    phases: dict[str, float]  # data, forward, backward, optimizer, other: shares of the recorded steps' time
    top_ops: list[dict[str, Any]]
    throughput: float | None  # samples/s over the timed steps, end to end
    data_wait: float | None
    compute_ceiling: float | None
    input_ceiling: float | None
    headroom: Headroom
    flops_per_sample: float | None = None
    peak_flops: float | None = None
    of_peak: float | None = None  # achieved FLOP/s over the device's matmul peak, as `tuner train` reports it
    of_peak_skipped: str | None = None  # why of_peak is missing

    def to_json(self) -> dict[str, Any]:
        return {"trace": str(self.trace), "steps": self.steps, "device": self.device, "step_ms": self.step_ms,
                "phases": self.phases, "top_ops": self.top_ops, "throughput": self.throughput,
                "data_wait": self.data_wait, "compute_ceiling": self.compute_ceiling,
                "input_ceiling": self.input_ceiling, "flops_per_sample": self.flops_per_sample,
                "peak_flops": self.peak_flops, "of_peak": self.of_peak, "of_peak_skipped": self.of_peak_skipped,
                **self.headroom.metrics()}


def trace_file(path: Path) -> Path:
    """`path`, with its folder made: a UserError when no trace can be written there (checked before any work)."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"cannot write the trace to {path}: it is a folder; name a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot write the trace to {path}: {err.strerror or err}") from None
    return path


def profile_config(cfg: TrialConfig, *, cache_dir: Path, trace: Path, steps: int, top: int,
                   device: Device | None = None) -> ProfileResult:
    """Profile `cfg` (see the module's docstring) and write the Chrome trace to `trace`. A step that fails (out of
    memory, the workload's own error) is a RunFailed with one line; bad input tuner refuses raises a UserError."""
    if steps < 1 or top < 1:
        raise ConfigError("profile at least one step and show at least one operator")
    trace = trace_file(trace)
    p = cfg.params
    device = device or resolve_device(p.device)
    device.check_precision(p.precision)
    check_device(p, device)  # CUDA-only knobs on a CPU: one line (tuner.knobs)
    device.check_compile(p.compile)
    with trial_scope(cfg, device, cache_dir, None):
        try:
            training = build_training(cfg, device)
            return _profile(cfg, device, training, trace, steps, top, cache_dir)
        except TunerError:
            raise
        except Exception as err:
            raise RunFailed(f"the profiled run failed: {error_line(err) if is_oom(err) else user_error_line(err)}") \
                from err
        finally:
            device.free_memory()


def _profile(cfg: TrialConfig, device: Device, training: Training, trace: Path, steps: int,
             top: int, cache_dir: Path) -> ProfileResult:
    step = training.step
    batches = training.batches()
    try:
        meter = WaitMeter(batches)
        if cfg.params.compile != "off":  # compiling's first steps stay out of what is timed and recorded
            from tuner.train.compile import CompileWatch, run_compile_warmup
            from tuner.train.distributed import Agreement

            run_compile_warmup(step, meter, CompileWatch(cfg.params.compile, training.models, cfg.params), device,
                               time.perf_counter, Agreement())
        for _ in range(max(cfg.measure.warmup_steps, 1)):
            step(meter)
        timer = WindowTimer(device, meter)
        timer.start()
        for _ in range(steps):
            timer.add(step(meter))
        timer.close()
        timed = summarize(timer.windows)

        clock = PhaseClock(device)
        step.mark = clock
        with torch.profiler.profile(activities=activities(device), record_shapes=False, with_stack=False) as prof:
            device.synchronize()
            t0 = time.perf_counter()
            for _ in range(steps):
                step(meter)
            device.synchronize()
            recorded_s = time.perf_counter() - t0
        one = next(batches)  # what the FLOP count feeds its step
    finally:
        batches.close()  # the loader's workers stop before the input ceiling starts its own
    prof.export_chrome_trace(str(trace))
    ops = top_operators(prof, top, on_device=device.torch_device.type == "cuda")
    del prof

    del step  # the training's optimizer state goes: the compute ceiling builds its own step
    training.step = None  # type: ignore[assignment]
    seconds = cfg.measure.ceiling_seconds
    found = ceilings(cfg, device, training.workload, training.train_set, training.models, seconds) if seconds > 0 \
        else {}
    peak = _of_peak(cfg, device, training, one, timed.throughput, cache_dir) if seconds > 0 else \
        {"of_peak_skipped": "measure.ceiling_seconds is 0"}
    verdict = assess(timed.throughput, found.get("compute"), found.get("input"), params=cfg.params.model_dump(),
                     data_wait=timed.data_wait, device=device.describe(), of_peak=peak.get("of_peak"))
    return ProfileResult(trace=trace, steps=steps, device=device.describe(), step_ms=1e3 * recorded_s / steps,
                         phases=clock.shares(recorded_s), top_ops=ops, throughput=timed.throughput,
                         data_wait=timed.data_wait, compute_ceiling=found.get("compute"),
                         input_ceiling=found.get("input"), headroom=verdict, **peak)


def _of_peak(cfg: TrialConfig, device: Device, training: Training, batch: Any, throughput: float | None,
             cache_dir: Path) -> dict[str, Any]:
    """FLOPs per sample (one step of the unwrapped models, as a trial counts them), the device's matmul peak (the
    machine's cache in `cache_dir`) and of_peak; a count or a peak that fails leaves of_peak out and says why."""
    from tuner.measure.flops import PEAK_SECONDS, PeakBusy, count_step_flops, of_peak, peak_flops, peak_knobs
    from tuner.train.distributed import unwrap
    from tuner.train.step import PhaseStep

    if throughput is None:
        return {"of_peak_skipped": "no throughput measured"}
    try:
        plain = {k: unwrap(m) for k, m in training.models.items()}  # counted in eager mode, like a trial's
        flops, samples = count_step_flops(PhaseStep(training.workload, plain, cfg.params, device), batch)
    except Exception as err:  # noqa: BLE001 - a model the counter cannot follow still profiled
        return {"of_peak_skipped": f"FLOPs not counted: {error_line(err)}"}
    per_sample = flops / samples if samples else 0.0
    if not per_sample:
        return {"flops_per_sample": 0.0, "of_peak_skipped": "no matmul, convolution or attention FLOPs counted in "
                                                             "the step (elementwise work is not counted)"}
    try:
        peak, _ = peak_flops(device, peak_knobs(cfg.params, device, torch.get_num_threads()), cache_dir,
                             min(PEAK_SECONDS, cfg.measure.ceiling_seconds), at_least=throughput * per_sample)
    except PeakBusy as err:
        return {"flops_per_sample": per_sample, "of_peak_skipped": f"the matmul peak was {err}"}
    except Exception as err:  # noqa: BLE001 - evidence, never the profile's failure
        return {"flops_per_sample": per_sample, "of_peak_skipped": f"peak not measured: {error_line(err)}"}
    return {"flops_per_sample": per_sample, "peak_flops": peak or None,
            "of_peak": of_peak(throughput, per_sample, peak, 1)}
