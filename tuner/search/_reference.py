"""The baseline's reference run of a `--target baseline` study, on a trial's resources: the one part of time to
target that trains, so it stands here, above tuner.train, while tuner.target (below it) derives the target from
what this returns (tuner.target.derive_study_target's `run`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def reference_run(resources: Any, in_process: bool) -> Callable[[str, str, float | None], dict[str, Any]]:
    """How the baseline's reference run trains: in this process (as the probes do when they can), else as a Ray task
    on one trial's resources. A setup that timed out ends the study here, not once more in every trial."""

    def run(cfg_json: str, cache_dir: str, score_reserve_s: float | None) -> dict[str, Any]:
        if in_process:
            found = baseline_curve(cfg_json, cache_dir, score_reserve_s)
        else:
            import ray

            task = ray.remote(num_cpus=resources.cpus_per_trial, num_gpus=resources.gpus_per_trial or 0)(
                baseline_curve)
            found = ray.get(task.remote(cfg_json, cache_dir, score_reserve_s))
        from tuner.search._hang import end_on_setup_timeout

        end_on_setup_timeout(found["error"], "the baseline's target run")  # not once more in every trial
        return found

    return run


def baseline_curve(cfg_json: str, cache_dir: str, score_reserve_s: float | None) -> dict[str, Any]:
    """On a trial's resources: the baseline's run with a target not yet set (it trains its whole budget, the
    reference budget tuner.target.derive_study_target gave it), as plain data (what crosses Ray): its state, error
    and quality curve."""
    from pathlib import Path

    from tuner.config import parse_config
    from tuner.train import run_trial

    cfg = parse_config(json.loads(cfg_json), "the baseline's target run")
    result = run_trial(cfg, cache_dir=Path(cache_dir), measure_ceilings=False, score_reserve_s=score_reserve_s)
    return {"state": result.state, "error": result.error, "curve": result.quality_curve}
