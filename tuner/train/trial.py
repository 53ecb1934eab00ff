"""Train one configuration of one workload within its budget and measure it: the unit every search trial runs.

Failures are states, not exceptions: an out-of-memory anywhere in the trial (building the models, wrapping them in
DDP, a cuDNN/cuBLAS workspace, training, scoring) is `oom`; a non-finite loss or quality metric is `diverged`; an
exception raised by the workload's own code is `error`, with the user's frames kept. Bad input tuner itself
refuses (a device this machine lacks, a batch larger than the dataset) raises a UserError instead.

A trial's jobs live in this package's private modules behind this one's names: building the run (_build.py,
whose names this module re-exports), the rungs and target during training (_rungs.py), and what a complete trial
measures after it (_evidence.py: its ceilings and headroom verdict, of_peak, the noise scale). A study's probe
lives apart (probe.py).
"""

from __future__ import annotations

import contextlib
import gc
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import nn

from tuner.config import TrialConfig
from tuner.device import Device, is_oom, resolve_device
from tuner.errors import TunerError, error_line
from tuner.knobs import check_device
from tuner.measure.ceiling import CeilingCache
from tuner.measure.timing import summarize
from tuner.study import TrialResult, break_even_seconds
from tuner.target import NOT_REACHED, target_metrics
from tuner.data import prefetch_depth
from tuner.train._build import (  # re-exported: tests and benchmarks import them from here
    Training, build_models, build_training, build_workload, make_context, score, score_target,
    target_subset, torch_threads, trial_scope, val_batches)
from tuner.train._evidence import _AfterTraining
from tuner.train._rungs import _DivergedAtRung, _NoReports, _Rungs
from tuner.train.compile import CompileWatch, compile_error_line, compile_limit, compile_timed_out, is_compile_error
from tuner.train.deadline import GRACE_S, TrialTimeout, time_limit
from tuner.train.distributed import Agreement, rank_world
from tuner.measure.load import OthersMeter
from tuner.train.environment import record_others, run_environment
from tuner.train.loop import run_loop
from tuner.train.reports import PhaseReport, StopTrial, TrialReporter
from tuner.train.step import PhaseStep
from tuner.workload import Workload, user_error_line, user_traceback


RESERVE_CAP_SHARE = 0.9  # scoring never keeps more of a budget than this (the pre-flight refused one it fills)
SLOW_CAP = 4.0  # the scoring reserve grows with a trial's step slower per sample than the pre-flight's, to this

# What a trial may take after its wall cap before its driver ends it (scoring, ceilings, rung evaluations,
# whose time the loop's clock leaves out): half the cap, at least this, and four scorings (PhaseReport).
AFTER_WALL_MIN_S = 30.0

BUDGET_MARGIN_SHARE = 0.1  # a trial's wall time (training, ceilings, scoring) stays within the budget plus
BUDGET_MARGIN_STEPS = 2  # this share of it and this many steps (README: "The budget")


def budget_margin(budget_s: float, step_s: float | None) -> float:
    """The stated margin over a seconds budget: 10% of it (the two ceilings' deadlines) and two steps (the
    window that ends on the step past the budget, and one more where the step time moved after warm-up)."""
    return BUDGET_MARGIN_SHARE * budget_s + BUDGET_MARGIN_STEPS * (step_s or 0.0)


class _Run(_AfterTraining):
    """One trial's state, so a failure handler can read what was measured and then drop every big tensor."""

    def __init__(self, cfg: TrialConfig, device: Device, out_dir: Path | None,
                 clock: Callable[[], float] = time.perf_counter, reporter: TrialReporter | None = None) -> None:
        self.cfg, self.device, self.out_dir, self.clock = cfg, device, out_dir, clock
        self.reporter = reporter
        self.result = TrialResult(state="complete", device=device.describe())
        self.models: dict[str, nn.Module] | None = None
        self.step: PhaseStep | None = None
        self.workload: Workload | None = None
        self.train_set: Any = None
        self.t0 = clock()
        self.limits = contextlib.ExitStack()  # the in-process limit of the training phase (_phase), closed at the end
        self.train_limit_s: float | None = None  # what the training phase may take (told again after evaluations)

    def train(self, wall_limit_s: float | None, on_window: Callable[[dict[str, Any]], None] | None,
              eager_throughput: float | None = None, score_reserve_s: float | None = None,
              preflight_pace_s: float | None = None) -> None:
        cfg, device = self.cfg, self.device
        rank, world = rank_world()
        training = build_training(cfg, device, rank=rank, world=world)
        workload, val_set = training.workload, training.val_set
        self.workload, self.train_set = workload, training.train_set
        self.models, self.step = training.models, training.step
        self.result.optimizer = training.step.settings

        budget = cfg.budget
        device.reset_peak_memory()
        self.t0 = self.clock()
        rungs = _Rungs(self, self.reporter or _NoReports(), training, world) \
            if self.reporter is not None or cfg.target is not None else None
        reserve = None
        if budget.seconds is not None and score_reserve_s and cfg.quality.enabled and workload.evaluate is not None:
            # every rank alike (rank 0 scores; the others wait for it): their windows end together
            reserve = self._reserve(budget.seconds, score_reserve_s, preflight_pace_s, rungs)
        loop_clock, window = self.clock, on_window
        if rungs is not None:
            rungs.start = rungs.clock()
            loop_clock = rungs.clock

            def window(w: dict[str, Any]) -> None:
                if on_window is not None:
                    on_window(w)
                rungs.window(w)

        batches = training.batches()

        def training_phase() -> None:
            if wall_limit_s is not None:
                self.train_limit_s = wall_limit_s + max(AFTER_WALL_MIN_S, 0.5 * wall_limit_s) \
                    + 4 * (score_reserve_s or 0.0)
                self._phase("train", self.train_limit_s, wall_limit_s)

        watch = None
        if cfg.params.compile != "off":
            watch = CompileWatch(cfg.params.compile, self.models, cfg.params, limit_s=compile_limit(budget),
                                 on_done=training_phase)
            self._phase("compile", compile_limit(budget) + 2 * GRACE_S)  # its own limit first (in the trial)
        else:
            training_phase()
        try:
            loop = run_loop(self.step, batches, budget=budget, measure=cfg.measure, device=device,
                            wall_limit_s=wall_limit_s, on_window=window, agree=Agreement(world), clock=loop_clock,
                            rung_points=rungs.train_points if rungs is not None else None, compiling=watch,
                            reserve=reserve, prefetched=prefetch_depth(cfg.params),
                            sample_points=rungs.sample_points if rungs is not None and cfg.target else None,
                            stop=(lambda _rates: rungs.done) if rungs is not None and cfg.target else None,
                            # the pause before a drain on the wall clock: the loader's workers refill their queue
                            # during the evaluations loop_clock leaves out (a rung's, a target's)
                            pause_clock=self.clock)
        except _DivergedAtRung as err:
            self.result.state, self.result.error = "diverged", str(err)
            self.result.windows = list(rungs.rates) if rungs is not None else []
            self.result.metrics.update(train_seconds=loop_clock() - (rungs.start if rungs else self.t0),
                                       throughput=None)
            return
        finally:
            batches.close()  # stops the loader's worker processes now, not at garbage collection
        if rungs is not None and cfg.target is not None and loop.tail_steps and not loop.diverged:
            rungs.at_end(loop.samples * world)
        summary = summarize(loop.windows)
        res = self.result
        if watch is not None:
            res.metrics.update(compile_seconds=loop.compile_seconds, compile_steps=loop.compile_steps,
                               graph_breaks=watch.graph_breaks(), recompiles=watch.recompiles())
        res.windows = [w * world for w in summary.windows]  # every rank trains its own shard at the same time
        res.metrics.update(
            throughput=summary.throughput * world if summary.throughput is not None else None,
            throughput_spread=summary.spread,
            throughput_median=summary.median * world if summary.median is not None else None,
            data_wait=summary.data_wait, peak_mem_mb=device.peak_memory_mb(), train_seconds=loop.seconds,
            samples=loop.samples * world, steps=loop.steps, warmup_steps=loop.warmup_steps,
            step_seconds=loop.step_seconds)
        if loop.skipped_windows:
            res.metrics["skipped_windows"] = loop.skipped_windows
        res.capped, res.loss_curve = loop.capped, loop.loss_curve
        if rungs is not None and rungs.reporter.rungs:  # its end: the last rung
            # in the whole budget's terms; a trial that trained to its end (its reserve grown or shrunk on the
            # way) is measured at the top rung, the whole budget: the budget the report names
            res.measured_at = min(loop.seconds / rungs.scale, cfg.budget.seconds) if cfg.budget.seconds is not None \
                else float(loop.samples * world)
            if not loop.capped and not loop.diverged:
                res.rung = len(self.reporter.rungs) - 1  # type: ignore[union-attr]
                if cfg.budget.seconds is not None:
                    res.measured_at = float(cfg.budget.seconds)
        if not loop.windows and not loop.diverged:  # no reading to rank: not a complete trial (nor worth scoring)
            res.state = "error"
            res.error = (f"the wall cap stopped training before one window of {cfg.measure.window_min_steps} steps: "
                         f"the step is too slow for this budget (raise --budget-seconds)")
            return
        if watch is not None and eager_throughput is not None and summary.throughput is not None:
            res.metrics["eager_throughput"] = eager_throughput
            res.metrics["compile_break_even_s"] = break_even_seconds(
                loop.compile_seconds or 0.0, summary.throughput * world, eager_throughput)
        per_sample = self.step.units_per_sample()
        if per_sample is not None and res.metrics.get("throughput") is not None:
            res.metrics.update(unit_throughput=res.metrics["throughput"] * per_sample, sample_unit=workload.sample_unit)
        if loop.diverged:
            res.state, res.error = "diverged", "non-finite training loss"
            return
        reached_at_end = rungs is not None and rungs.reached and rungs.last_quality is not None \
            and rungs.curve[-1].samples == loop.samples * world and workload.target_eval_samples is None
        if rank == 0 and cfg.quality.enabled and workload.evaluate is not None:
            # stopped at the target: the evaluation that met it is the trial's quality (no second scoring)
            quality = dict(rungs.last_quality) if reached_at_end else score(workload, self.models, val_set, device)
            grid = quality.pop("sample_grid", None)
            res.sample_grid = str(grid) if grid else None
            res.metrics.update(quality)
            if workload.quality is not None:
                name = workload.quality[0]
                value = quality.get(name)
                if isinstance(value, (int, float)) and not math.isfinite(value):
                    res.state, res.error = "diverged", f"quality metric {name} is not finite (the model's outputs are not)"
                    res.metrics[name] = None
        if rungs is not None and cfg.target is not None:
            self._target_result(rungs)

    def _target_result(self, rungs: _Rungs) -> None:
        """The quality curve, time and samples to target; `not reached` when the budget ended before an
        evaluation met the target (a complete trial otherwise: its figures stand)."""
        res, target = self.result, self.cfg.target
        assert target is not None
        res.quality_curve = [p.as_list() for p in rungs.curve]
        res.metrics.update(target_metrics(rungs.curve, target, rungs.target_eval_s, res.value("throughput")))
        if res.state == "complete" and res.metrics.get("time_to_target") is None:
            res.state = NOT_REACHED  # type: ignore[assignment]

    def _phase(self, phase: str, limit_s: float, wall_limit_s: float | None = None) -> None:
        """Tell a search's driver how long the phase starting now may take (PhaseReport). Without one, in the main
        thread (`tuner train`, a re-run's own process), the training phase is limited here: a signal interrupts a
        blocked Python call, and the process ends with the message if a native one does not return (issue 37)."""
        tell = getattr(self.reporter, "phase", None)
        if tell is not None:
            tell(PhaseReport(phase=phase, limit_s=limit_s))
        elif phase == "train" and threading.current_thread() is threading.main_thread():
            message = (f"the trial did not end within {limit_s:.0f} s of its training's start (its wall cap "
                       f"{wall_limit_s or 0:g} s and what follows it): a step or the code after it blocked")
            self.limits.enter_context(time_limit(limit_s, message, TrialTimeout, "the trial", note_after=limit_s))

    def _reserve(self, budget_s: float, score_s: float, preflight_pace_s: float | None,
                 rungs: _Rungs | None) -> Callable[[float | None, int], float]:
        """The seconds kept out of training's share for scoring (tuner.train.loop's `reserve`): one scoring at
        the end and one per rung point the trial can reach, each the pre-flight's estimate grown by how much
        slower per sample this trial's step is than the pre-flight's (at most SLOW_CAP times), or the last rung
        evaluation's measured time once there is one; the evaluations already done count as they took."""
        n = 1 + (len(rungs.points) if rungs is not None else 0)
        cap = RESERVE_CAP_SHARE * budget_s
        if rungs is not None:
            rungs.scale = (budget_s - min(n * score_s, cap)) / budget_s
        self.result.metrics["score_reserve_seconds"] = min(n * score_s, cap)

        def keep(step_s: float | None, samples: int) -> float:
            slow = 1.0
            if preflight_pace_s and step_s and samples:
                slow = min(max(step_s / samples / preflight_pace_s, 1.0), SLOW_CAP)
            done = list(rungs.evals) if rungs is not None else []
            each = done[-1] if done else score_s * slow
            kept = min(sum(done) + (n - len(done)) * each, cap)
            self.result.metrics["score_reserve_seconds"] = kept
            if rungs is not None:  # the rung points stay at their fractions of training's share as it moves
                rungs.scale = (budget_s - kept) / budget_s
            return kept

        return keep

    def failed(self, state: str, error: str, traceback: str | None = None) -> None:
        res = self.result
        res.state, res.error, res.traceback = state, error, traceback  # type: ignore[assignment]
        res.metrics.setdefault("train_seconds", time.perf_counter() - self.t0)
        with contextlib.suppress(Exception):
            res.metrics["peak_mem_mb"] = self.device.peak_memory_mb()

    def release(self, collect: bool) -> None:
        """Drop the models, optimizers and activations. After a failure also collect cycles and return the cached
        memory: outside any except block, whose traceback would keep the activations alive (a full collection
        costs a tenth of a second, so a trial that ended well skips it)."""
        self.models = self.step = self.workload = self.train_set = None
        if collect:
            gc.collect()
            self.device.free_memory()


def run_trial(
    cfg: TrialConfig,
    *,
    cache_dir: Path,
    out_dir: Path | None = None,
    device: Device | None = None,
    wall_limit_s: float | None = None,
    on_window: Callable[[dict[str, Any]], None] | None = None,
    ceilings: CeilingCache | None = None,
    clock: Callable[[], float] = time.perf_counter,
    reporter: TrialReporter | None = None,
    measure_ceilings: bool = True,
    eager_throughput: float | None = None,
    score_reserve_s: float | None = None,
    preflight_pace_s: float | None = None,
    measure_noise: bool = True,
) -> TrialResult:
    """Run `cfg`; oom / diverged / error come back as states. Bad input (device, precision, dataset) raises.
    A complete trial then measures its compute and input ceilings (looked up in `ceilings` first, a study's
    cache) and gets its headroom verdict, unless `measure_ceilings` is False (a study's search trials: the study
    measures them for the trials whose verdict is read). `clock` times the loop, the ceilings and the trial's
    wall_seconds (from the first training step to the end of the ceilings), which stays within the budget plus
    budget_margin. A `reporter` (a search's trial) gets a report per timed window and one per rung, each rung
    after a quality evaluation (tuner.train.reports). Then, after its
    wall_seconds, its FLOPs per sample and the device's matmul peak (one-time costs: `ceilings` caches the count,
    `cache_dir` the peak) give it of_peak. wall_seconds stays within the budget plus budget_margin plus
    compile_seconds (torch.compile's first steps, outside the budget). A compiled trial with `eager_throughput`
    (samples/s of the same config in eager mode) also gets its compile break-even. `score_reserve_s` (the
    pre-flight's estimate of scoring) is kept out of training's share of the budget, so scoring fits too, once
    per rung evaluation besides, grown by how much slower a sample's step is than `preflight_pace_s` (the
    pre-flight's seconds per sample). Without `measure_noise` the noise-scale pass is left out (a study's search
    trials: efficiency reads the baseline's noise scale alone)."""
    p = cfg.params
    device = device or resolve_device(p.device)
    device.check_precision(p.precision)
    check_device(p, device)  # CUDA-only knobs on a CPU, pin_memory among them: one line (tuner.knobs)
    device.check_compile(p.compile)
    run = _Run(cfg, device, out_dir, clock, reporter)
    failure: tuple[str, str, str | None] | None = None
    stopped = False
    with trial_scope(cfg, device, cache_dir, out_dir):
        run.result.environment = run_environment()
        meter = OthersMeter(1 if device.is_cuda else run.result.environment.torch_threads)
        try:
            try:
                run.train(wall_limit_s, on_window, eager_throughput, score_reserve_s, preflight_pace_s)
            finally:  # what other processes took of its CPUs while it trained (a stopped trial's too)
                record_others(run.result.environment, meter.read())
            run.ceilings(ceilings, measure_ceilings)
            run.result.metrics["wall_seconds"] = clock() - run.t0
            run.of_peak(ceilings, cache_dir)  # one-time costs after the trial's wall time, like set-up's
            run.noise_scale(measure_noise)  # an untimed pass after the trial's wall time too (tuner.train.noise)
        except (TunerError, KeyboardInterrupt):
            raise
        except StopTrial:
            stopped = True
        except BaseException as err:  # noqa: BLE001 - every other failure (a user's sys.exit() too) is a state
            if is_oom(err):
                failure = ("oom", error_line(err), None)
            elif p.compile != "off" and compile_timed_out(err) is not None:
                failure = ("compile_timeout", str(compile_timed_out(err)), None)
            elif p.compile != "off" and is_compile_error(err):  # the compiler's reason, not a user's traceback
                failure = ("error", compile_error_line(err, p.compile), None)
            else:
                failure = ("error", user_error_line(err), user_traceback(err))
        run.limits.close()
        if failure is not None:
            run.failed(*failure)
        run.release(collect=failure is not None or stopped)
    if stopped:
        raise StopTrial()
    return run.result
