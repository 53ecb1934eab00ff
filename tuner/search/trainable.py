"""What runs inside a Ray Tune trial: sampled params -> validated TrialConfig -> the training engine -> one report.

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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tuner.errors import error_line
from tuner.search.outcome import penalty
from tuner.search.shared_cache import SharedFiles
from tuner.search.space import Space, check_finite
from tuner.study import Objective, StudyFolder, TrialRecord

# Keys of the dict a trial reports to Tune (objective keys are objective_key(o)).
STATE_KEY = "tuner_state"
FEASIBLE_KEY = "tuner_feasible"
RECORD_KEY = "tuner_record"
# Reports made while a trial trains (issue 20): every report carries BUDGET_KEY; a report that closes a rung also
# carries RUNG_KEY (0-based) and the objective values measured at that rung, under objective_key(o).
BUDGET_KEY = "tuner_budget_used"  # the trial budget used so far, in the budget's unit (seconds or samples)
RUNG_KEY = "tuner_rung"
# Config keys the searcher adds beside the sampled params.
TRIAL_KEY = "_trial"
WALL_KEY = "_wall_limit_s"
REPEAT_KEY = "_repeat"  # a confirmation re-run of trial TRIAL_KEY (see tuner.search.confirm)
RERUN_KEY = "_rerun"  # a re-run's Tune config holds its trial's config under this key

Engine = Callable[..., Any]  # tuner.train.run_trial's signature


def objective_key(o: Objective) -> str:
    return f"objective_{o.metric}"


@dataclass(frozen=True)
class TrialSetup:
    """Everything a trial needs besides its sampled params; shipped once to the workers (tune.with_parameters)."""

    space: Space
    base: dict[str, Any]  # workload, dataset, budget, gpus, params.device
    objectives: list[Objective]
    study_dir: str
    cache_dir: str
    engine: Engine | None = None  # None: tuner.train.run_trial
    ddp_workers: int = 0  # > 1: run the trial as a Ray Train TorchTrainer with this many workers
    ddp_use_gpu: bool = True
    ddp_cpus_per_worker: float = 1.0
    shared_files: SharedFiles | None = None  # the driver's FID cache, installed on the trial's node before it runs


def searched_params(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if not k.startswith("_")}


def run_one(config: dict[str, Any], setup: TrialSetup, *, rank: int = 0) -> dict[str, Any]:
    """Run one trial in this process and return the report for Tune (see tune_payload)."""
    from tuner.config import dump_config

    number = int(config[TRIAL_KEY])
    where: dict[str, Any] = {"trial": number, "params": searched_params(config), "config": None,
                             "wall_limit_s": config.get(WALL_KEY), "started": _now(), "host": socket.gethostname(),
                             "node": ray_node_id()}
    t0 = time.perf_counter()
    try:
        cfg = setup.space.trial_config(where["params"], setup.base, source=f"trial {number}")
        where["config"] = dump_config(cfg)
        engine = setup.engine
        if engine is None:
            from tuner.train import run_trial as engine

            c = where["config"]  # what the one-time costs depend on: the workload and the device, not the knobs
            warm_process(json.dumps({k: c.get(k) for k in ("workload", "workload_options", "dataset", "quality")}
                                    | {"params": {"device": c["params"].get("device", "auto")}}, sort_keys=True),
                         setup.cache_dir)
        out_dir = StudyFolder(Path(setup.study_dir)).trial_dir(number) if rank == 0 else None
        if out_dir is not None and config.get(REPEAT_KEY) is not None:  # a re-run keeps its grid apart
            out_dir = out_dir / "confirm" / f"{int(config[REPEAT_KEY]):02d}"
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
        cache_dir = Path(setup.cache_dir)
        if setup.shared_files is not None:  # the driver's FID extractor, whichever node this is
            cache_dir = setup.shared_files.install(cache_dir)
        extra: dict[str, Any] = {}
        if setup.engine is None:  # tuner's own engine: the study's ceiling cache
            from tuner.measure.ceiling import CeilingCache

            extra["ceilings"] = CeilingCache(StudyFolder(Path(setup.study_dir)).ceilings_path)
            # Ceilings only where a verdict is read: the confirmation re-runs (the front), not every search trial
            # (they were a tenth of the default study's wall time); the report fills others from the cache.
            extra["measure_ceilings"] = config.get(REPEAT_KEY) is not None
        # What the workload prints goes to the worker's stderr: a driver that shows worker output (--verbose)
        # writes their stdout to its own, which holds `--format json`'s one document.
        with contextlib.redirect_stdout(sys.stderr):
            result = engine(cfg, cache_dir=cache_dir, out_dir=out_dir, wall_limit_s=where["wall_limit_s"], **extra)
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
    except BaseException as err:  # a bad combination (TunerError), a bug or a user's sys.exit(): an error trial
        record = TrialRecord(state="error", error=error_line(err), **where)
    record.run_seconds = round(time.perf_counter() - t0, 3)
    record.ended = _now()
    return tune_payload(record, setup.objectives)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@functools.lru_cache(maxsize=4)
def warm_process(config_json: str, cache_dir: str) -> None:
    """Pay this process's one-time costs (imports, dataset caches, the CUDA context, the FID extractor and its
    statistics) before its first timed trial, by building the workload as the pre-flight check does; once per
    workload per process (a reused Ray actor runs many trials). Without it the first trial of a study - the
    baseline - ran cold and read about half the throughput of similar later trials."""
    from tuner.config import parse_config
    from tuner.device import resolve_device
    from tuner.train import check_workload

    cfg = parse_config({k: v for k, v in json.loads(config_json).items() if v is not None}, "trial config")
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the workload's prints: see run_one
            check_workload(cfg, Path(cache_dir), resolve_device(cfg.params.device))
    except (Exception, SystemExit):  # noqa: BLE001 - the trial itself meets the same problem and records it
        pass


def ray_node_id() -> str | None:
    """The Ray node this process runs on (hex node id), or None outside Ray."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except Exception:  # noqa: BLE001 - bookkeeping only: a trial never fails for it
        return None


def tune_payload(record: TrialRecord, objectives: list[Objective]) -> dict[str, Any]:
    """Finite objective values (penalties unless the trial completed with every objective measured)."""
    values = [record.get(o.metric) for o in objectives]
    feasible = record.complete and check_finite(values)
    if record.complete and not feasible:
        missing = [o.metric for o, v in zip(objectives, values) if not check_finite([v])]
        record.error = record.error or f"no finite value for objective(s) {', '.join(missing)}"
    out: dict[str, Any] = {
        objective_key(o): float(v) if feasible else penalty(o) for o, v in zip(objectives, values)
    }
    out[STATE_KEY] = record.state
    out[FEASIBLE_KEY] = bool(feasible)
    out[RECORD_KEY] = json.dumps(record.to_json())
    return out


def record_from_payload(result: dict[str, Any] | None) -> TrialRecord | None:
    if not result or RECORD_KEY not in result:
        return None
    return TrialRecord.model_validate(json.loads(result[RECORD_KEY]))


def trainable(config: dict[str, Any], setup: TrialSetup) -> None:
    """The Ray Tune function trainable: one report, then return."""
    from ray import tune

    if RERUN_KEY in config:  # a confirmation re-run: the trial's own config, as the search ran it
        config = dict(config[RERUN_KEY])
    if setup.ddp_workers > 1:
        from tuner.search.ddp import run_ddp_trial

        run_ddp_trial(config, setup)  # rank 0's report reaches Tune through TuneReportCallback
        return
    tune.report(run_one(config, setup))
