"""A study's numerics parity: before the first trial, each numerics knob value the space may pick on this device (a
precision other than fp32, TF32, a compile mode) trains the same steps as fp32 from the same seed and batches,
beside fp32 with other seeds (_arms.py). The verdicts are kept in the study folder (parity.json, read again on
--resume), shown at the study's start, in the report and in the export's header: a value within seed noise costs
nothing a user could see; one that drifts or diverged is named, and its trials' quality is what decides it. Each
verdict is kept in the reports' cache too (_cache.py): a later study of the same workload on the same machine
reuses it, a verdict of the full STUDY_STEPS even where this study's cap would check fewer steps or none."""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tuner.knobs import numerics_knobs
from tuner.parity import _arms
from tuner.parity._cache import (
    CACHE_FOLDER, CachedVerdict, holds_verdicts, machine_numerics, read_cached, verdict_key, workload_identity,
)
from tuner.parity._judge import YARDSTICK_SEEDS
from tuner.space import Space
from tuner.study import PARITY_FILE, KnobParity, StudyParity, read_parity

STUDY_STEPS = 100  # per arm in a study (the CLI's default is 200): the built-ins' verdicts were settled by 50
# A study's check, at most, by the pre-flight's step time (--parity-seconds): a ResNet-18 at 112x112 on 2 CPUs
# (1.2 s a step) spent 7 of its study's 8 minutes in 4 runs of 100 steps. Longer is cut to fewer steps (the
# verdict says so), and not run where fewer than MIN_STEPS fit: `tuner parity` checks such a model apart.
PARITY_SECONDS = 120.0
MIN_STEPS = 25  # fewer steps tell little (the built-ins' gaps settle after 20-50): the trials' quality decides


def numerics_candidates(space: Space, context: dict[str, Any]) -> list[dict[str, Any]]:
    """The numerics knob values a study of `space` may run on this device, each as its own set of knobs: the
    searched ones' values other than fp32's, and a fixed one that is not fp32's."""
    resolved = space.resolve(context, strict=False)
    reachable = set(resolved.reachable(context))
    out: list[dict[str, Any]] = []
    for name in numerics_knobs():
        spec = resolved.params.get(name)
        if spec is None or (not spec.fixed and name not in reachable):
            continue
        for value in spec.endpoints() if not spec.fixed else [spec.value]:
            if value != _arms.FP32.get(name) and {name: value} not in out:
                out.append({name: value})
    return out


Sizer = Callable[[list[dict[str, Any]]], "tuple[int, str | None, str | None]"]  # parity_run with its caps bound


def parity_task(cfg_json: str, knob_sets: list[dict[str, Any]], cache_dir: str, sized: Sizer, full: int,
                announce: Callable[[list[dict[str, Any]], int, str | None], None] | None = None) -> StudyParity:
    """On a trial's resources (whose machine the verdicts are of): the study's check. Each verdict comes from the
    cache where it holds one of `full` steps (an earlier uncapped study's: it holds whatever this study's cap) or
    of the steps `sized` gives the rest (parity_run: fewer under a cap, none where too few fit); the rest are
    checked and kept there. `announce` is told the knob sets about to be checked, their steps and cap."""
    from tuner.config import parse_config
    from tuner.device import resolve_device
    from tuner.files import atomic_write

    cfg = parse_config(json.loads(cfg_json), "parity")
    identity = workload_identity(cfg.workload)
    machine = machine_numerics(resolve_device(cfg.params.device)) if identity is not None else None
    found: list[KnobParity | None] = [None] * len(knob_sets)
    entries: list[tuple[Path, dict[str, Any]] | None] = [None] * len(knob_sets)

    def look_up(steps: int) -> None:
        """Fill `found` from the cache's verdicts of `steps` steps; `entries`: where each missing one goes."""
        if identity is None:
            return
        for i, knobs in enumerate(knob_sets):
            if found[i] is None:
                key, parts = verdict_key(_arms.arm_config(cfg, _arms.FP32), knobs, steps, machine or {}, identity)
                entries[i] = (path := Path(cache_dir) / CACHE_FOLDER / f"{key}.json", parts)
                if (kept := read_cached(path)) is not None:
                    found[i] = KnobParity(knobs=knobs, **kept.model_dump(exclude={"parts"}), cached=True,
                                          cache_file=str(path))

    look_up(full)
    missing = [i for i, f in enumerate(found) if f is None]
    steps, capped, skipped = sized([knob_sets[i] for i in missing]) if missing else (full, None, None)
    if missing and not skipped and steps != full:
        look_up(steps)
        missing = [i for i, f in enumerate(found) if f is None]
    if missing and not skipped:
        if announce is not None:
            announce([knob_sets[i] for i in missing], steps, capped)
        verdicts = _arms.check_parity(cfg, [knob_sets[i] for i in missing], steps, Path(cache_dir))
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        for i, v in zip(missing, verdicts):
            entry = CachedVerdict(state=v.state, text=v.text(), gap=v.gap, seed_gap=v.seed_gap,
                                  from_step=v.from_step, checked_at=now, parts=(entries[i] or (None, {}))[1])
            found[i] = KnobParity(knobs=knob_sets[i], **entry.model_dump(exclude={"parts"}))
            if entries[i] is not None:
                try:
                    atomic_write(entries[i][0], entry.model_dump_json(indent=1))  # type: ignore[index]
                except OSError:
                    pass  # a cache that cannot be written costs the next study the check, nothing else
    return StudyParity(steps=full if skipped and any(f is not None for f in found) else steps,
                       verdicts=[f for f in found if f is not None], skipped=skipped,
                       unchecked=[knob_sets[i] for i in missing] if skipped else [],
                       capped_from=full if capped else None, capped_by=capped)


def parity_run(knob_sets: list[dict[str, Any]], step_s: float | None, cap_s: float | None,
               allowance: tuple[float, float] | None = None, full: int | None = None) -> tuple[int, str | None, str | None]:
    """(steps per run, what capped them, why the check is not run) for a study whose pre-flight took `step_s`
    seconds an optimizer step (None: not timed on the trials' device, a cluster's: `full`, STUDY_STEPS, as always)
    under a cap of `cap_s` seconds (None: PARITY_SECONDS; 0: not run) and, with --study-seconds T, `allowance` (T,
    the share of it the check may take: tuner.search._allowance.Allowance.parity_share). The runs are fp32, one
    per knob set and YARDSTICK_SEEDS more fp32 seeds."""
    full = STUDY_STEPS if full is None else full
    cap = PARITY_SECONDS if cap_s is None else cap_s
    named = ", ".join(f"{k}={v}" for s in knob_sets for k, v in s.items())
    decides = f"the trials' quality decides {named}"
    if cap <= 0:
        return 0, None, f"--parity-seconds 0: {decides}"
    if not step_s or step_s <= 0:
        return full, None, None
    by, more = f"--parity-seconds {cap:g}", None
    if allowance is not None and allowance[1] < cap:  # the allowance holds less than the cap: its share decides
        cap = max(0.0, allowance[1])
        by, more = f"--study-seconds {allowance[0]:g} ({cap:.0f} s of it)", allowance[0]
    runs = len(knob_sets) + 1 + YARDSTICK_SEEDS
    fit = int(cap / (runs * step_s))
    if fit >= full:
        return full, None, None
    if fit < MIN_STEPS:
        need = runs * MIN_STEPS * step_s
        give = (f"give --study-seconds {math.ceil((more + 2 * (need - cap)) / 10) * 10:g}" if more is not None else
                f"give --parity-seconds {math.ceil(need / 10) * 10:g}")
        return 0, None, (f"{runs} runs of {MIN_STEPS} steps at the pre-flight's {step_s:.3g} s a step need about "
                         f"{_duration(need)}, over {by}; {decides} ({give} to check it in the study, or check "
                         f"it apart with `tuner parity`)")
    return fit, f"{by} at {step_s:.3g} s a step", None


def _duration(seconds: float) -> str:
    """`50 s`, `17 min`: a planned wall time, in the unit a user reads it in."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def plan_parity(plan: Any, space: Space, context: dict[str, Any], base: dict[str, Any], resources: Any,
                console: Any, in_process: bool, allowance: Any = None,
                ends_study: Callable[[BaseException, str], None] | None = None) -> StudyParity | None:
    """Run the study's parity check once (a resumed study reads the one it ran), keep it in the folder, show it.
    Under --study-seconds (`allowance`, tuner.search._allowance.Allowance) it takes at most its share of the time
    left, so the check cannot spend what the trials and the confirmation were promised. A check that fails is
    recorded and the study goes on, unless `ends_study` (the search's rule, given the error and where it met it)
    raises: a set-up timeout ends the study here, before anything is kept."""
    from tuner.config import dump_config

    folder = plan.folder
    stored = read_parity(folder.path)
    if stored is not None or plan.resume:
        return stored
    knob_sets = numerics_candidates(space, context)
    if not knob_sets:
        return None
    baseline = space.baseline_point(context, own=plan.own)
    step_s = plan.preflight.step_seconds
    share = (allowance.seconds, allowance.parity_share()) if allowance is not None else None
    sized = functools.partial(parity_run, step_s=step_s, cap_s=plan.options.parity_seconds, allowance=share,
                              full=STUDY_STEPS)
    steps, capped, skipped = sized(knob_sets)
    if steps == 0 and plan.options.parity_seconds == 0:  # turned off: not even the cache decides
        return _keep(folder, StudyParity(steps=0, skipped=skipped, unchecked=knob_sets), console)

    def announce(sets: list[dict[str, Any]], steps: int, capped: str | None) -> None:
        if console is not None:
            which = ", ".join(f"{k}={v}" for s in sets for k, v in s.items())
            runs = len(sets) + 1 + YARDSTICK_SEEDS
            took = (f", about {_duration(runs * steps * step_s)} at the pre-flight's {step_s:.3g} s a step"
                    if step_s else "")
            cut = f" (capped from {STUDY_STEPS} by {capped}: `tuner parity` checks longer)" if capped else ""
            console.print(f"checking numerics against fp32 ({which}): {steps} steps each{cut}, beside fp32 with "
                          f"{YARDSTICK_SEEDS} other seeds ({runs} runs{took}) ...", soft_wrap=True)

    if skipped and not in_process and not plan.options.address and not holds_verdicts(plan.cache_dir):
        # the task would only read an empty cache: a worker's start (and CUDA's) for nothing
        return _keep(folder, StudyParity(steps=0, skipped=skipped, unchecked=knob_sets), console)
    if not in_process and not skipped:  # a Ray task cannot print here: said before it starts, cached or not
        announce(knob_sets, steps, capped)
    t0 = time.perf_counter()
    try:
        cfg = space.trial_config({k: v for k, v in baseline.items() if k not in numerics_knobs()}, base,
                                 source="parity")
        args = (json.dumps(dump_config(cfg)), knob_sets, str(plan.cache_dir), sized, STUDY_STEPS)
        if in_process:
            result = parity_task(*args, announce=announce)
        else:
            import ray

            task = ray.remote(num_cpus=resources.cpus_per_trial, num_gpus=resources.gpus_per_trial or 0)(parity_task)
            result = ray.get(task.remote(*args))
        result.seconds = time.perf_counter() - t0
    except Exception as err:  # noqa: BLE001 - the trials will say what is wrong with the workload; search on
        from tuner.errors import error_line

        if ends_study is not None:
            ends_study(err, "the numerics parity check")  # not once more in the probes and every trial
        result = StudyParity(steps=steps, seconds=time.perf_counter() - t0, error=error_line(err))
    return _keep(folder, result, console)


def _keep(folder: Any, result: StudyParity, console: Any) -> StudyParity:
    """Write the study's parity check into its folder and show it: run, skipped or failed alike."""
    folder.write_file(folder.path / PARITY_FILE, result.model_dump_json(indent=1))
    if console is not None:
        from rich.markup import escape

        for line in result.lines():
            console.print(escape(line), soft_wrap=True)
        for v in result.verdicts:
            if v.cached:
                console.print(escape(f"  (kept from an earlier study on this machine: delete {v.cache_file} to "
                                     f"check {', '.join(f'{k}={x}' for k, x in v.knobs.items())} again)"),
                              soft_wrap=True)
    return result
