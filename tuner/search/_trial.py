"""The trial side of a search: sampled params -> validated TrialConfig -> the training engine -> reports.

A trial reads its TrialOrder from Tune's config and speaks in the protocol's reports (tuner.search._protocol):
while it trains, each timed window and, under a rung scheduler, each rung it closes (the objective values there and
the `stopped` record the driver keeps if the scheduler stops it there); its last report is the FinalReport.

The pieces a trial process uses, whether Tune runs it (_trainable.py) or a Ray Train worker of a DDP trial does
(_ddp.py); both import this module and it imports neither.

Every outcome is reported, never raised: a bad combination, an out-of-memory, a diverged loss or a bug in a trial
becomes a record with a state and a reason, so the study goes on and the sampler learns from it. The report
holds finite objective values only (a penalty when the trial failed; Optuna must never see NaN), plus the full
record as JSON for the driver to persist.
"""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.errors import error_line
from tuner.search._outcome import penalty
from tuner.search._protocol import (FinalReport, PhaseReport, RungReport, TrialLimits, TrialOrder, WindowReport,
                                    to_tune)
from tuner.search._shared_cache import SharedFiles
from tuner.space import Space, check_finite
from tuner.study import Objective, Preflight, StudyFolder, TrialRecord

if TYPE_CHECKING:
    from tuner.measure.ceiling import CeilingCache

# train_trial's signature: (cfg, *, cache_dir, out_dir, wall_limit_s, setup, reporter, measure_ceilings,
# score_reserve_s, preflight_pace_s) -> TrialResult
Engine = Callable[..., Any]


def budget_limits(preflight: Preflight) -> TrialLimits:
    """The limits every trial of a study gets from its pre-flight (SearchPlan.preflight), so search trials, the
    baseline and the confirmation re-runs keep scoring inside their budget as `tuner train` does."""
    return TrialLimits(score_reserve_s=preflight.score_seconds or None, preflight_pace_s=preflight.pace())


def learned_reserve(limits: TrialLimits, measured: list[float]) -> TrialLimits:
    """The scoring reserve once trials have scored: the pre-flight scales two cold validation batches to the whole
    split and can over-estimate many times over (a nanoGPT study reserved 3.9 s for a 0.6 s scoring), which takes
    training time from every trial. So the next trials keep 1.25x the longest of the last five measured scorings
    when that is less; never more than the estimate, since a slower trial's own pace already grows its reserve
    (tuner.train.trial). A study without an estimate (a cluster's, `--address`: no pre-flight on the trials'
    device) keeps the learned reserve as it is, once its first trial has scored."""
    if not measured:
        return limits
    learned = 1.25 * max(measured[-5:])
    estimate = limits.score_reserve_s
    return replace(limits, score_reserve_s=learned if estimate is None else min(float(estimate), learned))


def trained(records: list[TrialRecord]) -> list[float]:
    """The training times (train_seconds) of complete trials, oldest first: what a seconds budget's wall cap
    (tuner.search._outcome.wall_limit) learns from, for the search's trials and the confirmation's re-runs."""
    return [float(s) for r in records if r.complete and (s := r.value("train_seconds")) is not None]


def scored(records: list[TrialRecord]) -> list[float]:
    """The measured scoring times (quality_seconds) of complete trials, oldest first: what learned_reserve learns
    from, for the searcher's later trials (one record at a time) and the confirmation (the study's records)."""
    return [float(s) for r in records if r.complete and (s := r.value("quality_seconds")) is not None]


@dataclass(frozen=True)
class TrialSetup:
    """Everything a trial needs besides its sampled params; shipped once to the workers (tune.with_parameters)."""

    space: Space
    base: dict[str, Any]  # workload, dataset, budget, gpus, params.device
    objectives: list[Objective]
    study_dir: str
    cache_dir: str
    ddp_workers: int = 0  # > 1: run the trial as a Ray Train TorchTrainer with this many workers
    ddp_use_gpu: bool = True
    ddp_cpus_per_worker: float = 1.0
    shared_files: SharedFiles | None = None  # the driver's FID cache, installed on the trial's node before it runs
    driver_host: str | None = None  # where the study folder is: there a trial never makes a deleted one again
    busy_wait_s: float | None = None  # --busy wait: before its timed work, a trial waits this long at most for quiet
    cpus: int | None = None  # the CPUs of a trial's process, whose share others take (tuner.measure.load)
    baseline_trial: int | None = None  # the study's baseline: the one search trial that reads its noise scale


def make_out_dir(setup: TrialSetup, out_dir: Path) -> Path | None:
    """The trial's folder for its artifacts (trials/NNNN). On the driver's host (the study folder's disk) it is made
    only inside the study folder as it is: a study deleted while it runs is not made again by its trials (None:
    nothing kept; the driver ends the search). On another node, its own disk, the folders are made as needed."""
    if setup.driver_host is None or setup.driver_host != socket.gethostname():
        out_dir.mkdir(parents=True, exist_ok=True)
        return out_dir
    here = Path(setup.study_dir)
    for part in out_dir.relative_to(here).parts:
        here = here / part
        try:
            here.mkdir(exist_ok=True)
        except FileNotFoundError:  # the study folder is gone
            return None
    return out_dir


def study_ceilings(setup: TrialSetup) -> CeilingCache:
    """The study's ceiling cache (and flops.json beside it: CeilingCache.sibling) as a trial writes it: on the
    driver's host it never makes a deleted study folder again (a trial's flops.json did, and the name was stuck:
    "not empty, add --resume" and "no study to resume"; issue 57); on another node the folders are made."""
    from tuner.measure.ceiling import CeilingCache

    here = setup.driver_host is not None and setup.driver_host == socket.gethostname()
    return CeilingCache(StudyFolder(Path(setup.study_dir)).ceilings_path, create=not here)


def train_trial(cfg: Any, *, cache_dir: Path, out_dir: Path | None, wall_limit_s: float | None,
                setup: TrialSetup, reporter: Any = None, measure_ceilings: bool = True,
                score_reserve_s: float | None = None, preflight_pace_s: float | None = None,
                measure_noise: bool = True) -> Any:
    """tuner's engine: this process warmed for the workload (warm_process), then tuner.train.run_trial with the
    study's ceiling cache. A child of a warmed fork server (tuner.search._fresh_server.warm_up) skips the
    warm-up: torch's and tuner's one-time costs were paid in the server, once for all its children, and what is
    left (the workload's build, its step's and evaluation's first calls at this trial's shapes) the trial pays
    itself before anything is timed: its build comes before the clock starts and the loop's warm-up steps run
    until the step time settles (tuner.train.loop). Repeated in every child, the warm-up built the workload a
    second time and ran a step and an evaluation on it: ~0.7 s a trial on a quiet 2-core CPU (issue 55)."""
    from tuner.config import dump_config
    from tuner.measure.ceiling import CeilingCache
    from tuner.search._fresh_server import WARMED
    from tuner.train import run_trial

    if WARMED:
        return run_trial(cfg, cache_dir=cache_dir, out_dir=out_dir, wall_limit_s=wall_limit_s,
                         ceilings=study_ceilings(setup), reporter=reporter,
                         measure_ceilings=measure_ceilings, score_reserve_s=score_reserve_s,
                         preflight_pace_s=preflight_pace_s, measure_noise=measure_noise)
    c = dump_config(cfg)  # what the one-time costs depend on: the workload and the device, not the knobs
    # (and the trial's setup_timeout_s: the warm-up builds the workload under it too)
    hung = warm_process(json.dumps({k: c.get(k) for k in ("workload", "workload_options", "dataset", "quality",
                                                          "setup_timeout_s")}
                                   | {"params": {"device": c["params"].get("device", "auto")}}, sort_keys=True),
                        setup.cache_dir)
    if hung is not None:  # the warm-up already waited the whole setup_timeout_s: not the trial again (issue 37)
        from tuner.study import TrialResult
        from tuner.workload import user_error_line, user_traceback

        return TrialResult(state="error", error=user_error_line(hung), traceback=user_traceback(hung))
    return run_trial(cfg, cache_dir=cache_dir, out_dir=out_dir, wall_limit_s=wall_limit_s,
                     ceilings=study_ceilings(setup), reporter=reporter,
                     measure_ceilings=measure_ceilings, score_reserve_s=score_reserve_s,
                     preflight_pace_s=preflight_pace_s, measure_noise=measure_noise)


class TrialReports:
    """The engine's reporter (tuner.train.reports) inside a search trial: each report becomes the protocol's, handed
    to `send` as Tune's plain dict (tune.report, or ray.train.report on every DDP rank).

    FIFO trials send their window reports too, though no scheduler reads them: they are made outside the timed
    windows, and one costs ~5 ms (200 bare tune.reports took 0.9-1.2 s in a trial on this 2-core host under load
    9-11), while a window lasts window_min_seconds (0.25 s) at least: 2% at worst, ~25 ms for the default 5 windows
    of a 15 s trial. For that, every trial reports alike (one path under both schedulers) and Tune's results show
    a FIFO trial's progress as it trains."""

    def __init__(self, rungs: list[float], objectives: list[Objective], where: dict[str, Any], t0: float,
                 send: Callable[[dict[str, Any]], None]) -> None:
        self.rungs = list(rungs)
        self.objectives, self.where, self.t0, self.send = objectives, where, t0, send

    def _send(self, payload: dict[str, Any]) -> None:
        try:
            self.send(payload)
        except SystemExit:  # Ray ends a trial its scheduler stopped by sys.exit() in the report that was waiting
            from tuner.train import StopTrial

            raise StopTrial() from None

    def window(self, report: WindowReport) -> None:
        self._send(to_tune(report))  # the engine's report is the protocol's (tuner.study.reports): no copy

    def phase(self, report: PhaseReport) -> None:
        self._send(to_tune(report))

    def rung(self, report: RungReport) -> None:
        record = TrialRecord.of(report.result, **self.where)
        record.run_seconds = round(time.perf_counter() - self.t0, 3)
        record.ended = _now()
        self._send(to_tune(rung_report(record, self.objectives)))


def rung_report(record: TrialRecord, objectives: list[Objective]) -> RungReport:
    """A rung's report: the objective values at the rung (penalties where one is not finite, so the scheduler
    ranks it last), the budget used and the `stopped` record."""
    values = [record.get(o.metric) for o in objectives]
    feasible = check_finite(values)
    return RungReport(rung=int(record.rung or 0), budget_used=float(record.measured_at or 0.0), result=record,
                      values={o.metric: float(v) if feasible else penalty(o) for o, v in zip(objectives, values)},
                      feasible=bool(feasible))


def run_one(config: dict[str, Any], setup: TrialSetup, *, rank: int = 0, engine: Engine = train_trial,
            send: Callable[[dict[str, Any]], None] | None = None, node: str | None = None) -> dict[str, Any]:
    """Run one trial (`config`: Tune's, holding its TrialOrder) in this process and return its FinalReport as
    Tune's dict; the reports made while it trains go to `send` (none without one). `node`: the Ray node, for a
    process outside Ray (_fresh.py)."""
    from tuner.config import dump_config
    from tuner.train import StopTrial

    order = TrialOrder.from_config(config)
    number, limits = order.trial, order.limits
    where: dict[str, Any] = {"trial": number, "params": order.searched, "config": None,
                             "wall_limit_s": limits.wall_limit_s, "started": _now(), "host": socket.gethostname(),
                             "node": node or ray_node_id()}
    t0 = time.perf_counter()
    try:
        cfg = setup.space.trial_config(where["params"], setup.base, source=f"trial {number}")
        if order.seed is not None:  # a confirmation re-run's own seed (tuner.search._confirm.rerun_seed)
            cfg = cfg.model_copy(update={"params": cfg.params.model_copy(update={"seed": int(order.seed)})})
        where["config"] = dump_config(cfg)
        out_dir = StudyFolder(Path(setup.study_dir)).trial_dir(number) if rank == 0 else None
        if out_dir is not None and order.rerun:  # a re-run keeps its grid apart
            out_dir = out_dir / "confirm" / f"{int(order.repeat or 0):02d}"
        if out_dir is not None:
            out_dir = make_out_dir(setup, out_dir)
        cache_dir = Path(setup.cache_dir)
        if setup.shared_files is not None:  # the driver's FID extractor, whichever node this is
            cache_dir = setup.shared_files.install(cache_dir)
        reporter = TrialReports(list(limits.rungs), setup.objectives, where, t0, send) if send is not None else None
        # Ceilings only where a verdict is read: the confirmation re-runs (the front), not every search trial
        # (they were a tenth of the default study's wall time); the report fills others from the cache.
        measure_ceilings = order.rerun
        # The noise scale only where it is read: the baseline's search run (efficiency is against its noise scale);
        # in every search trial the pass cost more than a short trial's training (tuner.train.noise.NOT_READ).
        measure_noise = not order.rerun and setup.baseline_trial is not None and number == setup.baseline_trial
        # What the workload prints goes to the worker's stderr: a driver that shows worker output (--verbose)
        # writes their stdout to its own, which holds `--format json`'s one document.
        with contextlib.redirect_stdout(sys.stderr):
            result = engine(cfg, cache_dir=cache_dir, out_dir=out_dir, wall_limit_s=where["wall_limit_s"], setup=setup,
                            reporter=reporter, measure_ceilings=measure_ceilings, measure_noise=measure_noise,
                            score_reserve_s=limits.score_reserve_s, preflight_pace_s=limits.preflight_pace_s)
        record = TrialRecord.of(result, **where)
        rebuilt = setup.shared_files.changed(cache_dir) if setup.shared_files is not None else []
        if rebuilt and record.complete:
            record.state = "error"
            record.error = (f"this node rebuilt the study's FID cache ({', '.join(rebuilt)}): its copy of the "
                            f"dataset differs from the driver's, so its quality does not compare with the other "
                            f"trials'")
    except MemoryError as err:  # host RAM: the same lesson as a GPU out-of-memory
        record = TrialRecord(state="oom", error=error_line(err), **where)
    except KeyboardInterrupt:
        raise
    except StopTrial:  # stopped at a rung: the driver keeps the rung report's record; end as Ray asked
        raise SystemExit(0) from None
    except BaseException as err:  # a bad combination (TunerError), a bug or a user's sys.exit(): an error trial
        record = TrialRecord(state="error", error=error_line(err), **where)
    record.run_seconds = round(time.perf_counter() - t0, 3)
    record.ended = _now()
    rungs = limits.rungs
    return to_tune(final_report(record, setup.objectives, top_rung=len(rungs) - 1 if rungs else None))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@functools.lru_cache(maxsize=4)
def warm_process(config_json: str, cache_dir: str) -> BaseException | None:
    """Pay this process's one-time costs (imports, dataset caches, the CUDA context, the FID extractor and its
    statistics) before its first timed trial, by building the workload as the pre-flight check does; once per
    workload per process (a reused Ray actor runs many trials). Without it the first trial of a study - the
    baseline - ran cold and read about half the throughput of similar later trials. Returns the set-up timeout
    it met (the trial records it rather than wait as long again), else None."""
    from tuner.config import parse_config
    from tuner.device import resolve_device
    from tuner.train import check_workload
    from tuner.train import SetupTimeout

    cfg = parse_config({k: v for k, v in json.loads(config_json).items() if v is not None}, "trial config")
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the workload's prints: see run_one
            check_workload(cfg, Path(cache_dir), resolve_device(cfg.params.device), warm_only=True)
    except SetupTimeout as err:
        return err
    except (Exception, SystemExit):  # noqa: BLE001 - the trial itself meets the same problem and records it
        pass
    return None


def ray_node_id() -> str | None:
    """The Ray node this process runs on (hex node id), or None outside Ray."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except Exception:  # noqa: BLE001 - bookkeeping only: a trial never fails for it
        return None


def final_report(record: TrialRecord, objectives: list[Objective], top_rung: int | None = None) -> FinalReport:
    """Finite objective values (penalties unless the trial completed with every objective measured); a trial that
    trained its whole budget under a rung scheduler also closes the top rung (`top_rung`) with them."""
    values = [record.get(o.metric) for o in objectives]
    feasible = record.complete and check_finite(values)
    if record.complete and not feasible and record.state != "not reached":  # not reached: a state, no error
        missing = [o.metric for o, v in zip(objectives, values) if not check_finite([v])]
        record.error = record.error or f"no finite value for objective(s) {', '.join(missing)}"
    out = {o.metric: float(v) if feasible else penalty(o) for o, v in zip(objectives, values)}
    if feasible and top_rung is not None and record.rung == top_rung and record.measured_at is not None:
        return FinalReport(values=out, feasible=True, record=record, rung=int(record.rung),
                           budget_used=float(record.measured_at))
    return FinalReport(values=out, feasible=bool(feasible), record=record)
