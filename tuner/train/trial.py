"""Train one configuration of one workload within its budget and measure it: the unit every search trial runs.

Failures are states, not exceptions: an out-of-memory anywhere in the trial (building the models, wrapping them in
DDP, a cuDNN/cuBLAS workspace, training, scoring) is `oom`; a non-finite loss or quality metric is `diverged`; an
exception raised by the workload's own code is `error`, with the user's frames kept. Bad input tuner itself
refuses (a device this machine lacks, a batch larger than the dataset) raises a UserError instead.

Over 800 lines because one trial's phases (build, train with its rung evaluations, ceilings, of_peak, failure
states) share one `_Run` state that a failure handler reads; a study's probe lives apart (probe.py).
"""

from __future__ import annotations

import contextlib
import gc
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tuner.config import Params, TrialConfig
from tuner.device import Device, is_oom, resolve_device
from tuner.errors import TunerError, error_line
from tuner.knobs import check_device
from tuner.measure.ceiling import NOT_MEASURED, STABLE, CeilingCache
from tuner.measure.quality import eval_mode
from tuner.measure.timing import summarize
from tuner.study import CurvePoint, NOT_REACHED, TrialResult, assess, break_even_seconds, past_cap, target_metrics
from tuner.data import prefetch_depth, to_device
from tuner.train.ceilings import CeilingNote, ceilings, first_batch
from tuner.train.compile import (CompileWatch, compile_error_line, compile_limit, compile_models, compile_timed_out,
                                  is_compile_error)
from tuner.train.deadline import GRACE_S, TrialTimeout, setup_deadline, time_limit
from tuner.train.distributed import Agreement, rank_world, unwrap, wrap_ddp
from tuner.measure.load import OthersMeter
from tuner.train.environment import env_threads, record_others, run_environment
from tuner.train.loop import forever, run_loop
from tuner.train.reports import PhaseReport, RungReport, StopTrial, TrialReporter, WindowReport
from tuner.train.step import PhaseStep, set_memory_format
from tuner.workload import TrialContext, Workload, build, running, user_error_line, user_traceback
from tuner.builtin import resolve_workload


CEILING_SHARE = 0.05  # each ceiling's deadline is at most this share of the budget: both fit the 10% margin

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


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """torch's CPU compute threads for this trial only: a reused Ray actor must not hand them to the next trial."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


@contextlib.contextmanager
def trial_scope(cfg: TrialConfig, device: Device, cache_dir: Path, out_dir: Path | None) -> Iterator[None]:
    """What a trial runs under, restored afterwards: its CPU threads, its device's numerics (TF32), and the
    context its workload reads (tuner.trial_context())."""
    with torch_threads(cfg.params.threads or env_threads(cfg.env)), device.numerics(cfg.params), \
            running(make_context(cfg, device, cache_dir, out_dir)):
        yield


def make_context(cfg: TrialConfig, device: Device, cache_dir: Path, out_dir: Path | None,
                 preflight: bool = False) -> TrialContext:
    rank, world = rank_world()
    return TrialContext(device=device.torch_device, cache_dir=Path(cache_dir), out_dir=out_dir, seed=cfg.params.seed,
                        rank=rank, world_size=world, params=cfg.params, quality=cfg.quality, preflight=preflight)


def build_workload(cfg: TrialConfig) -> Workload:
    return build(resolve_workload(cfg.workload), cfg.workload_options, cfg.dataset)


def build_models(workload: Workload, device: Device, params: Params) -> dict[str, nn.Module]:
    """Fresh models, seeded alike (the same initial weights for every knob that leaves the model alone), on the
    device and in the memory format `params` asks for: the one build of a trial's, a probe's and the pre-flight's
    models, and the one place channels_last is applied (before DDP's wrap, which must see the weights it will
    reduce; off leaves the models as the workload built them)."""
    torch.manual_seed(params.seed)
    models: dict[str, nn.Module] = {}
    for name, factory in workload.models.items():
        model = factory()
        if not isinstance(model, nn.Module):
            raise TypeError(f"Workload.models[{name!r}]() returned a {type(model).__name__}, not a torch.nn.Module")
        models[name] = model.to(device.torch_device)
    if params.channels_last:
        set_memory_format(models, True)
    return models


@dataclass
class Training:
    """What a trial trains with, built the one way every trial builds it."""

    workload: Workload
    train_set: Any
    val_set: Any
    loader: Any
    sampler: Any  # a DistributedSampler under DDP, else None
    models: dict[str, nn.Module]
    step: PhaseStep

    def batches(self) -> Iterator[Any]:
        """Endless batches; close() it to stop the loader's worker processes."""
        return forever(self.loader, self.sampler.set_epoch if self.sampler is not None else None)


def build_training(cfg: TrialConfig, device: Device, *, rank: int = 0, world: int = 1) -> Training:
    """The workload, its datasets, the loader with the config's knobs, seeded models (DDP-wrapped when world > 1)
    and their step: what run_trial trains and tuner profile records."""
    from tuner.data import make_loader

    p = cfg.params
    torch.manual_seed(p.seed + rank)
    with setup_deadline(cfg.setup_timeout_s, f"the workload factory {resolve_workload(cfg.workload).attr}()"):
        workload = build_workload(cfg)
    with setup_deadline(cfg.setup_timeout_s, "the workload's datasets()"):
        train_set, val_set = workload.datasets()
    sampler = None
    if world > 1:
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, seed=p.seed, drop_last=True)
    loader = make_loader(train_set, p, device, shuffle=sampler is None, seed=p.seed, sampler=sampler,
                         collate_fn=workload.collate)
    models = build_models(workload, device, p)  # in channels_last where asked, before DDP's wrap
    if world > 1:
        models = {k: wrap_ddp(m, device) for k, m in models.items()}
    models = compile_models(models, p.compile)  # torch.compile(DDP(model)) under DDP, as PyTorch advises
    torch.manual_seed(p.seed + rank)  # after DDP's broadcast: each rank draws its own noise (latents, dropout)
    step = PhaseStep(workload, models, p, device)
    return Training(workload, train_set, val_set, loader, sampler, models, step)


def val_batches(workload: Workload, val_set: Any, device: Device, limit: int | None = None) -> Iterator[Any]:
    """The validation split in fixed batches (eval_batch_size), on the device; its own RNG, never the global one."""
    from torch.utils.data import DataLoader

    loader = DataLoader(val_set, batch_size=workload.eval_batch_size, shuffle=False, num_workers=0,
                        collate_fn=workload.collate, generator=torch.Generator())
    for i, batch in enumerate(loader):
        if limit is not None and i >= limit:
            return
        yield to_device(batch, device.torch_device)


def target_subset(workload: Workload, val_set: Any) -> Any:
    """What the time-to-target evaluations score (issue 51): a fixed, seeded subset of the validation split,
    workload.target_eval_samples of it, the same for every trial; the whole split without one (or when it asks
    for as many or more)."""
    n = workload.target_eval_samples
    if n is None or n >= len(val_set):
        return val_set
    from torch.utils.data import Subset

    picked = torch.randperm(len(val_set), generator=torch.Generator().manual_seed(0))[:n]
    return Subset(val_set, sorted(int(i) for i in picked))


def score(workload: Workload, models: dict[str, nn.Module], val_set: Any, device: Device,
          limit: int | None = None) -> dict[str, Any]:
    """evaluate() in eval mode, as {metric: number or text}; quality_seconds is its wall time unless it says."""
    if workload.evaluate is None:
        return {}
    plain = {k: unwrap(m) for k, m in models.items()}
    start = time.perf_counter()
    with eval_mode(*plain.values()):
        raw = workload.evaluate(plain, val_batches(workload, val_set, device, limit))
    device.synchronize()
    if not isinstance(raw, dict):
        raise TypeError(f"evaluate() must return a dict of metrics, got {type(raw).__name__}")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, torch.Tensor):
            value = value.detach().float().item() if value.numel() == 1 else str(value.tolist())
        elif value is not None and not isinstance(value, (int, float, str, bool)):
            value = str(value)
        out[str(key)] = value
    out.setdefault("quality_seconds", time.perf_counter() - start)
    return out


class _DivergedAtRung(Exception):
    """The quality a rung evaluation read is not finite: the trial ends there as diverged."""


class _NoReports:
    """The reporter of a trial nobody reports to (`tuner train --until-target`): no rungs, reports dropped."""

    rungs: list[float] = []

    def window(self, report: WindowReport) -> None:
        pass

    def rung(self, report: RungReport) -> None:
        pass


class _Rungs:
    """The window and rung reports of one trial (tuner.train.reports). A rung's evaluation runs at the end of
    the first window that reaches its budget, outside the timed windows; the loop's clock is paused meanwhile, and
    a seconds budget keeps one scoring per rung the trial can reach out of training's share (`scale`: the rung
    points sit at the same fractions of that share, and reports give the budget used in the whole budget's
    terms). The share follows the reserve as it grows (a step slower than the pre-flight's) or shrinks (the
    rungs' evaluations measured), and the rung points with it, so every rung is reached before training ends.
    Under DDP every rank calls the reporter alike (rank 0's reports count) and every rung decision is
    agreed."""

    def __init__(self, run: "_Run", reporter: TrialReporter, training: Training, world: int) -> None:
        self.run, self.reporter, self.training = run, reporter, training
        budget = run.cfg.budget
        whole = float(budget.seconds if budget.seconds is not None else budget.samples)  # type: ignore[arg-type]
        self.points = [float(b) for b in reporter.rungs if float(b) < whole * (1 - 1e-9)]  # the last: the trial's end
        self.agree = Agreement(world)
        self.paused = 0.0
        self.rates: list[float] = []
        self.losses: list[list[float | None]] = []
        self.closed = 0  # rungs evaluated so far
        self.start = 0.0
        self.scale = 1.0  # training's share of the budget over the budget (the scoring reserve left out)
        self.evals: list[float] = []  # wall seconds of each rung evaluation so far
        self.reported = 0.0  # the budget used last reported: a share that grew back never reports less
        # A target's evaluations every K samples (tuner.study.target): paused out of the loop's clock like a rung's.
        self.target = run.cfg.target
        self.next_eval = self.target.eval_every_samples if self.target is not None else None
        self.curve: list[CurvePoint] = []
        self.target_eval_s = 0.0
        self.reached = False
        self.over_cap = False  # past the target's cap without meeting it: ends `not reached` (tuner.study.target)
        self.last_quality: dict[str, Any] | None = None  # the last evaluation's metrics (rank 0)
        self.fewest = min(run.cfg.measure.min_windows, run.cfg.measure.windows)

    @property
    def finished(self) -> bool:
        """No more evaluations: the target was met, or its cap passed without meeting it."""
        return self.reached or self.over_cap

    @property
    def done(self) -> bool:
        """The trial may stop: no more evaluations, and its throughput read from the fewest windows a reading
        has (measure.min_windows). A trial that met the target before them goes on to them, windows cut every K
        samples as before, unevaluated: stopped at one window, its throughput was suspect (tuner.analysis.suspect)
        and so were its re-runs', so a study ranking throughput passed over the configs that reach it soonest."""
        return self.finished and len(self.rates) >= self.fewest

    def sample_points(self) -> list[int]:
        """Where the loop ends a window for the target's next evaluation, or after it the next window the reading
        still needs (tuner.train.loop's sample_points)."""
        return [self.next_eval] if self.next_eval is not None and not self.done else []

    def train_points(self) -> list[float]:
        return [b * self.scale for b in self.points]

    def clock(self) -> float:
        return self.run.clock() - self.paused

    def window(self, w: dict[str, Any]) -> None:
        import statistics

        self.rates.append(float(w["throughput"]))
        loss = w.get("train_loss")
        loss = float(loss) if loss is not None and math.isfinite(loss) else None
        self.losses.append([float(w["samples"]), loss])
        med = statistics.median(self.rates)
        spread = (max(self.rates) - min(self.rates)) / med if med > 0 else None
        used = float(w["budget_used"])
        self.reported = max(self.reported, used / self.scale)
        self.reporter.window(WindowReport(window=int(w["window"]), budget_used=self.reported,
                                          samples=int(w["samples"]), throughput=med, throughput_spread=spread,
                                          train_loss=loss, train_seconds=self.clock() - self.start,
                                          time_to_target=self.curve[-1].seconds if self.reached else None))
        # past the target the trial only reads its last windows (done): no rung closes there, and the race
        # (tuner.schedule.race) leaves a window that says it reached the target alone
        due = not self.finished and self.closed < len(self.points) \
            and used >= self.points[self.closed] * self.scale * (1 - 1e-9)
        if self.agree.any(due):
            self._close(used, int(w["samples"]), med, spread)
        if self.next_eval is not None and not self.finished and self.agree.any(int(w["samples"]) >= self.next_eval):
            self._evaluate_target(int(w["samples"]))

    def at_end(self, samples: int) -> None:
        """The loop's end: the target's evaluation a samples budget's untimed last steps made due (no window
        followed them to report it)."""
        if self.next_eval is not None and not self.finished and self.agree.any(samples >= self.next_eval):
            self._evaluate_target(samples)

    def _evaluate_target(self, samples: int) -> None:
        """The quality at `samples` on the target's metric, a point of the quality curve; reached when it meets
        the target (every rank agrees; rank 0 evaluates). Outside the timed windows and the loop's clock."""
        run, target = self.run, self.target
        assert target is not None and self.next_eval is not None
        rank, _ = rank_world()
        t = run.clock()
        trained = self.clock() - self.start
        value: float | None = None
        workload = self.training.workload
        if rank == 0 and workload.evaluate is not None:
            quality = score(workload, self.training.models, target_subset(workload, self.training.val_set),
                            run.device)  # a subset where the workload asks (issue 51); its end scores the whole
            quality.pop("sample_grid", None)
            self.last_quality = quality
            v = quality.get(target.metric)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                value = float(v)
        self.curve.append(CurvePoint(samples, trained, value))
        self.reached = self.agree.any(target.met(value))
        self.over_cap = not self.reached and self.agree.any(past_cap(self.curve[-1], target))
        while self.next_eval <= samples:
            self.next_eval += target.eval_every_samples
        took = run.clock() - t
        self.target_eval_s += took
        self.paused += took
        if run.train_limit_s is not None and getattr(run.reporter, "phase", None) is not None:
            run._phase("train", run.train_limit_s)  # the driver's limit from now: evaluations are not training

    def _close(self, used: float, samples: int, throughput: float, spread: float | None) -> None:
        run, cfg = self.run, self.run.cfg
        rank, _ = rank_world()
        t = run.clock()
        first = self.closed
        while self.closed < len(self.points) and used >= self.points[self.closed] * self.scale * (1 - 1e-9):
            self.closed += 1  # a window that crossed two rungs closes both, with the same figures
        rung = self.closed - 1
        used = self.reported = max(self.reported, used / self.scale)  # in the whole budget's terms, as the rungs are
        res = run.result
        part = TrialResult(state="stopped", device=res.device, windows=list(self.rates),
                           loss_curve=[list(x) for x in self.losses], optimizer=res.optimizer, rung=rung,
                           measured_at=used)
        part.metrics.update(throughput=throughput, throughput_spread=spread, samples=samples,
                            train_seconds=self.clock() - self.start, peak_mem_mb=run.device.peak_memory_mb())
        per_sample = run.step.units_per_sample() if run.step is not None else None
        if per_sample is not None:
            part.metrics.update(unit_throughput=throughput * per_sample, sample_unit=self.training.workload.sample_unit)
        bad = False
        workload = self.training.workload
        if rank == 0 and cfg.quality.enabled and workload.evaluate is not None:
            quality = score(workload, self.training.models, self.training.val_set, run.device)
            quality.pop("sample_grid", None)
            part.metrics.update(quality)
            if workload.quality is not None:
                value = quality.get(workload.quality[0])
                bad = isinstance(value, (int, float)) and not math.isfinite(value)
                if bad:
                    part.metrics[workload.quality[0]] = None
        diverged = self.agree.any(bad)  # also the barrier the other ranks wait at while rank 0 evaluates
        if not diverged:
            for i in range(first, self.closed):
                self.reporter.rung(RungReport(rung=i, budget_used=used, result=part.model_copy(update={"rung": i})))
        self.evals.append(run.clock() - t)
        self.paused += self.evals[-1]
        res.rung, res.measured_at = rung, used
        if diverged:
            raise _DivergedAtRung(f"quality metric {workload.quality[0] if workload.quality else ''} is not finite at "
                                  f"rung {rung} (the model's outputs are not)")


@dataclass
class _Evidence:
    """What `_Run._evidence` saw of its block: `failed` when the block raised (the record says why)."""
    failed: bool = False


class _Run:
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
            throughput_overall=summary.overall * world if summary.overall is not None else None,
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

    def ceilings(self, cache: CeilingCache | None, measure: bool = True) -> None:
        """Both ceilings of a complete trial, on the same process and resources, after scoring (the models may
        train on: they are done), then the verdict. A ceiling that fails is left out; the trial stands. With
        `measure` False (a search trial: nobody reads its verdict unless it makes the front) only the note why."""
        res, cfg, device = self.result, self.cfg, self.device
        seconds = cfg.measure.ceiling_seconds  # a samples budget has no wall-time contract to share with
        if cfg.budget.seconds is not None:
            seconds = min(seconds, CEILING_SHARE * cfg.budget.seconds)
        if not res.complete or self.workload is None or self.models is None or seconds <= 0:
            return
        if not measure:
            res.metrics["ceiling_skipped"] = NOT_MEASURED
            return
        rank, world = rank_world()
        t0 = self.clock()
        self.step = None  # the training's optimizer state: the compute ceiling builds its own
        notes: dict[str, CeilingNote] = {}
        # Each reading ends once its rate is stable (STABLE), as the probes' do: a steady rate needs no more of
        # the deadline, which the confirmation's re-runs paid in full for each confirmed config.
        found = ceilings(cfg, device, self.workload, self.train_set, self.models, seconds, cache,
                         rank=rank, world=world, step_seconds=res.value("step_seconds"), notes=notes,
                         clock=self.clock, stable=STABLE)
        for kind, value in found.items():
            res.metrics[f"{kind}_ceiling"] = value
        if notes:
            res.metrics["ceiling_skipped"] = "; ".join(f"{k}: {v}" for k, v in notes.items())
        res.metrics["ceiling_seconds"] = self.clock() - t0
        self.verdict()

    def verdict(self) -> None:
        """The headroom verdict from the ceilings (and of_peak, once known)."""
        res = self.result
        res.metrics.update(assess(res.throughput, res.metrics.get("compute_ceiling"),
                                  res.metrics.get("input_ceiling"), params=self.cfg.params.model_dump(),
                                  data_wait=res.metrics.get("data_wait"), device=res.device,
                                  of_peak=res.metrics.get("of_peak")).metrics())

    def of_peak(self, cache: CeilingCache | None, cache_dir: Path) -> None:
        """FLOPs per sample, the device's matmul peak and of_peak (tuner.measure.flops), then the verdict again.
        Run after wall_seconds: both are one-time costs, cached like set-up's. Rank 0 alone (the count runs the
        unwrapped models: no collective). A count or a peak that fails leaves of_peak out with the reason in
        of_peak_skipped; the trial stands."""
        from tuner.measure.flops import PEAK_SECONDS, of_peak, peak_flops, peak_knobs

        res, cfg, p = self.result, self.cfg, self.cfg.params
        rank, world = rank_world()
        if not res.complete or self.workload is None or self.models is None or rank != 0 \
                or cfg.measure.ceiling_seconds <= 0 or res.throughput is None:
            return
        t0 = self.clock()
        per_sample = 0.0
        with self._evidence("of_peak_skipped", "FLOPs not counted", "of_peak_seconds", t0) as counted:
            per_sample = self._flops_per_sample(cache)  # a user model the counter cannot follow still trained
        if counted.failed:
            return
        res.metrics["flops_per_sample"] = per_sample
        if not per_sample:
            res.metrics["of_peak_skipped"] = ("no matmul, convolution or attention FLOPs counted in the step "
                                              "(elementwise work is not counted)")
            return
        peak = None
        with self._evidence("of_peak_skipped", "peak not measured", "of_peak_seconds", t0) as measured:
            peak, _ = peak_flops(self.device, peak_knobs(p, self.device, torch.get_num_threads()), cache_dir,
                                 min(PEAK_SECONDS, cfg.measure.ceiling_seconds),
                                 at_least=res.throughput * per_sample / world)
        if measured.failed:
            return
        res.metrics["peak_flops"] = peak or None
        res.metrics["of_peak"] = of_peak(res.throughput, per_sample, peak, world)
        self.verdict()

    def noise_scale(self, measure: bool = True) -> None:
        """The trial's effective batch (all ranks) and its gradient noise scale (tuner.train.noise): rank 0 of a
        complete trial alone, its cost in noise_seconds. A pass that fails or cannot read enough pairs leaves the
        noise scale out with the reason in noise_scale_skipped; the trial stands. Without `measure` (a study's
        search trial other than its baseline) the pass is left out and the record says why."""
        from tuner.train.noise import NOT_READ, measure_noise_scale, noise_seconds

        res, cfg = self.result, self.cfg
        rank, world = rank_world()
        if not res.complete:
            return
        res.metrics["effective_batch"] = cfg.params.effective_batch * world
        if not measure:
            res.metrics["noise_scale_skipped"] = NOT_READ
            return
        if self.workload is None or self.models is None or rank != 0 or cfg.measure.ceiling_seconds <= 0:
            return
        t0 = self.clock()
        found, why = None, None
        with self._evidence("noise_scale_skipped", "not measured", "noise_seconds", t0) as read:
            found, why = measure_noise_scale(cfg, self.device, self.workload, self.train_set, self.models,
                                             noise_seconds(cfg), clock=self.clock)
        if read.failed:
            return
        value = found.value() if found is not None else None
        if value is None:
            res.metrics["noise_scale_skipped"] = why or (
                "the true gradient's squared norm read <= 0 over the pairs: the gradient noise swamps it at this "
                "batch size")
            return
        res.metrics["noise_scale"] = value

    def _flops_per_sample(self, cache: CeilingCache | None) -> float:
        """From the study's cache (flops.json beside its ceilings.json), else counted on steps of one micro-batch of
        the trial's models, unwrapped (DDP, compile), each with a fresh optimizer: first at the small batches of
        tuner.measure.flops, whose count, the same per sample at each, holds at every batch size and is cached so
        (the study's other batch sizes count nothing); else at the trial's own batch size, cached for it, with the
        model's dependence on the batch cached too (its next batch size is not checked again)."""
        from tuner.measure.flops import FLOPS_FILE, SMALL_BATCHES, flops_key

        cfg, p = self.cfg, self.cfg.params
        assert self.workload is not None and self.models is not None
        key, any_key = flops_key(cfg), flops_key(cfg, any_batch=True)
        cache = cache.sibling(FLOPS_FILE) if cache is not None else None  # beside ceilings.json
        if cache is not None:
            value = cache.get(any_key) or cache.get(key)
            if value is not None:
                return value
        plain = {k: unwrap(m) for k, m in self.models.items()}  # the user's modules: counted in eager mode
        # A counted step updates the weights: they come back after each, so DDP's replicas stay equal on every
        # rank (only rank 0 counts) and the trained models are as training left them.
        saved = {k: {n: t.detach().clone() for n, t in m.state_dict().items()} for k, m in plain.items()}
        full = self._first_batch(p.batch_size)
        if p.batch_size > max(SMALL_BATCHES) and (cache is None or cache.entry(any_key) is None):
            value, found = self._small_batch_flops(plain, saved, full)
            if cache is not None:  # value 0: a marker, this model's count depends on the batch size
                cache.put(any_key, value, {"kind": "flops", "workload": cfg.workload, **found})
            if value > 0:
                return value
        flops, samples = self._count_flops(plain, saved, full)
        value = flops / samples if samples else 0.0
        if value > 0 and cache is not None:
            cache.put(key, value, {"kind": "flops", "workload": cfg.workload, "batch_size": p.batch_size})
        return value

    def _first_batch(self, size: int) -> Any:
        """The first micro-batch of `size` samples of the trial's loader without workers, on the device (the batch
        a compute ceiling steps on, at that size)."""
        assert self.workload is not None
        cfg = self.cfg.model_copy(update={"params": self.cfg.params.model_copy(update={"batch_size": size})})
        return first_batch(cfg, self.device, self.workload, self.train_set)

    def _count_flops(self, plain: dict[str, nn.Module], saved: dict[str, dict[str, torch.Tensor]],
                     batch: Any) -> tuple[int, int]:
        """(FLOPs, samples) of one step on `batch` with a fresh optimizer; the weights and buffers back to `saved`."""
        from tuner.measure.flops import count_step_flops

        assert self.workload is not None
        try:  # one micro-batch: accumulation repeats the same counted work per sample (a k-fold slower count)
            step = PhaseStep(self.workload, plain, self.cfg.params.model_copy(update={"accumulation_steps": 1}),
                             self.device)
            return count_step_flops(step, batch)
        finally:
            for k, m in plain.items():
                m.load_state_dict(saved[k])

    def _small_batch_flops(self, plain: dict[str, nn.Module], saved: dict[str, dict[str, torch.Tensor]],
                           full: Any) -> tuple[float, dict[str, Any]]:
        """(FLOPs per sample counted at the small batches when they hold at every batch size (tuner.measure.flops),
        else 0; what was found, for the cache's entry)."""
        from tuner.measure.flops import SMALL_BATCHES, differ_in_batch_only, same_per_sample

        sizes = list(SMALL_BATCHES)
        try:
            batches = [self._first_batch(n) for n in sizes]
            if not differ_in_batch_only([*batches, full], [*sizes, self.cfg.params.batch_size]):
                return 0.0, {"batch_independent": False, "sizes": sizes,
                             "why": "the batches differ beyond their batch size"}
            counts = [self._count_flops(plain, saved, b) for b in batches]
        except Exception as err:  # noqa: BLE001 - a model that cannot take so small a batch is counted at its own
            return 0.0, {"batch_independent": False, "sizes": sizes, "why": error_line(err)}
        per_sample = [f / n if n else 0.0 for f, n in counts]
        if not same_per_sample(counts):
            return 0.0, {"batch_independent": False, "sizes": sizes, "flops_per_sample": per_sample}
        return per_sample[0], {"batch_independent": True, "sizes": sizes}

    @contextlib.contextmanager
    def _evidence(self, skipped: str, why: str, seconds: str, t0: float) -> Iterator[_Evidence]:
        """A measurement after training that is evidence, never the trial's failure (FLOPs, the matmul peak, the
        noise scale): an exception in the block (KeyboardInterrupt aside) is dropped, its memory freed after an
        OOM, and the record says why in `skipped` ("<why>: <error line>"); the block's time since `t0` goes in
        `seconds` either way. The caller reads `failed` and stops there."""
        outcome = _Evidence()
        try:
            yield outcome
        except KeyboardInterrupt:
            raise
        except Exception as err:  # noqa: BLE001 - evidence, never the trial's failure
            self._drop_after(err)
            self.result.metrics[skipped] = f"{why}: {error_line(err)}"
            outcome.failed = True
        finally:
            self.result.metrics[seconds] = self.clock() - t0

    def _drop_after(self, err: BaseException) -> None:
        if is_oom(err):
            gc.collect()
            self.device.free_memory()

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
