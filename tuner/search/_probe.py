"""Speed knobs by probes, not by training: the loader knobs by input-ceiling probes, and channels_last,
cudnn_benchmark and optimizer_impl (tuner.knobs: `probe="compute"`) by compute-ceiling probes; and, so that the
trials are spent only where quality is in question (issue 40 item 5), a precision or TF32 the study's parity check
found within seed noise (within_noise), and the split of a kept effective batch where it is exact (exact_split).

num_workers, prefetch_factor, persistent_workers and pin_memory never change what is learned, only how fast
batches arrive. So before its first trial a study measures, with one trial's resources, the input ceiling of a
handful of loader configs at a few of the batch sizes it will search, and the compute ceiling of the model at
those batch sizes. For each probed batch size it keeps the cheapest loader that feeds the model (ProbePlan); the
sampler then searches only what changes the model (batch, accumulation, precision, betas), and each trial gets
the loader chosen for the probed batch size nearest its own. Whole training trials are no longer spent on
loader settings, and every probe lands in the study's ceiling cache, so trials with a probed loader reuse it.

Each job has its module: the loader rule (tuner.search._loader_probe), the compute-side speed and numerics knobs
(tuner.search._speed_probe), the split (tuner.search._split_probe), and the batch sizes read and the choice at each
(tuner.search._probe_batches). This one runs them: at each batch size, on one trial's resources, then keeps the
plan in the study folder.

Each reading ends once its rate is stable (STABLE: the last three windows, each at least 1/8 of the deadline and
the trial's minimum steps, agree within 3%) or at PROBE_SECONDS: a quiet machine reads in about 0.3 s what took
0.75 s, a noisy one reads on as before.

What is left to the sampler changes what is learned (betas, lr, an explicit effective batch, a split under
BatchNorm); a space left with nothing learned runs only its distinct configs (configs_left), so quality is scored on
those alone.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.knobs import env_knobs
from tuner.measure.ceiling import STABLE  # a reading ends once its last 3 windows agree within 3%
from tuner.search._allowance import trial_training_s
from tuner.search._loader_probe import LOADER_KNOBS, candidate_loaders, loaders_close, loaders_decided
from tuner.search._probe_batches import candidate_batches, choice_of, not_set_up, preflight_steps, too_slow_to_read
from tuner.search._speed_probe import SPEED_KNOBS, candidate_speeds, given_back, within_noise
from tuner.search._split_probe import choose_split, exact_split, split_read_again
from tuner.space import Space
from tuner.study import ProbeChoice, ProbePlan

if TYPE_CHECKING:
    from tuner.search._options import SearchPlan
    from tuner.search._resources import Resources
    from tuner.study import StudyParity

PROBE_SECONDS = 0.75  # per ceiling, at most: a reading ends earlier once its rate is stable (STABLE)
# A compute reading cut at its deadline is read again with one fitted to its step, up to this many times the
# deadline (tuner.train.probe_ceilings' max_seconds), or TRIAL_SHARE of one trial's training where that is longer
# (longest_reading); the batch size's later compute readings keep it.
FIT_CAP = 4.0
TRIAL_SHARE = 0.05


def longest_reading(plan: "SearchPlan", seconds: float) -> float:
    """The longest a compute reading cut at its `seconds` deadline may be read again for: FIT_CAP times it, or
    TRIAL_SHARE of one trial's training (its budget's seconds, or its samples at the pre-flight's pace) where that
    is longer. A model whose step takes a second needs about 7 s for a reading: a fixed 3 s left every such model
    unread, and its speed knobs to be searched by trials that each train for minutes."""
    trial = trial_training_s(plan.budget, plan.preflight.step_seconds, plan.preflight.step_samples)
    return max(FIT_CAP * seconds, TRIAL_SHARE * trial)


def probed_knobs(space: Space, reachable: list[str], numerics: dict[str, list[Any]] | None = None) -> list[str]:
    """The knobs the probes decide in this space (those it searches and the study's trials can reach): the speed
    knobs (loader and compute-side), and the numerics knobs in `numerics` (within_noise: parity passed them)."""
    return [k for k in (*LOADER_KNOBS, *SPEED_KNOBS, *env_knobs(), *(numerics or {}))
            if k in reachable and k in space.searched]


def plan_loaders(plan: "SearchPlan", space: Space, context: dict[str, Any], base: dict[str, Any],
                 resources: "Resources", console: Any, parity: "StudyParity | None" = None) -> ProbePlan | None:
    """The study's probes (tuner.search._probe): run once, before the first trial, and kept in the study folder
    so a resumed study samples as it began. They decide the speed knobs, the numerics knobs `parity` (the study's
    check, run before them) found within seed noise, and an exact split of the effective batch, so the trials
    search only what changes what is learned. None when the study does not probe."""
    folder = plan.folder
    if plan.loaders is not None:
        return plan.loaders
    numerics = within_noise(parity)
    knobs = probed_knobs(space, space.reachable(context), numerics)
    split = exact_split(plan, space, context)
    if not plan.options.probe or not (knobs or split) or plan.resume:
        return None  # a study begun without probes goes on without them
    if resources.ddp_workers > 1:
        return None  # a DDP trial's loaders are per rank, on several workers: probed by the trials themselves
    here = probes_in_process(plan, resources)
    trial_resources = None if here else {"cpu": resources.cpus_per_trial, "gpu": resources.gpus_per_trial}
    seconds = PROBE_SECONDS if plan.budget.seconds is None else min(PROBE_SECONDS, max(0.5, 0.05 * plan.budget.seconds))
    longest = longest_reading(plan, seconds)
    if console is not None:
        which = "loader" if set(knobs) <= set(LOADER_KNOBS) else "speed"
        named = [*knobs, *(["the split of the effective batch"] if split else [])]
        console.print(f"probing {which} knobs ({', '.join(named)}) with one trial's resources ...", soft_wrap=True)
        passed = [f"{k} ({', '.join(map(str, vs))} within seed noise)" for k, vs in numerics.items() if k in knobs]
        if passed:
            console.print(f"  parity passed {'; '.join(passed)}: probed for speed, not sampled", soft_wrap=True)

    def show(choice: Any) -> None:
        if console is not None and choice.raised:
            from rich.markup import escape

            console.print(f"  [yellow]warning:[/yellow] batch {choice.batch_size}: the probe's step raised "
                          f"{escape(choice.raised)}; the probes chose without this batch size (a trial given it "
                          f"fails the same way, its traceback in the trial's log)", soft_wrap=True)
            return
        if console is not None:
            timed = (f": one took {choice.preflight_step_s:.3g} s in the pre-flight, so this batch size was not "
                     f"set up" if choice.preflight_step_s is not None else "")
            model = (f"model takes {choice.compute_ceiling:.0f} samples/s" if choice.compute_ceiling else
                     f"model not read (its steps do not fit a probe reading of at most {longest:.3g} s{timed}; "
                     f"the cheapest loader kept)")
            best = ", ".join(f"{k} {v}" for k, v in choice.loader.items()) or "defaults"
            line = f"  batch {choice.batch_size}: {model}; loader: {best}"
            if len(choice.speed_probes) > 1 or choice.notes:
                fast = ", ".join(f"{k} {v}" for k, v in choice.speed.items()) or "defaults"
                measured = "; ".join(choice.speedups() + choice.notes)
                line += f"; compute: {fast} (probed: {measured or 'nothing measured'})"
            console.print(line, soft_wrap=True)

    try:
        loaders = run_probes(space, context, base, knobs, trial_resources, folder.ceilings_path, plan.cache_dir,
                             seconds=seconds, on_batch=show,
                             threads=resources.cpus_per_process if here else None,
                             on_cpu=resources.gpus_per_trial <= 0, timed=preflight_steps(plan.preflight),
                             device=plan.preflight.device or "", numerics=numerics,
                             decide_split=split, max_seconds=longest)
    except Exception as err:  # noqa: BLE001 - the trials will say what is wrong with the workload; search on
        from rich.markup import escape

        from tuner.errors import error_line
        from tuner.search._hang import end_on_setup_timeout

        end_on_setup_timeout(err, "the loader probes")  # not once more in every trial

        if console is not None:
            console.print(f"[yellow]warning:[/yellow] the loader probes failed ({escape(error_line(err))}); the "
                          f"sampler searches the loader knobs itself", soft_wrap=True)
        return None
    from tuner.search._env_probe import probe_environment

    loaders = probe_environment(loaders, plan, space, context, base, resources, console, here, seconds)
    folder.write_file(folder.probes_path, loaders.model_dump_json(indent=1))  # never a deleted study's folder
    if console is not None and loaders.unread:
        console.print(f"  {', '.join(loaders.unread)}: not read at any batch size (steps too slow for a probe "
                      f"reading of at most {longest:.3g} s, the longer of {FIT_CAP * seconds:.3g} s and "
                      f"{TRIAL_SHARE:.0%} of a trial's training): the trials search "
                      f"{'it' if len(loaders.unread) == 1 else 'them'}", soft_wrap=True)
    if console is not None and loaders.split is not None:
        b, a = loaders.split["batch_size"], loaders.split["accumulation_steps"]
        console.print(f"  split: {b} x {a} for every trial (no batch statistics: every split of the effective batch "
                      f"{b * a} computes the same gradient, so the fastest probed is kept)", soft_wrap=True)
    return loaders


def run_probes(space: Space, context: dict[str, Any], base: dict[str, Any], knobs: list[str],
               trial_resources: dict[str, float] | None, cache_path: Path | None, cache_dir: Path, *,
               seconds: float = PROBE_SECONDS, on_batch: Any = None, threads: int | None = None,
               on_cpu: bool = False, timed: dict[int, float] | None = None, device: str = "",
               numerics: dict[str, list[Any]] | None = None, decide_split: bool = False,
               max_seconds: float | None = None) -> ProbePlan:
    """Probe every candidate batch size in a Ray task with one trial's resources (`trial_resources`; None: in
    this process, as the efficiency benchmark does, with `threads` CPU threads if given), one batch size at a time
    (the probes must not share the hardware with each other), and choose a loader for each. `cache_path`: the
    study's ceiling cache, or None. `on_cpu`: the trials compute on a CPU (candidate_loaders). `timed`: the
    pre-flight's step of one micro-batch by batch size (preflight_steps: the largest micro-batch), on `device`: a
    batch size whose step is too slow for a reading there is not set up (not_set_up). `numerics`: the numerics
    knobs parity passed (within_noise), probed like speed knobs. `decide_split`: the kept effective batch's split
    is exact (no batch statistics), so every micro-batch of it is probed, with the accumulation its trials would
    run it with, and the fastest chosen (choose_split). `max_seconds`: the longest a cut compute reading is read
    again for (longest_reading; default FIT_CAP times `seconds`); a batch size whose timed step cannot fit it is not
    set up."""
    from tuner.config import dump_config
    from tuner.space import kept_split, own_effective_batch

    t0 = time.perf_counter()
    longest = max_seconds or FIT_CAP * seconds
    loaders = candidate_loaders(space, knobs, on_cpu=on_cpu)
    speeds = candidate_speeds(space, knobs, numerics)
    effective = own_effective_batch(space) if kept_split(space) is not None else None
    decide_split = decide_split and effective is not None
    probe: Any = probe_batch
    if trial_resources is None and threads is not None:
        probe = lambda *args: _with_threads(threads, *args)  # noqa: E731
    if trial_resources is not None:
        import ray

        remote = ray.remote(num_cpus=trial_resources.get("cpu", 1),
                            num_gpus=trial_resources.get("gpu", 0) or 0)(probe_batch)
        probe = lambda *args: ray.get(remote.remote(*args))  # noqa: E731
    baseline = space.baseline_point(context)
    choices: list[ProbeChoice] = []
    image = True  # the models' convolutions, as the last batch size set up found them
    configs: dict[int, str] = {}  # each batch size's probe config, for a split read again
    for batch in candidate_batches(space, context, every_split=decide_split):
        point = {k: v for k, v in baseline.items() if k not in knobs} | {"batch_size": batch}
        if decide_split:  # the split its trials would run, the same effective batch: the comparison is exact
            point["accumulation_steps"] = effective // batch  # (elsewhere one micro-batch a step: more readings fit)
        cfg = space.trial_config(point, base, source="probe")
        step_s = (timed or {}).get(batch)
        step_s = step_s * cfg.params.accumulation_steps if step_s is not None else None
        if step_s is not None and too_slow_to_read(step_s, seconds, cfg.measure, longest):
            choice = not_set_up(batch, loaders, speeds, step_s, image, device)
            choices.append(choice)
            if on_batch is not None:
                on_batch(choice)
            continue
        configs[batch] = json.dumps(dump_config(cfg))
        found = probe(configs[batch], loaders, seconds, str(cache_path) if cache_path else None, str(cache_dir),
                      speeds, longest)
        device, image = found["device"], bool(found.get("image", True))
        choice = choice_of(batch, loaders, found, speeds)
        choices.append(choice)
        if on_batch is not None:
            on_batch(choice)
    if decide_split:
        def again(choice: ProbeChoice) -> float | None:
            return probe(configs[choice.batch_size], [choice.loader], choice.reading_seconds or seconds,
                         str(cache_path) if cache_path else None, str(cache_dir), [choice.speed],
                         longest)["compute"]

        split_read_again([c for c in choices if c.batch_size in configs], baseline.get("batch_size"), again,
                         on_cpu=not device.startswith("cuda"))
    split = choose_split(choices, effective, baseline.get("batch_size")) if decide_split and effective else None
    if split is not None:
        knobs = [*knobs, *(k for k in split if k not in knobs)]
    unread = given_back(knobs, choices)
    knobs = [k for k in knobs if k not in unread]
    return ProbePlan(knobs=knobs, choices=choices, seconds=time.perf_counter() - t0, device=device, split=split,
                     unread=unread)


def probe_batch(cfg_json: str, loaders: list[dict[str, Any]], seconds: float, cache_path: str | None,
                cache_dir: str, speeds: list[dict[str, Any]] | None = None,
                max_seconds: float | None = None) -> dict[str, Any]:
    """On a trial's resources: the compute ceiling of the config in `cfg_json`, with each compute-side speed
    setting in `speeds` (the first, {}, the config's own defaults, read again at the end), and the input ceiling of
    each loader in `loaders`, through the study's ceiling cache (tuner.train.probe_ceilings measures them).
    A compute reading cut at its deadline is read again with a longer one, up to `max_seconds`.
    Returns {compute, computes: [value per speed setting], image, inputs: [value per loader], device, raised,
    seconds: the compute readings' deadline at the end}."""
    from tuner.config import parse_config
    from tuner.measure.ceiling import CeilingCache
    from tuner.train import probe_ceilings

    cfg = parse_config(json.loads(cfg_json), "probe")
    cache = CeilingCache(Path(cache_path)) if cache_path else None
    return probe_ceilings(cfg, loaders, seconds, cache, Path(cache_dir), speeds=speeds,
                          enough=loaders_decided, stable=STABLE, rivals=loaders_close, max_seconds=max_seconds)


def _with_threads(threads: int, *args: Any) -> dict[str, Any]:
    """probe_batch in this process with the CPU threads a trial's Ray worker gets (Ray sets OMP_NUM_THREADS to
    its CPUs; this process may have more), restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return probe_batch(*args)
    finally:
        torch.set_num_threads(before)


def probes_in_process(plan: "SearchPlan", resources: "Resources") -> bool:
    """Whether this process runs the probes: a local study of CPU trials. This process built the workload already
    (check_plan) on the same cores the trials get, and nothing else runs during the probes, so a Ray task would
    only add a fresh process paying its imports and the workload's set-up again (seconds of the study's wall
    time). GPU trials (the GPU Ray assigns, and no probe memory left cached in this process beside the trials)
    and a cluster's trials (another node's hardware) keep the Ray task."""
    return not plan.options.address and resources.gpus_per_trial <= 0


def configs_left(space: Space, context: dict[str, Any], loaders: ProbePlan,
                 baseline: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """When the probes decided every knob the space searches (`--space loader` on a CPU): the distinct configs
    left to measure, the baseline's (tuner's defaults) and the probes' pick, one when they agree; None when the
    sampler still has a knob to search. Every further trial would run the same config again."""
    from tuner.search._redraw import effective

    if any(n not in loaders.knobs and not space.params[n].single for n in space.reachable(context)):
        return None
    fixed = space.fixed_values()
    points = ([baseline] if baseline is not None else []) + [loaders.loader_for(fixed.get("batch_size"))]
    configs: list[dict[str, Any]] = []
    for point in points:
        if (config := effective({**fixed, **point})) not in configs:
            configs.append(config)
    return configs


def stored_loader_plan(path: Path) -> ProbePlan | None:
    """A resumed study's probes.json, checked before anything runs: damaged, it is one line (exit 2) naming the file,
    and nothing is rewritten; missing, the study goes on as it began, without probes."""
    from pydantic import ValidationError

    from tuner.errors import StudyError
    from tuner.files import load_json_object

    if not path.exists():
        return None
    data = load_json_object(path, "the study's loader probes", StudyError)
    try:
        return ProbePlan.model_validate(data)
    except ValidationError as err:
        raise StudyError(f"{path}: not the loader probes tuner wrote ({err.errors()[0]['msg']}); restore it, or "
                         f"delete it to go on without probes (the sampler then searches the loader knobs too)") from None
