"""A study's numerics parity (tuner.train.parity): before the first trial, each numerics knob value the space may
pick on this device (a precision other than fp32, TF32, a compile mode) trains the same steps as fp32 from the same
seed and batches, beside fp32 with other seeds. The verdicts are kept in the study folder (parity.json, read again
on --resume), shown at the study's start, in the report and in the export's header: a value within seed noise
costs nothing a user could see; one that drifts or diverged is named, and its trials' quality is what decides it.

A verdict depends on nothing but the workload (its source, options, dataset), the config's params, the knob value,
the machine's numerics (device, CPU model and flags or GPU), torch and tuner, the steps and seeds, so each is kept
in the reports' cache too (<reports>/.cache/parity/<key>.json, `verdict_key`): a later study of the same workload
on the same machine reuses it (the check cost the default study 22 s on a bf16 CPU) and says so (`cached`), a
verdict of the full STUDY_STEPS even where this study's cap would check fewer steps or none. A workload whose source
cannot be told apart is checked every time; a damaged entry is checked again, never an error."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tuner.knobs import numerics_knobs
from tuner.measure.parity import YARDSTICK_SEEDS, State
from tuner.space import Space
from tuner.study import PARITY_FILE, KnobParity, StudyParity, read_parity

STUDY_STEPS = 100  # per arm in a study (the CLI's default is 200): the built-ins' verdicts were settled by 50
# A study's check, at most, by the pre-flight's step time (--parity-seconds): a ResNet-18 at 112x112 on 2 CPUs
# (1.2 s a step) spent 7 of its study's 8 minutes in 4 runs of 100 steps. Longer is cut to fewer steps (the
# verdict says so), and not run where fewer than MIN_STEPS fit: `tuner parity` checks such a model apart.
PARITY_SECONDS = 120.0
MIN_STEPS = 25  # fewer steps tell little (the built-ins' gaps settle after 20-50): the trials' quality decides
CACHE_FOLDER = "parity"  # under the reports' cache folder: one <key>.json per verdict
RECIPE = 2  # bump when the arms (tuner.train.parity) change: every cached verdict is then checked again


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


class CachedVerdict(BaseModel):
    """One verdict as the cache keeps it: the verdict, when it was checked, and what its key was made of (for a
    person reading the file; the key alone decides)."""

    state: State
    text: str
    gap: float | None = None
    seed_gap: float | None = None
    from_step: int | None = None
    checked_at: str  # ISO 8601, UTC
    parts: dict[str, Any] = {}


def _digest(files: list[Path], root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def workload_identity(text: str) -> dict[str, str] | None:
    """What tells the source of workload `text` apart: a built-in's name and the digest of tuner's built-in
    workloads' source; a file's name, function and the digest of the .py files it can import beside it; a
    package's likewise. None where the source is not found at its path here (it is then checked every time)."""
    import importlib.util

    from tuner.builtin import resolve_workload
    from tuner.workload import importable_sources

    try:
        ref = resolve_workload(text)
        if ref.builtin:
            import tuner.builtin

            folder = Path(tuner.builtin.__file__).parent
            return {"builtin": ref.text, "source": _digest(importable_sources(folder), folder)}
        if ref.file is not None:
            path = Path(ref.file)
            if not path.is_file():  # another node's copy, shipped by Ray (its cache is that node's too)
                return None
            return {"file": path.name, "attr": ref.attr, "source": _digest(importable_sources(path.parent), path.parent)}
        spec = importlib.util.find_spec(ref.module.split(".")[0])
        origin = Path(spec.origin) if spec is not None and spec.origin not in (None, "built-in", "frozen") else None
        if origin is None or not origin.is_file():
            return None
        root = origin.parent
        files = importable_sources(root) if origin.name == "__init__.py" else [origin]
        return {"module": ref.module, "attr": ref.attr, "source": _digest(files, root)}
    except Exception:  # noqa: BLE001 - an unreadable source is only a verdict checked again
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "CPU part"):
                    return value.strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def machine_numerics(device: Any) -> dict[str, Any]:
    """What decides this machine's rounding for a tuner Device: a GPU's name, compute capability, CUDA and cuDNN;
    a CPU's model, architecture, torch's vector ISA and the digest of its feature flags (bf16 among them)."""
    import platform

    import torch

    out: dict[str, Any] = {"device": device.describe(), "torch": torch.__version__}
    if device.is_cuda:
        idx = device.torch_device.index if device.torch_device.index is not None else torch.cuda.current_device()
        out.update(capability=list(torch.cuda.get_device_capability(idx)), cuda=torch.version.cuda,
                   cudnn=torch.backends.cudnn.version())
    else:
        from tuner.device import cpu_flags

        out.update(cpu=_cpu_model(), arch=platform.machine(), isa=torch.backends.cpu.get_cpu_capability(),
                   flags=hashlib.sha256(" ".join(sorted(cpu_flags())).encode()).hexdigest()[:16])
    return out


def verdict_key(cfg: Any, knobs: dict[str, Any], steps: int, machine: dict[str, Any],
                identity: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """The cache key of the verdict on `knobs` for TrialConfig `cfg` (the fp32 arm's) and what it is made of:
    the workload's identity, options and dataset, the params (batch size, lr, seed: the second seed is the next),
    the knob value, the steps, the machine's numerics, tuner's version and the check's recipe (arms and rule)."""
    import tuner
    from tuner.measure.parity import TOLERANCE, WINDOWS

    parts = {"recipe": [RECIPE, WINDOWS, TOLERANCE, YARDSTICK_SEEDS], "tuner": tuner.__version__, "workload": identity,
             "workload_options": cfg.workload_options, "dataset": cfg.dataset,
             "params": cfg.params.model_dump(mode="json"), "gpus": cfg.gpus, "env": cfg.env,
             "knobs": knobs, "steps": steps, "seeds": [cfg.params.seed + i for i in range(YARDSTICK_SEEDS + 1)], "machine": machine}
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24], parts


def read_cached(path: Path) -> CachedVerdict | None:
    """The verdict kept at `path`; None when there is none, or it cannot be read or is damaged (checked again)."""
    try:
        return CachedVerdict.model_validate_json(path.read_bytes())
    except (OSError, ValueError, ValidationError):
        return None


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
    from tuner.train import FP32, arm_config, check_parity

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
                key, parts = verdict_key(arm_config(cfg, FP32), knobs, steps, machine or {}, identity)
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
        verdicts = check_parity(cfg, [knob_sets[i] for i in missing], steps, Path(cache_dir))
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
                console: Any, in_process: bool, allowance: Any = None) -> StudyParity | None:
    """Run the study's parity check once (a resumed study reads the one it ran), keep it in the folder, show it.
    Under --study-seconds (`allowance`, tuner.search._allowance.Allowance) it takes at most its share of the time
    left, so the check cannot spend what the trials and the confirmation were promised."""
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

    if skipped and not in_process and not plan.options.address and not _holds_verdicts(plan.cache_dir):
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
        from tuner.search._hang import end_on_setup_timeout

        end_on_setup_timeout(err, "the numerics parity check")  # not once more in the probes and every trial

        result = StudyParity(steps=steps, seconds=time.perf_counter() - t0, error=error_line(err))
    return _keep(folder, result, console)


def _holds_verdicts(cache_dir: Path) -> bool:
    """Whether this machine's parity cache holds any verdict (a cluster's nodes may each hold their own: asked
    only of a local study)."""
    try:
        return any((Path(cache_dir) / CACHE_FOLDER).glob("*.json"))
    except OSError:
        return True  # cannot tell: let the task look


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
