"""Speed knobs by probes, not by training: the loader knobs by input-ceiling probes, and channels_last,
cudnn_benchmark and optimizer_impl (tuner.knobs: `probe="compute"`) by compute-ceiling probes; and, so that the
trials are spent only where quality is in question (issue 40 item 5), a precision or TF32 the study's parity check
found within seed noise (within_noise), and the split of a kept effective batch where it is exact (exact_split).
Over 700 lines because the candidates, the rules (loader, speed and numerics knobs, the split), what is skipped and
the probe phase are one decision, read together.

num_workers, prefetch_factor, persistent_workers and pin_memory never change what is learned, only how fast
batches arrive. So before its first trial a study measures, with one trial's resources, the input ceiling of a
handful of loader configs at a few of the batch sizes it will search, and the compute ceiling of the model at
those batch sizes. For each probed batch size it keeps the cheapest loader that feeds the model (ProbePlan); the
sampler then searches only what changes the model (batch, accumulation, precision, betas), and each trial gets
the loader chosen for the probed batch size nearest its own. Whole training trials are no longer spent on
loader settings, and every probe lands in the study's ceiling cache, so trials with a probed loader reuse it.

The rule (`choose`): on a GPU a loader with workers overlaps loading with compute, so the trial can reach the
lower of the two ceilings; without workers loading and compute take turns (1/(1/compute + 1/input)). When the
model computes on the CPU, the workers load on the very cores the model computes on, so loading and compute take
turns whatever the loader (both ceilings were measured with all of the trial's cores); and when loading in the
training process already keeps the model at COMPUTE_BOUND_AT of its compute ceiling, no worker is taken at all:
workers could add at most the rest, and on a CPU they take it from the model's cores (in the default study a
config with 2 workers ran 9% slower than the same batch loaded in-process, which the probes predicted at 81%).
Among loaders within TOLERANCE of the best prediction the cheapest wins: fewer workers, then less prefetch, then
no pinning. Loaders predicted within 10% of the best (tuner.train.probe.CLOSE, as for the speed knobs below) are
read again, in reverse order and past the ceiling cache, and each keeps its best reading (`_loaders_close`;
probes.json keeps every reading): one reading each on a busy machine decided by a moment's load (issue 52 item 5).

Which loaders are probed at all (`_loaders_decided`, in the candidates' order, cheapest first): the rest of them
are skipped once they cannot change the choice. Without a compute ceiling (a step too slow for the probe's
deadline: the GAN at batch 256 on 2 cores) nothing is predicted and the cheapest loader is taken, so only it is
probed (its input ceiling still lands in the cache), and the speed knobs are not read either (a value is kept only
against a defaults' reading). On a CPU loading and compute take turns whatever the loader, so no loader is
predicted above the compute ceiling: once in-process loading reaches COMPUTE_BOUND_AT of it, or the loader the rule
takes now reaches 1 - TOLERANCE of it with only costlier ones left, no later loader can win. For the same reason, on a CPU each worker count is probed
with the smallest prefetch only: the prefetch depth is a queue's length, which does not change the rate the
workers deliver in steady state (the input ceiling reads that rate, with a consumer that only copies), and taking
turns leaves a deeper queue nothing to overlap; a larger prefetch could win only by a reading's noise (the
default study on a quiet machine read 2433 / 2515 samples/s with prefetch 1 / 8 at one worker, 4561 / 4399 at
two: predicted within 1%). On a GPU every loader is probed (workers overlap compute there: a costlier loader can
still lift the prediction to the lower ceiling).

The space's largest micro-batch, where the pre-flight (check_plan, before Ray starts) already timed its step too
slow for a reading, with PREFLIGHT_MARGIN to spare, is not set up at all (`not_set_up`): its models, warm-up and
a reading cut at the deadline would only conclude "model not read" (2.4 s of the default study's 10 s of probes,
the GAN at batch 256 on 2 cores), so it gets that conclusion directly, said so in its line, and its input ceiling
is not cached. The baseline's batch is probed whatever the pre-flight timed there (preflight_steps).

Each reading ends once its rate is stable (STABLE: the last three windows, each at least 1/8 of the deadline and
the trial's minimum steps, agree within 3%) or at PROBE_SECONDS: a quiet machine reads in about 0.3 s what took
0.75 s, a noisy one reads on as before.

The compute-side speed knobs change how fast the model computes, never what it learns, so at each probed batch size
the compute ceiling is read with tuner's defaults, then with each other value of each knob alone, then with the
defaults again (drift between the readings then counts against the alternatives); a setting read within 10% of the
defaults (tuner.train.probe.CLOSE: one reading's noise on a shared machine) is read again, in reverse order, with the
defaults once more, and each keeps its best reading (probes.json keeps every reading and their spread: on a busy
machine one reading per setting decided by a moment's load, issue 52 item 5); a value is kept only where its
reading beats the better default reading by more than SPEED_GAIN, each knob on its own (the readings of two knobs
together are not measured: their gains are assumed to combine). channels_last is not probed where the models
have no 4-D weight (no 2-D convolution): the inputs alone in NHWC would only add a copy.

Numerics knobs (precision, TF32; not compile, whose compile time does not fit a probe) join the compute-side
candidates once the parity check, run before the probes, found every value the study may pick within seed noise:
the rounding then changes nothing a change of seed would not, so only speed is in question, and the same rule
(SPEED_GAIN over the defaults' reading) decides. A knob with a value that drifts or diverged stays with the trials,
whose quality decides it. The split of the workload's own effective batch into micro-batch x accumulation is exact
where the pre-flight found no batch-statistics layer (every split computes the same gradient): then every
micro-batch of it is probed with its own accumulation (up to MAX_SPLITS) and the one predicted fastest is every
trial's (choose_split: within TOLERANCE, the workload's own, else the largest). Where the fastest and the
workload's own micro-batch are predicted within CLOSE of each other, both are read again first, in reverse order,
with their chosen loader and speed knobs, and each keeps its best reading (split_read_again; the readings in
probes.json): re-read rather than simply preferring the workload's own within CLOSE, so that a split really 5-10%
faster is still taken, and decided on the best reading as the speed knobs are (a moment's load only ever slows a
reading). What is left to the sampler changes
what is learned (betas, lr, an explicit effective batch, a split under BatchNorm); a space left with nothing
learned runs only its distinct configs (configs_left), so quality is scored on those alone.

Checked on the efficiency benchmark's grid (CNN on digits, 2 cores): at batch 16 the probes gave compute 2005,
input 6107 / 2384 / 4144 samples/s with 0 / 1 / 2 workers, so 1509 / 1089 / 1351 predicted; the grid measured
1573 / 923 / 1055 end to end. Counting the workers' loading as overlapped instead would have predicted 2005 for
one worker, and picked the slowest loader.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.knobs import KNOBS, WORKERS, acts, env_knobs, heavy_knobs, parity_probed, probed
from tuner.measure.ceiling import STABLE  # a reading ends once its last 3 windows agree within 3%
from tuner.space import Space
from tuner.study import LoaderProbe, Preflight, ProbeChoice, ProbePlan, SpeedProbe

if TYPE_CHECKING:
    from tuner.search._options import SearchPlan
    from tuner.search._resources import Resources
    from tuner.study import StudyParity

LOADER_KNOBS = probed("input")  # tuner.knobs: num_workers, prefetch_factor, persistent_workers, pin_memory
# tuner.knobs: channels_last, cudnn_benchmark, optimizer_impl, threads; not those set through the environment
# before torch loads (the OpenMP wait policy), which fresh processes read (tuner.search._env_probe)
SPEED_KNOBS = tuple(k for k in probed("compute") if k not in env_knobs())
SPEED_GAIN = 0.05  # a speed knob's value is kept only where it beats the defaults' compute ceiling by 5%
TOLERANCE = 0.05  # loaders predicted within 5% of the best are equally good: take the cheapest
MAX_BATCHES = 3
MAX_SPLITS = 6  # a split the probes decide: all its micro-batches probed, where it has no more than this many
PROBE_SECONDS = 0.75  # per ceiling, at most: a reading ends earlier once its rate is stable (STABLE)
# A batch size is not set up at all where the pre-flight's step there is too slow for a reading of this many
# times the deadline: the pre-flight's step is one noisy step (the faster of two), so a step timed a little too
# slow is still probed, and its reading decides.
PREFLIGHT_MARGIN = 1.5
# Why channels_last was not probed at a batch size: the models have no 4-D weight (an MLP, a transformer), so NHWC
# would change nothing but a copy of 4-D inputs; given_back leaves it at its default rather than to the trials.
NO_4D_WEIGHTS = "channels_last: not probed, the models have no 4-D weights"


def probed_knobs(space: Space, reachable: list[str], numerics: dict[str, list[Any]] | None = None) -> list[str]:
    """The knobs the probes decide in this space (those it searches and the study's trials can reach): the speed
    knobs (loader and compute-side), and the numerics knobs in `numerics` (within_noise: parity passed them)."""
    return [k for k in (*LOADER_KNOBS, *SPEED_KNOBS, *env_knobs(), *(numerics or {}))
            if k in reachable and k in space.searched]


def within_noise(parity: "StudyParity | None") -> dict[str, list[Any]]:
    """The numerics knobs the probes may decide (tuner.knobs.parity_probed: precision, TF32), each with its values
    other than fp32's, where the study's parity check found every one of them within seed noise: a change of
    rounding nobody could tell from a change of seed, so only its speed is in question. A knob with a value that
    drifts or diverged stays with the trials (their quality decides it), as does one with a value the check did not
    run for (too slow for its cap) and every knob of a failed check."""
    if parity is None or parity.error:
        return {}
    values: dict[str, list[Any]] = {}
    drifts: set[str] = {name for knobs in parity.unchecked for name in knobs}  # a value not checked: the trials'
    for v in parity.verdicts:
        for name, value in v.knobs.items():
            if name not in parity_probed():
                continue
            if v.state != "within seed noise":
                drifts.add(name)
            elif value not in values.setdefault(name, []):
                values[name].append(value)
    return {name: vs for name, vs in values.items() if name not in drifts}


def candidate_speeds(space: Space, knobs: list[str], numerics: dict[str, list[Any]] | None = None,
                     ) -> list[dict[str, Any]]:
    """Compute-side settings to probe: {} (tuner's defaults), then each other value of each speed knob alone, then
    each value of each numerics knob in `numerics` (within_noise) alone."""
    from tuner.config import Params

    defaults = Params()
    out: list[dict[str, Any]] = [{}]
    for name in SPEED_KNOBS:
        spec = space.params.get(name)
        if name not in knobs or spec is None:
            continue
        out += [{name: v} for v in _values(spec) if v != getattr(defaults, name)]
    for name, values in (numerics or {}).items():
        if name in knobs:
            out += [{name: v} for v in values if v != getattr(defaults, name)]
    return out


def _values(spec: Any) -> list[Any]:
    """A speed knob's values to probe: both of a bool, every choice, and of an int range (the thread count) its
    powers of two below its top (the top is the trial's CPUs: torch's default there, the defaults' reading)."""
    if spec.type == "bool":
        return [False, True]
    if spec.type == "int":
        lo, hi = int(spec.low), int(spec.high)
        return sorted({n for n in (1, 2, 4, 8, 16, 32, 64, 128) if lo <= n < hi} | ({lo} if lo < hi else set()))
    return list(spec.choices or [])


def choose_speed(baseline: float | None, probes: list[SpeedProbe]) -> tuple[dict[str, Any], float | None]:
    """Per knob, the value whose compute ceiling beats `baseline` (the defaults') by more than SPEED_GAIN, if any
    does (the fastest of those); and the compute ceiling the choice is expected to reach (its best reading)."""
    chosen: dict[str, Any] = {}
    best: dict[str, float] = {}
    for p in probes:
        if not p.knobs or p.compute_ceiling is None or baseline is None:
            continue
        (name, value), = p.knobs.items()
        if p.compute_ceiling > (1 + SPEED_GAIN) * baseline and p.compute_ceiling > best.get(name, 0.0):
            chosen[name], best[name] = value, p.compute_ceiling
    for name in [n for n in chosen if not acts(n, chosen)]:  # TF32 beside a chosen bf16: nothing left to change
        chosen.pop(name)
        best.pop(name)
    return chosen, max(best.values(), default=baseline)


def candidate_batches(space: Space, context: dict[str, Any], *, every_split: bool = False) -> list[int]:
    """A few batch sizes the search will use: the domain's ends and its (geometric) middle, or its choices (of a
    kept effective batch: its split's micro-batches; `every_split`: all of them, up to MAX_SPLITS, where the
    probes decide the split)."""
    from tuner.config import Params
    from tuner.space import kept_split

    spec = space.params.get("batch_size")
    if spec is None or spec.fixed:
        return [int(spec.value) if spec is not None else Params().batch_size]
    split = kept_split(space)  # the micro-batches of a kept effective batch: the only ones its trials run
    if spec.type == "categorical" or split is not None:
        values = split if split is not None else sorted({int(v) for v in spec.choices or []})
        if len(values) <= (MAX_SPLITS if every_split and split is not None else MAX_BATCHES):
            return values
        return [values[0], values[len(values) // 2], values[-1]]
    lo, hi = int(spec.low), int(spec.high)  # type: ignore[arg-type]
    mid = int(round(math.sqrt(lo * hi)))
    return sorted({lo, mid, hi})


def candidate_loaders(space: Space, knobs: list[str], *, on_cpu: bool = False) -> list[dict[str, Any]]:
    """Loader configs to probe: worker counts 0, 1, 2, 4, 8... up to the domain's top (and the top itself), each
    with the smallest and largest prefetch the domain allows (`on_cpu`: the smallest only, see the module's
    rule); persistent workers where searched (steady state does not change with it, epoch ends do), pinned and
    not where pinning is searched."""
    from tuner.config import Params

    defaults = Params()

    def values(name: str) -> list[Any]:
        spec = space.params.get(name)
        if name not in knobs or spec is None:
            return [getattr(defaults, name)]
        if spec.type == "bool":
            return [False, True]
        if spec.type == "categorical":
            return list(spec.choices or [])
        lo, hi = int(spec.low), int(spec.high)  # type: ignore[arg-type]
        if name == WORKERS:
            counts = {lo, hi} | {n for n in (0, 1, 2, 4, 8, 16, 32, 64) if lo <= n <= hi}
            return sorted(counts)
        return sorted({lo, hi})

    def tried(name: str) -> list[Any]:
        if name == "persistent_workers":
            return [True]  # steady state does not change with it: kept on where it is searched
        return values(name)[:1] if on_cpu and name == "prefetch_factor" else values(name)

    # The other loader knobs (tuner.knobs: probed "input"), the last in the table varying fastest: pinning
    # outermost, prefetch innermost; those that need workers only with workers.
    others = [n for n in reversed(probed("input")) if n in knobs and n != WORKERS]
    out: list[dict[str, Any]] = []
    for workers in values(WORKERS):
        axes = [n for n in others if workers > 0 or "workers" not in KNOBS[n].needs]
        for combo in itertools.product(*(tried(n) for n in axes)):
            point = {WORKERS: workers} | dict(zip(axes, combo))
            out.append({k: v for k, v in point.items() if k in knobs and v is not None})
    return out


def predicted(compute: float | None, inp: float | None, workers: int, on_cpu: bool = False) -> float | None:
    """What a trial with this loader can reach: the lower ceiling when workers load beside a GPU's compute, the
    two taking turns without workers or when the model computes on the same CPU cores."""
    if compute is None or inp is None:
        return None
    return min(compute, inp) if workers > 0 and not on_cpu else 1.0 / (1.0 / compute + 1.0 / inp)


def _cost(loader: dict[str, Any]) -> tuple[int, ...]:
    """What a loader costs, compared in the knob table's order (tuner.knobs, probed "input": workers, then
    prefetch, persistent workers and pinning; persistent_workers is on exactly where there are workers among the
    candidates, so it orders them as the workers already do)."""
    return tuple(int(loader.get(name) or 0) for name in LOADER_KNOBS)


def choose(compute: float | None, probes: list[LoaderProbe], *, on_cpu: bool) -> dict[str, Any]:
    """The cheapest probed loader that feeds the model as well as the best one does (see the module's rule)."""
    from tuner.analysis import COMPUTE_BOUND_AT

    scored = []
    for p in probes:
        p.predicted = predicted(compute, p.input_ceiling, int(p.loader.get("num_workers") or 0), on_cpu)
        if p.predicted is not None:
            scored.append((p.predicted, p))
    if not scored:
        return min((p.loader for p in probes), key=_cost) if probes else {}
    in_process = [p for _, p in scored if int(p.loader.get("num_workers") or 0) == 0]
    if on_cpu and compute and in_process and max(p.predicted or 0 for p in in_process) >= COMPUTE_BOUND_AT * compute:
        return dict(min(in_process, key=lambda p: _cost(p.loader)).loader)
    best = max(v for v, _ in scored)
    good = [p for v, p in scored if v >= (1 - TOLERANCE) * best]
    return dict(min(good, key=lambda p: _cost(p.loader)).loader)


def probe_batch(cfg_json: str, loaders: list[dict[str, Any]], seconds: float, cache_path: str | None,
                cache_dir: str, speeds: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """On a trial's resources: the compute ceiling of the config in `cfg_json`, with each compute-side speed
    setting in `speeds` (the first, {}, the config's own defaults, read again at the end), and the input ceiling of
    each loader in `loaders`, through the study's ceiling cache (tuner.train.probe_ceilings measures them).
    Returns {compute, computes: [value per speed setting], image, inputs: [value per loader], device, raised}."""
    from tuner.config import parse_config
    from tuner.measure.ceiling import CeilingCache
    from tuner.train import probe_ceilings

    cfg = parse_config(json.loads(cfg_json), "probe")
    cache = CeilingCache(Path(cache_path)) if cache_path else None
    return probe_ceilings(cfg, loaders, seconds, cache, Path(cache_dir), speeds=speeds,
                          enough=_loaders_decided, stable=STABLE, rivals=_loaders_close)


def _loaders_close(compute: float | None, done: list[dict[str, Any]], inputs: list[float | None], *,
                   on_cpu: bool) -> list[int]:
    """The probed loaders read again (issue 52 item 5): the one predicted best and every other predicted within
    CLOSE of it (tuner.train.probe.CLOSE: one reading's noise on a shared machine), where there are two or more;
    none where the best stands further apart than that, or nothing is predicted (no compute ceiling)."""
    from tuner.train import CLOSE  # a reading's noise on a shared machine

    rated = [(i, v) for i, (lo, inp) in enumerate(zip(done, inputs))
             if (v := predicted(compute, inp, int(lo.get("num_workers") or 0), on_cpu))]
    best = max((v for _, v in rated), default=0.0)
    close = [i for i, v in rated if v >= (1 - CLOSE) * best]
    return close if len(close) > 1 else []


def _loaders_decided(compute: float | None, done: list[dict[str, Any]], inputs: list[float | None],
                     rest: list[dict[str, Any]], *, on_cpu: bool) -> bool:
    """Whether no loader in `rest` can change what `choose` takes from the loaders probed so far (`done`, in the
    candidates' order, cheapest first), so they are not probed (see the module's rule):
    - no compute ceiling (a step too slow for the probe's deadline): nothing can be predicted, `choose` takes the
      cheapest loader, the first probed;
    - on a CPU, every in-process loader probed and one keeps the model at COMPUTE_BOUND_AT of its compute ceiling
      (`_in_process_suffices`);
    - on a CPU, the loader `choose` would take now is predicted at (1 - TOLERANCE) of the compute ceiling and
      none in `rest` is cheaper: loading and compute take turns there, so no loader is predicted above the
      compute ceiling, and none can leave the current one more than TOLERANCE behind the best."""
    if not done:
        return False
    if not compute:
        return all(_cost(lo) >= min(_cost(d) for d in done) for lo in rest)
    if not on_cpu:
        return False
    if _in_process_suffices(compute, done, inputs, rest):
        return True
    probes = [LoaderProbe(loader=dict(lo), input_ceiling=v) for lo, v in zip(done, inputs)]
    now = choose(compute, probes, on_cpu=True)
    taken = next((p for p in probes if p.loader == now), None)
    return (taken is not None and (taken.predicted or 0.0) >= (1 - TOLERANCE) * compute
            and all(_cost(lo) >= _cost(now) for lo in rest))


def _in_process_suffices(compute: float | None, done: list[dict[str, Any]], inputs: list[float | None],
                         rest: list[dict[str, Any]]) -> bool:
    """On a CPU, once every in-process loader is probed: whether one already keeps the model at COMPUTE_BOUND_AT
    of its compute ceiling, the case where `choose` takes it without looking at the loaders with workers."""
    from tuner.analysis import COMPUTE_BOUND_AT

    def workers(lo: dict[str, Any]) -> int:
        return int(lo.get("num_workers") or 0)

    if not compute or any(workers(lo) == 0 for lo in rest):
        return False
    best = max((predicted(compute, v, 0, True) or 0.0 for lo, v in zip(done, inputs) if workers(lo) == 0),
               default=0.0)
    return best >= COMPUTE_BOUND_AT * compute


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


def choice_of(batch: int, loaders: list[dict[str, Any]], found: dict[str, Any],
              speeds: list[dict[str, Any]] | None = None) -> ProbeChoice:
    """The loader and speed knobs chosen at one batch size from what probe_batch found there."""
    read = found.get("input_readings") or [[v] for v in found["inputs"]]
    probes = [LoaderProbe(loader=dict(lo), input_ceiling=v, readings=list(r))
              for lo, v, r in zip(loaders, found["inputs"], read)]
    choice = ProbeChoice(batch_size=batch, compute_ceiling=found["compute"], probes=probes,
                          raised=found.get("raised"))
    speeds = speeds or [{}]
    computes = found.get("computes") or [found["compute"]]
    read = found.get("readings") or [[v] for v in computes]
    choice.speed_probes = [SpeedProbe(knobs=dict(sp), compute_ceiling=v, readings=list(r))
                           for sp, v, r in zip(speeds, computes, read)]
    if any("channels_last" in sp for sp in speeds) and not found.get("image", True):
        choice.notes.append(NO_4D_WEIGHTS)
    choice.speed, choice.compute_ceiling = choose_speed(found["compute"], choice.speed_probes)
    choice.loader = choose(choice.compute_ceiling, probes,
                           on_cpu=not str(found.get("device", "")).startswith("cuda"))
    return choice


def _rate(choice: ProbeChoice) -> float | None:
    """What a trial at this choice's micro-batch is predicted to reach: its chosen loader's prediction, else the
    compute ceiling with its chosen speed knobs."""
    taken = next((p.predicted for p in choice.probes if p.loader == choice.loader and p.predicted), None)
    return taken or choice.compute_ceiling


def choose_split(choices: list[ProbeChoice], effective: int, own: int | None) -> dict[str, int] | None:
    """The split of the kept effective batch (micro-batch x accumulation) the probes predict fastest, where the
    split is exact (no batch statistics: every split computes the same gradient). Among the micro-batches predicted
    within TOLERANCE of the best: the workload's own (`own`), else the largest (fewest accumulation steps). None
    where no micro-batch was read (the trials then search the split)."""
    rated = [(r, c) for c in choices if (r := _rate(c))]
    if not rated:
        return None
    best = max(r for r, _ in rated)
    good = [c for r, c in rated if r >= (1 - TOLERANCE) * best]
    pick = next((c for c in good if c.batch_size == own), None) or max(good, key=lambda c: c.batch_size)
    batch, accumulation = heavy_knobs()  # tuner.knobs: the effective batch's factors
    return {batch: pick.batch_size, accumulation: effective // pick.batch_size}


def split_rivals(choices: list[ProbeChoice], own: int | None) -> list[ProbeChoice]:
    """The micro-batches read again before the split is chosen (issue 52 item 5): the one predicted fastest and
    the workload's own, where they are predicted within CLOSE of each other (tuner.train.probe.CLOSE), in the order
    first read; none where the workload's own is the fastest, was not read, or stands further behind."""
    from tuner.train import CLOSE  # a reading's noise on a shared machine

    rated = [(r, c) for c in choices if (r := _rate(c))]
    mine = next((r for r, c in rated if c.batch_size == own), None)
    if mine is None:
        return []
    best, fastest = max(rated, key=lambda rc: rc[0])
    if fastest.batch_size == own or mine < (1 - CLOSE) * best:
        return []
    return [c for c in choices if c.batch_size in (own, fastest.batch_size)]


def split_read_again(choices: list[ProbeChoice], own: int | None, read: Any, *, on_cpu: bool) -> None:
    """Read the split's rivals (split_rivals) again, in reverse order, each with its chosen loader and speed knobs
    (`read(choice)`: its compute ceiling, or None), before choose_split decides: one reading per micro-batch on a
    busy machine chose 32 x 2 for nanoGPT where 64 x 1 then ran faster. Each keeps its best reading, as the speed
    knobs do (a moment's load only ever slows one), in `readings`, and its loader is chosen again against it."""
    for c in reversed(split_rivals(choices, own)):
        c.readings = c.readings or [c.compute_ceiling]
        c.readings.append(read(c))
        c.compute_ceiling = max((v for v in c.readings if v is not None), default=None)
        c.loader = choose(c.compute_ceiling, c.probes, on_cpu=on_cpu)


def preflight_steps(preflight: Preflight) -> dict[int, float]:
    """The seconds of one micro-batch's step (no accumulation) at the space's largest micro-batch, which the
    pre-flight timed on the trials' device (check_plan: `heaviest`); {} when it timed none (a cluster's trials, a
    resume, a space whose baseline is its heaviest) or when that batch is the baseline's own. The baseline's batch
    is always probed: most trials draw their loader there, and the pre-flight's one step there, taken seconds
    before the probes, can be slowed by a moment's load (a shared 2-core machine timed the GAN's batch-64 step at
    0.5-3.5 s where a quiet one takes 0.06 s) while the probes' reading is not."""
    heavy = preflight.heaviest
    if heavy is None or heavy.batch_size == preflight.batch_size or \
            (heavy.step_samples is not None and heavy.step_samples != heavy.batch_size * heavy.accumulation_steps):
        return {}  # not timed, the baseline's own batch, or the batch cut to the dataset's size
    return {heavy.batch_size: heavy.step_seconds / heavy.accumulation_steps}


def too_slow_to_read(step_s: float, seconds: float, measure: Any) -> bool:
    """Whether a compute reading of `seconds` cannot hold a warm-up step and the fewest windows at this step time,
    even with PREFLIGHT_MARGIN times the deadline (tuner.measure.ceiling.check_fits, the trials' own rule)."""
    from tuner.measure.ceiling import CeilingSkipped, check_fits, stable_measure

    try:
        check_fits(PREFLIGHT_MARGIN * seconds, step_s, stable_measure(seconds, measure))
    except CeilingSkipped:
        return True
    return False


def not_set_up(batch: int, loaders: list[dict[str, Any]], speeds: list[dict[str, Any]], step_s: float,
               image: bool, device: str) -> ProbeChoice:
    """The choice at a batch size whose step the pre-flight timed too slow for a reading: what probing it would
    have concluded (no compute reading, so tuner's defaults and the cheapest loader), without building its models,
    warming it up and reading a step that cannot fit the deadline (2.4 s of the default study's probes for 'model
    not read'). Its input ceiling is not read either: trials there measure it where their ceilings are measured."""
    found = {"compute": None, "computes": [None] * len(speeds), "image": image, "inputs": [None], "device": device}
    choice = choice_of(batch, loaders[:1], found, speeds)
    choice.preflight_step_s = step_s
    return choice


def run_probes(space: Space, context: dict[str, Any], base: dict[str, Any], knobs: list[str],
               trial_resources: dict[str, float] | None, cache_path: Path | None, cache_dir: Path, *,
               seconds: float = PROBE_SECONDS, on_batch: Any = None, threads: int | None = None,
               on_cpu: bool = False, timed: dict[int, float] | None = None, device: str = "",
               numerics: dict[str, list[Any]] | None = None, decide_split: bool = False) -> ProbePlan:
    """Probe every candidate batch size in a Ray task with one trial's resources (`trial_resources`; None: in
    this process, as the efficiency benchmark does, with `threads` CPU threads if given), one batch size at a time
    (the probes must not share the hardware with each other), and choose a loader for each. `cache_path`: the
    study's ceiling cache, or None. `on_cpu`: the trials compute on a CPU (candidate_loaders). `timed`: the
    pre-flight's step of one micro-batch by batch size (preflight_steps: the largest micro-batch), on `device`: a
    batch size whose step is too slow for a reading there is not set up (not_set_up). `numerics`: the numerics
    knobs parity passed (within_noise), probed like speed knobs. `decide_split`: the kept effective batch's split
    is exact (no batch statistics), so every micro-batch of it is probed, with the accumulation its trials would
    run it with, and the fastest chosen (choose_split)."""
    from tuner.config import dump_config
    from tuner.space import kept_split, own_effective_batch

    t0 = time.perf_counter()
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
        if step_s is not None and too_slow_to_read(step_s, seconds, cfg.measure):
            choice = not_set_up(batch, loaders, speeds, step_s, image, device)
            choices.append(choice)
            if on_batch is not None:
                on_batch(choice)
            continue
        configs[batch] = json.dumps(dump_config(cfg))
        found = probe(configs[batch], loaders, seconds, str(cache_path) if cache_path else None, str(cache_dir),
                      speeds)
        device, image = found["device"], bool(found.get("image", True))
        choice = choice_of(batch, loaders, found, speeds)
        choices.append(choice)
        if on_batch is not None:
            on_batch(choice)
    if decide_split:
        def again(choice: ProbeChoice) -> float | None:
            return probe(configs[choice.batch_size], [choice.loader], seconds,
                         str(cache_path) if cache_path else None, str(cache_dir), [choice.speed])["compute"]

        split_read_again([c for c in choices if c.batch_size in configs], baseline.get("batch_size"), again,
                         on_cpu=not device.startswith("cuda"))
    split = choose_split(choices, effective, baseline.get("batch_size")) if decide_split and effective else None
    if split is not None:
        knobs = [*knobs, *(k for k in split if k not in knobs)]
    unread = given_back(knobs, choices)
    knobs = [k for k in knobs if k not in unread]
    return ProbePlan(knobs=knobs, choices=choices, seconds=time.perf_counter() - t0, device=device, split=split,
                     unread=unread)


def given_back(knobs: list[str], choices: list[ProbeChoice]) -> list[str]:
    """The compute-side knobs (speed, and numerics parity passed) the probes could not decide: no batch size gave
    a compute reading (every step too slow for one: a ResNet-18 at 64x64 on 2 CPUs, 0.4 s a step, against a 15 s
    budget's 0.75 s). Kept by the probes, they would stay at their defaults untried; the trials measure them."""
    if any(c.compute_ceiling is not None for c in choices):
        return []
    no_effect = {"channels_last"} if any(NO_4D_WEIGHTS in c.notes for c in choices) else set()
    # channels_last on models with no 4-D weight changes nothing the trials could measure: kept at its default
    return [k for k in knobs if KNOBS[k].probe == "compute" and not KNOBS[k].env and k not in no_effect]


def configs_left(space: Space, context: dict[str, Any], loaders: ProbePlan,
                 baseline: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """When the probes decided every knob the space searches (`--space loader` on a CPU): the distinct configs
    left to measure, the baseline's (tuner's defaults) and the probes' pick, one when they agree; None when the
    sampler still has a knob to search. Every further trial would run the same config again."""
    from tuner.config import Params

    if any(n not in loaders.knobs and not space.params[n].single for n in space.reachable(context)):
        return None
    fixed = space.fixed_values()
    points = ([baseline] if baseline is not None else []) + [loaders.loader_for(fixed.get("batch_size"))]
    configs: list[dict[str, Any]] = []
    for point in points:
        try:
            effective = Params.model_validate({**fixed, **point}).model_dump()
        except ValueError:
            effective = {**fixed, **point}
        if effective not in configs:
            configs.append(effective)
    return configs


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


def exact_split(plan: "SearchPlan", space: Space, context: dict[str, Any]) -> bool:
    """Whether the probes decide how the kept effective batch is split: the space searches the split of the
    workload's own effective batch, and the pre-flight found no batch-statistics layer in the models (every split
    then computes the same gradient: a speed knob). Unknown (no pre-flight on the trials' device): the trials
    search it."""
    from tuner.space import kept_split

    return ("batch_size" in space.reachable(context) and kept_split(space) is not None
            and plan.preflight.batch_statistics == [])


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
                     f"model not read (its steps do not fit a {seconds:g} s probe reading{timed}; the cheapest "
                     f"loader kept)")
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
                             decide_split=split)
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
        console.print(f"  {', '.join(loaders.unread)}: not read at any batch size (steps too slow for a {seconds:g} s "
                      f"probe reading): the trials search {'it' if len(loaders.unread) == 1 else 'them'}",
                      soft_wrap=True)
    if console is not None and loaders.split is not None:
        b, a = loaders.split["batch_size"], loaders.split["accumulation_steps"]
        console.print(f"  split: {b} x {a} for every trial (no batch statistics: every split of the effective batch "
                      f"{b * a} computes the same gradient, so the fastest probed is kept)", soft_wrap=True)
    return loaders

