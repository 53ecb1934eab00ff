"""What runs inside a Ray Tune trial: sampled params -> validated TrialConfig -> the training engine -> one report.

Every outcome is reported, never raised: a bad combination, an out-of-memory, a diverged loss or a bug in a trial
becomes a record with a state and a reason, so the study goes on and the sampler learns from it. The report
holds finite objective values only (a penalty when the trial failed; Optuna must never see NaN), plus the full
record as JSON for the driver to persist.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.errors import error_line
from tuner.search.space import Objective, Space, check_finite

# Keys of the dict a trial reports to Tune (objective keys are objective_key(o)).
STATE_KEY = "tuner_state"
FEASIBLE_KEY = "tuner_feasible"
RECORD_KEY = "tuner_record"
# Config keys the searcher adds beside the sampled params.
TRIAL_KEY = "_trial"
WALL_KEY = "_wall_limit_s"
# A failed trial's objective values: finite (never NaN), and worse than anything real.
PENALTY = 1e12

Engine = Callable[..., Any]  # tuner.train.run_trial's signature


def objective_key(o: Objective) -> str:
    return f"objective_{o.metric}"


def penalty(o: Objective) -> float:
    return -PENALTY if o.direction == "maximize" else PENALTY


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


def searched_params(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if not k.startswith("_")}


def run_one(config: dict[str, Any], setup: TrialSetup, *, rank: int = 0) -> dict[str, Any]:
    """Run one trial in this process and return the report for Tune (see tune_payload)."""
    from tuner.config import dump_config
    from tuner.report.trials import trial_dir

    number = int(config[TRIAL_KEY])
    wall_limit = config.get(WALL_KEY)
    record: dict[str, Any] = {"trial": number, "state": "error", "error": None,
                              "params": searched_params(config), "config": None, "wall_limit_s": wall_limit}
    t0 = time.perf_counter()
    try:
        cfg = setup.space.trial_config(record["params"], setup.base, source=f"trial {number}")
        record["config"] = dump_config(cfg)
        engine = setup.engine
        if engine is None:
            from tuner.train import run_trial as engine
        out_dir = trial_dir(Path(setup.study_dir), number) if rank == 0 else None
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
        result = engine(cfg, cache_dir=Path(setup.cache_dir), out_dir=out_dir, wall_limit_s=wall_limit)
        record.update(result.to_dict())
    except MemoryError as err:  # host RAM: the same lesson as a GPU out-of-memory
        record.update(state="oom", error=error_line(err))
    except Exception as err:  # a bad combination (TunerError) or a bug: an error trial, not a crashed study
        record.update(state="error", error=error_line(err))
    record["run_seconds"] = round(time.perf_counter() - t0, 3)
    return tune_payload(record, setup.objectives)


def tune_payload(record: dict[str, Any], objectives: list[Objective]) -> dict[str, Any]:
    """Finite objective values (penalties unless the trial completed with every objective measured)."""
    values = [record.get(o.metric) for o in objectives]
    feasible = record.get("state") == "complete" and check_finite(values)
    if record.get("state") == "complete" and not feasible:
        missing = [o.metric for o, v in zip(objectives, values) if not check_finite([v])]
        record["error"] = record.get("error") or f"no finite value for objective(s) {', '.join(missing)}"
    out: dict[str, Any] = {
        objective_key(o): float(v) if feasible else penalty(o) for o, v in zip(objectives, values)
    }
    out[STATE_KEY] = str(record.get("state"))
    out[FEASIBLE_KEY] = bool(feasible)
    out[RECORD_KEY] = json.dumps(record, default=str)
    return out


def record_from_payload(result: dict[str, Any] | None) -> dict[str, Any] | None:
    if not result or RECORD_KEY not in result:
        return None
    return json.loads(result[RECORD_KEY])


def trainable(config: dict[str, Any], setup: TrialSetup) -> None:
    """The Ray Tune function trainable: one report, then return."""
    from ray import tune

    if setup.ddp_workers > 1:
        from tuner.search.ddp import run_ddp_trial

        run_ddp_trial(config, setup)  # rank 0's report reaches Tune through TuneReportCallback
        return
    tune.report(run_one(config, setup))
