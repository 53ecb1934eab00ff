"""A study's numerics parity (tuner.train.parity): before the first trial, each numerics knob value the space may
pick on this device (a precision other than fp32, TF32, a compile mode) trains the same steps as fp32 from the same
seed and batches, beside fp32 with another seed. The verdicts are kept in the study folder (parity.json, read again
on --resume), shown at the study's start, in the report and in the export's header: a value within seed noise
costs nothing a user could see; one that drifts or diverged is named, and its trials' quality is what decides it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tuner.knobs import numerics_knobs
from tuner.space import Space
from tuner.study import KnobParity, StudyParity, read_parity

STUDY_STEPS = 100  # per arm in a study (the CLI's default is 200): the built-ins' verdicts were settled by 50


def numerics_candidates(space: Space, context: dict[str, Any]) -> list[dict[str, Any]]:
    """The numerics knob values a study of `space` may run on this device, each as its own set of knobs: the
    searched ones' values other than fp32's, and a fixed one that is not fp32's."""
    from tuner.train import FP32

    resolved = space.resolve(context, strict=False)
    reachable = set(resolved.reachable(context))
    out: list[dict[str, Any]] = []
    for name in numerics_knobs():
        spec = resolved.params.get(name)
        if spec is None or (not spec.fixed and name not in reachable):
            continue
        for value in spec.endpoints() if not spec.fixed else [spec.value]:
            if value != FP32.get(name) and {name: value} not in out:
                out.append({name: value})
    return out


def parity_task(cfg_json: str, knob_sets: list[dict[str, Any]], steps: int, cache_dir: str) -> list[dict[str, Any]]:
    """On a trial's resources: the verdicts, as plain data (what crosses Ray)."""
    from tuner.config import parse_config
    from tuner.train import check_parity

    cfg = parse_config(json.loads(cfg_json), "parity")
    verdicts = check_parity(cfg, knob_sets, steps, Path(cache_dir))
    return [{"state": v.state, "text": v.text(), "gap": v.gap, "seed_gap": v.seed_gap, "from_step": v.from_step}
            for v in verdicts]


def plan_parity(plan: Any, space: Space, context: dict[str, Any], base: dict[str, Any], resources: Any,
                console: Any, in_process: bool) -> StudyParity | None:
    """Run the study's parity check once (a resumed study reads the one it ran), keep it in the folder, show it."""
    from tuner.config import dump_config

    folder = plan.folder
    stored = read_parity(folder.path)
    if stored is not None or plan.resume:
        return stored
    knob_sets = numerics_candidates(space, context)
    if not knob_sets:
        return None
    baseline = space.baseline_point(context, own=plan.own)
    if console is not None:
        which = ", ".join(f"{k}={v}" for s in knob_sets for k, v in s.items())
        console.print(f"checking numerics against fp32 ({which}): {STUDY_STEPS} steps each, beside fp32 with another "
                      f"seed ...", soft_wrap=True)
    t0 = time.perf_counter()
    try:
        cfg = space.trial_config({k: v for k, v in baseline.items() if k not in numerics_knobs()}, base,
                                 source="parity")
        args = (json.dumps(dump_config(cfg)), knob_sets, STUDY_STEPS, str(plan.cache_dir))
        if in_process:
            found = parity_task(*args)
        else:
            import ray

            task = ray.remote(num_cpus=resources.cpus_per_trial, num_gpus=resources.gpus_per_trial or 0)(parity_task)
            found = ray.get(task.remote(*args))
        result = StudyParity(steps=STUDY_STEPS, seconds=time.perf_counter() - t0,
                             verdicts=[KnobParity(knobs=s, **v) for s, v in zip(knob_sets, found)])
    except Exception as err:  # noqa: BLE001 - the trials will say what is wrong with the workload; search on
        from tuner.errors import error_line

        result = StudyParity(steps=STUDY_STEPS, seconds=time.perf_counter() - t0, error=error_line(err))
    folder.write_file(folder.path / "parity.json", result.model_dump_json(indent=1))
    if console is not None:
        from rich.markup import escape

        for line in result.lines():
            console.print(escape(line), soft_wrap=True)
    return result
