"""The loader knobs by input-ceiling probes (tuner.search._probe runs them): which loaders are probed at a batch
size, what a trial with each is predicted to reach against the model's compute ceiling, and the one taken.

num_workers, prefetch_factor, persistent_workers and pin_memory never change what is learned, only how fast
batches arrive. So for each probed batch size the study keeps the cheapest loader that feeds the model, and each
trial gets the loader chosen for the probed batch size nearest its own.

The rule (`choose`): on a GPU a loader with workers overlaps loading with compute, so the trial can reach the lower
of the two ceilings; without workers loading and compute take turns (1/(1/compute + 1/input)). When the model
computes on the CPU, the workers load on the very cores the model computes on, so loading and compute take turns
whatever the loader (both ceilings were measured with all of the trial's cores); and when loading in the training
process already keeps the model at COMPUTE_BOUND_AT of its compute ceiling, no worker is taken at all: workers could
add at most the rest, and on a CPU they take it from the model's cores (in the default study a config with 2 workers
ran 9% slower than the same batch loaded in-process, which the probes predicted at 81%). Among loaders within
TOLERANCE of the best prediction the cheapest wins: fewer workers, then less prefetch, then no pinning. Loaders
predicted within 10% of the best (tuner.train.probe.CLOSE, as for the speed knobs: tuner.search._speed_probe) are
read again, in reverse order and past the ceiling cache, and each keeps its best reading (`loaders_close`;
probes.json keeps every reading): one reading each on a busy machine decided by a moment's load (issue 52 item 5).

Which loaders are probed at all (`loaders_decided`, in the candidates' order, cheapest first): the rest of them are
skipped once they cannot change the choice. Without a compute ceiling (a step too slow for the probe's deadline: the
GAN at batch 256 on 2 cores) nothing is predicted and the cheapest loader is taken, so only it is probed (its input
ceiling still lands in the cache), and the speed knobs are not read either (a value is kept only against a defaults'
reading). On a CPU loading and compute take turns whatever the loader, so no loader is predicted above the compute
ceiling: once in-process loading reaches COMPUTE_BOUND_AT of it, or the loader the rule takes now reaches
1 - TOLERANCE of it with only costlier ones left, no later loader can win. For the same reason, on a CPU each worker
count is probed with the smallest prefetch only: the prefetch depth is a queue's length, which does not change the
rate the workers deliver in steady state (the input ceiling reads that rate, with a consumer that only copies), and
taking turns leaves a deeper queue nothing to overlap; a larger prefetch could win only by a reading's noise (the
default study on a quiet machine read 2433 / 2515 samples/s with prefetch 1 / 8 at one worker, 4561 / 4399 at two:
predicted within 1%). On a GPU every loader is probed (workers overlap compute there: a costlier loader can still
lift the prediction to the lower ceiling).

Checked on the efficiency benchmark's grid (CNN on digits, 2 cores): at batch 16 the probes gave compute 2005,
input 6107 / 2384 / 4144 samples/s with 0 / 1 / 2 workers, so 1509 / 1089 / 1351 predicted; the grid measured
1573 / 923 / 1055 end to end. Counting the workers' loading as overlapped instead would have predicted 2005 for
one worker, and picked the slowest loader.
"""

from __future__ import annotations

import itertools
from typing import Any

from tuner.knobs import KNOBS, WORKERS, probed
from tuner.space import Space
from tuner.study import LoaderProbe

LOADER_KNOBS = probed("input")  # tuner.knobs: num_workers, prefetch_factor, persistent_workers, pin_memory
TOLERANCE = 0.05  # loaders predicted within 5% of the best are equally good: take the cheapest


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


def loaders_close(compute: float | None, done: list[dict[str, Any]], inputs: list[float | None], *,
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


def loaders_decided(compute: float | None, done: list[dict[str, Any]], inputs: list[float | None],
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
