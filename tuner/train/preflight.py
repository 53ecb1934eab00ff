"""Refuse what would fail later, before any work starts: the device and knobs, and the workload itself.

The workload check builds the workload as a trial would (import, factory with its options, datasets, models), runs two
training steps and calls evaluate() once on a few validation batches, so a broken import, a factory that rejects its
options, datasets that are empty or not map-style, a loss that raises, or a quality metric evaluate() never returns is
one line and exit 2 here, not a study of failed trials. It also pays a process's one-time costs (dataset caches, the FID
extractor, first-step kernel selection) before the first trial is timed. The steps are timed, and so is evaluate()
(scaled to the whole validation split), so a seconds budget too short for the model's step and its scoring is refused
here (check_budget) with the budget it needs, rather than every trial being cut at the wall cap with one-step readings.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from tuner.config import Measure, Params, TrialConfig
from tuner.device import Device, resolve_device
from tuner.errors import BudgetError, TunerError, WorkloadError
from tuner.knobs import check_device, heavy_knobs, probed
from tuner.study import HeavyStep, Objective
from tuner.workload import (Workload, WorkloadRef, build, import_changes, import_factory, probe_import, running,
                            user_error_line)
from tuner.train.deadline import SetupTimeout, setup_deadline
from tuner.train._fork import in_child
from tuner.train.step import own_params
from tuner.builtin import resolve_workload

PREFLIGHT_VAL_BATCHES = 2
PREFLIGHT_STEPS = 2  # optimizer steps, untimed: the loss is checked, and the process's kernels are primed


@dataclass
class WorkloadCheck:
    """What the check learned: the resolved reference, the declared quality objective, evaluate()'s metrics."""

    ref: WorkloadRef
    name: str
    quality: Objective | None
    metrics: list[str] = field(default_factory=list)  # numeric keys evaluate() returned
    info: dict[str, Any] = field(default_factory=dict)
    step_seconds: float | None = None  # the faster of the pre-flight's training steps (device synced)
    step_samples: int | None = None  # samples of one of those steps
    score_seconds: float | None = None  # a full scoring's wall time, estimated from the check's (None: no evaluate)
    # A time-to-target evaluation's wall time: the split's, or the subset's it asks for (issue 51: K follows it)
    target_score_seconds: float | None = None
    target_eval_samples: int | None = None  # the validation samples that evaluation scores (None: all of them)
    own: dict[str, float] = field(default_factory=dict)  # the workload's own lr / beta1 / beta2 (lr_scale 1)
    own_batch: int | None = None  # Workload.batch_size: the batch the user trains at (None: tuner's default)
    # The heaviest step a study's space holds (check_workload's `heaviest`), timed after the baseline's: its
    # micro-batch and accumulation, its step's wall time and samples. None: not asked, or it failed (an
    # out-of-memory is that trial's state, not a refusal).
    heavy: HeavyStep | None = None
    # The models' batch-statistics layers (tuner.measure.batch_stats): where the micro-batch split changes learning.
    batch_statistics: list[str] = field(default_factory=list)


def _map_style(ds: Any, which: str, ref: WorkloadRef) -> int:
    from torch.utils.data import IterableDataset

    if isinstance(ds, IterableDataset) or not hasattr(ds, "__getitem__") or not hasattr(ds, "__len__"):
        raise WorkloadError(f"workload {ref.text}: the {which} dataset is a {type(ds).__name__}, not a map-style "
                            f"dataset (with __len__ and __getitem__); tuner builds the DataLoader from it")
    n = len(ds)
    if n == 0:
        raise WorkloadError(f"workload {ref.text}: the {which} dataset is empty; give it samples")
    return n


def _train_steps(workload: Workload, models: dict[str, Any], train_set: Any, cfg: TrialConfig,
                 device: Device, steps: int = PREFLIGHT_STEPS) -> float:
    """A couple of real optimizer steps on real batches, with the config's knobs (no loader workers): a loss that
    raises is caught here, and a fresh process pays its first-step costs (kernel selection, thread pools,
    allocator) before anything is timed. Returns the faster step's wall time, for the budget check."""
    from torch.utils.data import DataLoader

    from tuner.data import checked_collate
    from tuner.train.loop import forever
    from tuner.train.step import PhaseStep

    n = len(train_set)
    # Eager (compile is off here: the check must not take a compile's minutes, and a compile failure is the
    # trial's state, not a refusal); its step time is the eager speed `tuner train` compares a compiled run with.
    params = cfg.params.model_copy(update=Params.defaults((*probed("input"), "compile")))  # in-process, eager
    params = params.model_copy(update={"batch_size": min(params.batch_size, n)})
    loader = DataLoader(train_set, batch_size=params.batch_size, shuffle=False, drop_last=True,
                        collate_fn=workload.collate or checked_collate)
    step = PhaseStep(workload, models, params, device)
    batches = forever(loader)
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step(batches)
        device.synchronize()
        times.append(time.perf_counter() - t)
    return min(times)  # the first pays one-time costs: the faster one is closer to the trial's step


def _score_timed(workload: Workload, models: dict[str, Any], val_set: Any, device: Device,
                 clock: Any = time.perf_counter) -> tuple[dict[str, Any], float]:
    """evaluate() on the first PREFLIGHT_VAL_BATCHES validation batches, and the wall time a full scoring would
    take at that pace (every batch of the validation split): what a seconds budget keeps for scoring. The first
    call pays the process's one-time costs (the FID extractor, its caches); the second is the one timed."""
    from tuner.train._build import score

    metrics = score(workload, models, val_set, device, limit=PREFLIGHT_VAL_BATCHES)
    start = clock()
    score(workload, models, val_set, device, limit=PREFLIGHT_VAL_BATCHES)
    seconds = clock() - start
    full = max(1, math.ceil(len(val_set) / workload.eval_batch_size))
    return metrics, seconds * full / min(full, PREFLIGHT_VAL_BATCHES)


def _target_score_timed(workload: Workload, models: dict[str, Any], val_set: Any, device: Device,
                        score_s: float | None, clock: Any = time.perf_counter) -> float | None:
    """A time-to-target evaluation's seconds: the whole split's `score_s`, or one on the subset the workload's
    target_eval_samples asks for, timed as a trial runs it (score_target), since its cost need not follow the
    split's batches (the built-in GAN sizes its FID's generated images by the subset)."""
    from tuner.train._build import score_target

    if score_s is None or workload.target_eval_samples is None:
        return score_s
    start = clock()
    score_target(workload, models, val_set, device)
    return clock() - start


def budget_need(measure: Measure, step_s: float) -> float:
    """Seconds a trial needs at this step time: its least warm-up and its fewest windows of the least length."""
    windows = min(measure.min_windows, measure.windows)
    return max(measure.warmup_steps, 1) * step_s + windows * max(measure.window_min_steps * step_s,
                                                                 measure.window_min_seconds)


def needed_budget(cfg: TrialConfig, step_s: float | None, score_s: float | None = None,
                  rounded: bool = False) -> float | None:
    """The seconds budget a trial at this step time and scoring needs, with a fifth more (the pre-flight of a
    fresh process is noisy), in whole seconds; `rounded`: rounded up further to a budget a person would pick
    (whole seconds below 10, fives below 60, tens above). None when the budget holds them (or counts samples)."""
    budget = cfg.budget.seconds
    if budget is None or step_s is None:
        return None
    need = budget_need(cfg.measure, step_s) + (score_s if score_s is not None and cfg.quality.enabled else 0.0)
    if need <= budget:
        return None
    want = float(math.ceil(need * 1.2))
    unit = 1 if want < 10 or not rounded else 5 if want < 60 else 10
    return float(math.ceil(want / unit) * unit)


def check_budget(cfg: TrialConfig, step_s: float | None, device: str, name: str,
                 score_s: float | None = None) -> None:
    """Refuse a seconds budget that cannot hold the warm-up, the fewest windows at the pre-flight's step time and
    the scoring (`score_s`, kept out of the training's share of the budget), naming the budget that can (with a
    fifth more: the pre-flight of a fresh process is noisy). The same arithmetic whatever the device: `step_s`
    must be timed on the trials' own device. A samples budget has no wall-time contract, so it is not checked."""
    budget = cfg.budget.seconds
    if budget is None or step_s is None:
        return
    need = budget_need(cfg.measure, step_s)
    scoring = score_s if score_s is not None and cfg.quality.enabled else 0.0
    if need + scoring <= budget:
        return
    m = cfg.measure
    also = f", and scoring (evaluate()) about {scoring:.3g} s more" if scoring else ""
    raise BudgetError(f"a {budget:g} s budget is too short for workload {name}: one training step took "
                      f"{step_s:.3g} s in the pre-flight (batch {cfg.params.batch_size} on {device}), and warm-up "
                      f"plus {min(m.min_windows, m.windows)} windows of {m.window_min_steps} steps need {need:.3g} s"
                      f"{also}; give --budget-seconds {needed_budget(cfg, step_s, score_s):g} or more, or a "
                      f"smaller batch_size")


def _heavy_step(workload: Workload, models: dict[str, Any], train_set: Any, cfg: TrialConfig, device: Device,
                heaviest: dict[str, Any]) -> HeavyStep | None:
    """The step of `heaviest` (batch_size, accumulation_steps: the space's largest): its micro-batch timed as the
    baseline's step was (two more steps, without accumulation), times its accumulation (a little over: the
    optimizer's update is counted once per micro-batch), so a study's budget holds its slowest step, not only the
    baseline's (a batch-128 trial of a nanoGPT study sized on its baseline's batch got one or two windows). None
    when it fails: an out-of-memory at the largest batch is that trial's state."""
    top = {k: int(heaviest.get(k, getattr(cfg.params, k))) for k in heavy_knobs()}
    batch, accumulation = top["batch_size"], top["accumulation_steps"]
    try:
        micro = cfg.params.model_copy(update={**top, "accumulation_steps": 1})  # one micro-batch's step
        one = cfg.model_copy(update={"params": micro})
        step_s = _train_steps(workload, models, train_set, one, device) * accumulation
    except KeyboardInterrupt:
        raise
    except Exception:  # noqa: BLE001 - e.g. out of memory at the largest batch: the trial's state, not a refusal
        return None
    finally:
        device.free_memory()
    batch = min(batch, len(train_set))
    return HeavyStep(batch_size=batch, accumulation_steps=accumulation, step_seconds=step_s,
                     step_samples=batch * accumulation)


def check_workload(cfg: TrialConfig, cache_dir: Path, device: Device, heaviest: dict[str, Any] | None = None, *,
                   warm_only: bool = False, at_batch: Callable[[int | None], tuple[TrialConfig, Any]] | None = None
                   ) -> WorkloadCheck:
    """Build `cfg`'s workload and call its evaluate() once; any problem is a WorkloadError naming the path.
    `heaviest`: knobs of a heavier step to time as well (WorkloadCheck.heavy; a study's largest micro-batch).
    `at_batch(Workload.batch_size) -> (cfg, heaviest)`: what to time once the workload says its own batch.
    `warm_only`: only a process's one-time costs are wanted (tuner.search._trial.warm_process): one step of one
    micro-batch (the same kernels as the config's accumulation; the second step only gave a faster time) and one
    untimed evaluate() on one validation batch, so the budget's figures (step_seconds, score_seconds) are not for
    a budget check."""
    from tuner.measure.batch_stats import batch_statistics_layers
    from tuner.train._build import build_models, make_context, score

    ref = resolve_workload(cfg.workload)
    if not warm_only:  # the driver's pre-flight: a module that ends the process at import is named (issue 37)
        probe_import(ref)
    stage = "building the workload"
    try:
        with running(make_context(cfg, device, cache_dir, None, preflight=True)):
            with setup_deadline(cfg.setup_timeout_s, f"the workload factory {ref.attr}()"):
                workload: Workload = build(ref, cfg.workload_options, cfg.dataset)
            if at_batch is not None:
                cfg, heaviest = at_batch(workload.batch_size)
            stage = "datasets()"
            with setup_deadline(cfg.setup_timeout_s, "the workload's datasets()"):
                pair = workload.datasets()
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise WorkloadError(f"workload {ref.text}: datasets() must return (train, validation), got "
                                    f"{type(pair).__name__}")
            train_set, val_set = pair
            _map_style(train_set, "training", ref)
            _map_style(val_set, "validation", ref)
            stage = "building the models"
            models = build_models(workload, device, cfg.params)
            batch_stats = batch_statistics_layers(*models.values())
            stage = "a training step (the loss)"
            if warm_only:
                one = cfg.model_copy(update={"params": cfg.params.model_copy(update={"accumulation_steps": 1})})
                step_s = _train_steps(workload, models, train_set, one, device, steps=1)
            else:
                step_s = _train_steps(workload, models, train_set, cfg, device)
            heavy = _heavy_step(workload, models, train_set, cfg, device, heaviest) if heaviest else None
            metrics: dict[str, Any] = {}
            score_s = target_s = None
            if workload.evaluate is not None:
                stage = "evaluate()"
                if cfg.budget.seconds is not None and cfg.quality.enabled and not warm_only:  # kept for it
                    metrics, score_s = _score_timed(workload, models, val_set, device)
                    target_s = _target_score_timed(workload, models, val_set, device, score_s)
                else:
                    metrics = score(workload, models, val_set, device, limit=1 if warm_only else PREFLIGHT_VAL_BATCHES)
            del models
    except TunerError:
        raise
    except SetupTimeout as err:
        if warm_only:  # a trial's warm-up: the trial records it as its own, with the user's line (issue 37)
            raise
        raise WorkloadError(f"workload {ref.text}: {err}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # the user's code raised (or called sys.exit()): their line, their file
        raise WorkloadError(f"workload {ref.text}: {stage} raised {user_error_line(err)}") from err
    finally:
        device.free_memory()
    numeric = [k for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    quality = None
    if workload.quality is not None:
        name, direction = workload.quality
        if name not in metrics:
            returned = sorted(k for k in metrics if k != "quality_seconds")
            raise WorkloadError(f"workload {ref.text}: quality metric {name!r} is not among what evaluate() returns "
                                f"({', '.join(returned) or 'nothing'}); return it, or fix Workload.quality")
        if name not in numeric:  # the one rule `tuner train` and `tuner search` share: a quality is a number
            value = metrics[name]
            raise WorkloadError(f"workload {ref.text}: evaluate() returns quality metric {name!r} as "
                                f"{_short(value)} ({type(value).__name__}), not a number; return a float")
        quality = Objective(metric=name, direction=direction)
    return WorkloadCheck(ref=ref, name=workload.name or ref.text, quality=quality, metrics=numeric, heavy=heavy,
                         info=dict(workload.info), step_seconds=step_s, score_seconds=score_s, own=own_params(workload),
                         own_batch=workload.batch_size, target_score_seconds=target_s,
                         target_eval_samples=workload.target_eval_samples,
                         step_samples=min(cfg.params.batch_size, len(train_set)) * cfg.params.accumulation_steps,
                         batch_statistics=batch_stats)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def preflight(cfg: TrialConfig, cache_dir: Path, device: Device | None = None) -> tuple[Device, WorkloadCheck]:
    """Everything `tuner train` checks before it trains: device, precision, pin_memory, TF32, FID weights, the
    workload. A config that gives no batch_size trains at the workload's own (Workload.batch_size): `cfg.params`
    takes it, and the check times it there (check_workload's `at_batch`: built and checked once, not again at the
    batch). The workload check runs in a forked child on a Linux CPU (`_apart`), else in this process, where the
    first call also pays its one-time costs outside any timed region."""
    device = device or resolve_device(cfg.params.device)
    device.check_precision(cfg.params.precision)
    check_device(cfg.params, device)  # pin_memory, cudnn_benchmark, tf32 where the device lacks them
    device.check_compile(cfg.params.compile)
    if cfg.quality.enabled and cfg.quality.fid_features == "inception":
        from tuner.measure.fid import check_fid_weights

        check_fid_weights(cfg.quality)
    given = cfg.params.model_fields_set & set(heavy_knobs())  # the effective batch's factors

    def at_own(own: int | None) -> tuple[TrialConfig, None]:
        if own is None or given or own == cfg.params.effective_batch:
            return cfg, None
        return cfg.model_copy(update={"params": cfg.params.model_copy(update={"batch_size": own})}), None

    check = _check(cfg, Path(cache_dir), device, at_own)
    cfg.params = at_own(check.own_batch)[0].params  # the user's batch, timed there
    return device, check


def _check(cfg: TrialConfig, cache_dir: Path, device: Device, at_batch: Any) -> WorkloadCheck:
    if _apart(device):  # its own process: the run's allocator starts as the user's own run's would
        _import_once(cfg.workload)
        return in_child(lambda: check_workload(cfg, cache_dir, device, at_batch=at_batch))
    with torch.random.fork_rng(devices=[]):  # the check must not shift the run's random stream
        return check_workload(cfg, cache_dir, device, at_batch=at_batch)


def _import_once(workload: str) -> None:
    """Import here, before the fork, what the child's check and the run after it would each import: torch's first
    optimizer imports torch._dynamo (Optimizer.__init__'s disable wrapper), which the child paid and then the run
    paid again (1.0-1.7 s of a `tuner train` on 2 cores, measured); and the user's module, where a throw-away fork's
    import ended well and changed nothing the run reads (tuner.workload.import_changes: no thread, no CUDA, the
    same random state), so it is imported twice (that fork, here) instead of three times. An import frees no large
    block, so the run's allocator is left as it was."""
    import torch._dynamo  # noqa: F401

    ref = resolve_workload(workload)
    if not ref.builtin and not import_changes(ref):
        try:
            import_factory(ref)
        except Exception:  # noqa: BLE001 - the check imports it again and reports it with the user's line
            pass


def _apart(device: Device) -> bool:
    """Whether the check runs in a forked child: on Linux, on the CPU, outside DDP. The check allocates and frees
    the workload's largest tensors (a step, an evaluation), and glibc's malloc raises its mmap and trim thresholds
    to the largest block freed: a run after it in the same process kept its step's tensors on the heap and read
    10-15% faster than the user's own fresh process, which maps and faults them in every step (issue 58, the
    lab notes' env-fidelity). On a GPU the CUDA context cannot cross a fork, and under DDP the ranks check in
    step; there the check stays in the process."""
    import os
    import sys

    return sys.platform == "linux" and device.kind == "cpu" and int(os.environ.get("WORLD_SIZE", "1")) <= 1
