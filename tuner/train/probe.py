"""A study's probe at one batch size (tuner.search._probe asks for it on a trial's resources): the compute ceiling
of the config with each compute-side speed setting, and the input ceiling of each candidate loader, measured with
the trial's own workload, models, threads and numerics."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner.builtin import resolve_workload
from tuner.config import TrialConfig
from tuner.device import resolve_device
from tuner.measure.ceiling import CeilingCache
from tuner.train.ceilings import CeilingNote, ceilings, first_batch, measure_ceiling
from tuner.train.deadline import setup_deadline
from tuner.train._build import build_models, build_workload, make_context, torch_threads
from tuner.workload import running

CLOSE = 0.10  # a speed setting read within 10% of the defaults is read again (a reading's noise on a shared machine)


def probe_ceilings(cfg: TrialConfig, loaders: list[dict[str, Any]], seconds: float, cache: CeilingCache | None,
                   cache_dir: Path, *, speeds: list[dict[str, Any]] | None = None,
                   enough: Callable[..., bool] | None = None, stable: float | None = None,
                   rivals: Callable[..., list[int]] | None = None, max_seconds: float | None = None) -> dict[str, Any]:
    """A study's probe at one batch size, in this process, with the trial's own workload, models, threads and
    numerics: `cfg`'s compute ceiling (on an untrained model, not cached) with each compute-side speed setting in
    `speeds` (the first, {}, the config's own defaults, read again at the end), and the input ceiling of each
    loader in `loaders` (through `cache`). `enough(compute, probed, inputs, rest, on_cpu=...)` True after a loader
    stops the loader probing there (the rest would not change the choice). When the defaults' first compute
    reading gives nothing (a step too slow for the deadline), the other speed settings are not read (None: a
    speed knob is kept only against a defaults' reading). `stable`: each reading may end once its rate settled
    (tuner.train.ceilings.compute_ceiling). `rivals(compute, probed, inputs, on_cpu=...)`: the indices of the
    probed loaders predicted too close to tell apart on one reading; each is read again (not from `cache`), in
    reverse order, and keeps its best reading. `max_seconds` (above `seconds`): a compute reading cut at its
    deadline is read once more with a deadline fitted to the step it timed (fitted_seconds), up to this, and every
    later compute reading here keeps the longer deadline (the GAN's batch-64 step, 0.09 s, needs about 0.7 s of a
    0.75 s reading: a cold first reading cut there left the batch size, the baseline's, unread, and with it the
    environment probes). Returns {compute, computes: [value per speed setting], readings, image, inputs: [value per
    loader], input_readings: [readings per loader], device, raised: the workload's error where the defaults'
    reading raised, else None, seconds: the compute readings' deadline at the end}."""
    device = resolve_device(cfg.params.device)
    context = make_context(cfg, device, cache_dir, None)
    speeds = speeds or [{}]
    with torch_threads(cfg.params.threads), device.numerics(cfg.params), running(context):
        with setup_deadline(cfg.setup_timeout_s, f"the workload factory {resolve_workload(cfg.workload).attr}()"):
            workload = build_workload(cfg)  # bounded as a trial's is: a factory that blocks here held a study
        with setup_deadline(cfg.setup_timeout_s, "the workload's datasets()"):
            train_set, _ = workload.datasets()
        models = build_models(workload, device, cfg.params)
        image = any(p.dim() == 4 for m in models.values() for p in m.parameters())  # convolutions: what it changes
        # A fresh process: the first steps pay one-time costs (kernels chosen, memory allocated) that the trials'
        # ceilings, measured after training, never see. Run them untimed first where the defaults are read once.
        # One batch for every compute reading here: the loader knobs and the speed knobs leave it as it is.
        try:
            one = first_batch(cfg, device, workload, train_set)
        except Exception:  # noqa: BLE001 - each reading takes it itself then, and is None where it fails, as before
            one = None
        notes: dict[str, CeilingNote] = {}  # why the defaults' compute reading gave nothing
        if len(speeds) == 1:
            measure_ceiling("compute", cfg, device, workload, train_set, models, min(seconds, 0.5), stable=stable,
                            batch=one, notes=notes)
        # With speed settings to compare, the defaults are read first and again last, and the better reading
        # counts: a first reading that paid one-time costs gives way to the second, and the alternatives are read
        # after it, warm. So no untimed warm-up there (0.4-0.5 s per probed batch size of the default study).
        # Not cached for the trials: measured briefly on an untrained model, it decides between loaders and speed
        # knobs here; a trial's own compute ceiling is measured after its training, as long as its ceilings are
        # allowed.
        computes: list[float | None] = []
        readings: list[list[float | None]] = [[] for _ in speeds]
        deadline = [seconds]  # the compute readings' here: raised once a reading is cut (max_seconds)

        def read(i: int) -> None:
            speed = speeds[i]
            if (computes and computes[0] is None) or ("channels_last" in speed and not image):
                readings[i].append(None)  # no defaults' reading to beat / nothing for channels_last to change
                return
            point = cfg.model_copy(update={"params": cfg.params.model_copy(update=speed)})
            here = models  # another memory format: models built in it, as a trial builds them (build_models)
            if point.params.channels_last != cfg.params.channels_last:
                here = build_models(workload, device, point.params)
            with device.numerics(point.params), torch_threads(point.params.threads):  # threads: a probed knob
                why: dict[str, CeilingNote] = {}
                value = ceilings(point, device, workload, train_set, here, deadline[0], None, kinds=("compute",),
                                 stable=stable, batch=one, notes=why)["compute"]
                cut = why.get("compute")
                longer = _longer(deadline[0], cut, cfg, max_seconds)
                if value is None and longer is not None:
                    deadline[0] = longer
                    why = {}
                    value = ceilings(point, device, workload, train_set, here, deadline[0], None,
                                     kinds=("compute",), stable=stable, batch=one, notes=why)["compute"]
                if not computes and "compute" in why:
                    notes["compute"] = why["compute"]  # why the defaults' reading gave nothing
                readings[i].append(value)

        def best(i: int) -> float | None:
            return max((v for v in readings[i] if v is not None), default=None)

        for i in range(len(speeds)):
            read(i)
            computes.append(best(i))
        if len(speeds) > 1:  # the defaults read twice, before and after the others: the better reading counts
            read(0)
            computes[0] = best(0)
            # Settings read within CLOSE of the defaults are read again, in reverse order, and the defaults once
            # more: on a busy machine one reading per setting decided by a moment's load (issue 52 item 5)
            base = computes[0]
            close = [i for i in range(1, len(speeds)) if base and computes[i] and abs(computes[i] / base - 1) <= CLOSE]
            for i in reversed(close):
                read(i)
                computes[i] = best(i)
            if close:
                read(0)
                computes[0] = best(0)
        inputs = []
        on_cpu = not device.describe().startswith("cuda")
        for i, loader in enumerate(loaders):
            point = cfg.model_copy(update={"params": cfg.params.model_copy(update=loader)})
            inputs.append(ceilings(point, device, workload, train_set, models, seconds, cache,
                                   kinds=("input",), stable=stable)["input"])
            if enough is not None and enough(computes[0], loaders[: i + 1], inputs, loaders[i + 1:], on_cpu=on_cpu):
                break
        # Loaders predicted within CLOSE of each other are read again, in reverse order, past the cache: one
        # reading each decided by a moment's load on a busy machine (issue 52 item 5); each keeps its best.
        input_readings: list[list[float | None]] = [[v] for v in inputs]
        again = rivals(computes[0], loaders[: len(inputs)], inputs, on_cpu=on_cpu) if rivals is not None else []
        for i in reversed(again):
            point = cfg.model_copy(update={"params": cfg.params.model_copy(update=loaders[i])})
            input_readings[i].append(ceilings(point, device, workload, train_set, models, seconds, None,
                                              kinds=("input",), stable=stable)["input"])
            inputs[i] = max((v for v in input_readings[i] if v is not None), default=None)
    note = notes.get("compute")
    return {"compute": computes[0], "computes": computes, "readings": readings, "image": bool(image), "inputs": inputs,
            "input_readings": input_readings, "device": device.describe(),
            "raised": note.text if note is not None and note.raised else None, "seconds": deadline[0]}


def _longer(seconds: float, cut: CeilingNote | None, cfg: TrialConfig, max_seconds: float | None) -> float | None:
    """The deadline a compute reading cut at `seconds` is read again with: fitted to the step it timed, at most
    `max_seconds`; None where it was not cut (a reading, an error), or where even `max_seconds` cannot hold a
    warm-up step and two windows at that step (a ResNet-18's 0.66 s step at batch 16 needs 4.6 s against the
    default study's 3 s: a reading again there would be cut again, 3 s spent for nothing)."""
    if cut is None or cut.raised or cut.step_seconds is None or max_seconds is None:
        return None
    from tuner.measure.ceiling import fitted_seconds, stable_measure

    measure = stable_measure(seconds, cfg.measure)
    if fitted_seconds(cut.step_seconds, measure, spare=1.0) > max_seconds:
        return None
    fit = fitted_seconds(cut.step_seconds, measure)
    return min(max_seconds, fit) if fit > seconds else None
