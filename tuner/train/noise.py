"""A trial's gradient noise scale (tuner.measure.noise_scale), read in an untimed pass after its training.

Why a pass of its own rather than the training step's micro-batches: the baseline, whose noise scale every trial's
efficiency is judged by, trains with accumulation 1 (one batch size only), and a pass the same for every trial
reads each trial alike. The pass takes `GROUP` micro-batches of the trial's batch_size from its training data
(a loader without workers, its own shuffle), computes each one's gradient of the first phase's loss on the trained
models (unwrapped: eager, no DDP, fp32, no optimizer step, so the weights stay as training left them), and pairs
their mean squared norm (B_small = batch_size) with the squared norm of their mean (B_big = GROUP x batch_size);
a fixed number of such pairs (planned_pairs: 4, 8 or 16, the most whose time, judged from the first pair, fits its
cap noise_seconds(); at least the MIN_PAIRS an estimate needs where NOISE_SECONDS allow them). A fixed count, not
"as many as fit", so the same trained models read the same batches and give the same estimate on a quiet machine
and a loaded one (reading until the cap, three identical reference runs of the goodput benchmark gave 358, 218 and
381). What it took is the record's noise_seconds, after wall_seconds (like of_peak's): outside the timed windows
and the budget.

A workload of several phases (a GAN) gets none: its losses chase each other, so there is no one loss whose
gradient noise sets a critical batch (noise_scale_skipped says so).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tuner.config import Params, TrialConfig
from tuner.device import Device
from tuner.knobs import probed
from tuner.measure.noise_scale import MIN_PAIRS, NoiseScale

GROUP = 4  # micro-batches per pair: B_big = GROUP x batch_size
MAX_GROUPS = 16
NOISE_SECONDS = 3.0  # the pass's wall-time cap ...
NOISE_SHARE = 0.05  # ... and at most this share of a seconds budget
MULTI_PHASE = "several optimizer phases (a GAN): no single loss whose gradient noise sets a critical batch"
# A study's search trials leave the pass out: efficiency and the lr advice read the baseline's noise scale alone
# (tuner.analysis.goodput), and the pass cost a short trial more than its training (0.5-1.5 s after 0.2-0.3 s of
# training in benchmarks/overhead.py's 20 trials: most of the per-trial overhead against bare Ray Tune).
NOT_READ = "not read in a search trial: efficiency uses the baseline's noise scale alone"


def noise_seconds(cfg: TrialConfig) -> float:
    """The pass's wall-time cap for this trial: NOISE_SECONDS, at most a ceiling's deadline
    (measure.ceiling_seconds) and NOISE_SHARE of a seconds budget."""
    cap = min(NOISE_SECONDS, cfg.measure.ceiling_seconds)
    if cfg.budget.seconds is not None:
        cap = min(cap, NOISE_SHARE * cfg.budget.seconds)
    return cap


LEVELS = (MIN_PAIRS, 8, MAX_GROUPS)  # the pair counts a pass may plan: a coarse ladder, so load rarely moves it


def planned_pairs(pair_seconds: float, seconds: float) -> int:
    """How many pairs the pass reads, from its first pair's time: the most of LEVELS that fit its cap `seconds`;
    else MIN_PAIRS where they fit NOISE_SECONDS (a 15 s budget's 5% is 0.75 s: a loaded machine read 2 of the 4
    pairs there, and the baseline, whose noise scale every trial's efficiency uses, recorded none); else 1 (the
    pass stops and says why)."""
    fits = [n for n in LEVELS if n * pair_seconds <= seconds]
    if fits:
        return max(fits)
    return MIN_PAIRS if MIN_PAIRS * pair_seconds <= NOISE_SECONDS else 1


def measure_noise_scale(cfg: TrialConfig, device: Device, workload: Any, train_set: Any, models: dict[str, Any],
                        seconds: float, clock: Callable[[], float] = time.perf_counter,
                        step_seconds: float | None = None) -> tuple[NoiseScale | None, str | None]:
    """(the accumulated pairs, None) or (None, why not measured). Reads the pairs planned_pairs() gives after the
    first one; a machine that slows down past twice NOISE_SECONDS ends it early (fewer than MIN_PAIRS: none).

    `step_seconds`, the trial's training seconds a micro-batch: where even half the pair that pace implies leaves
    no room for MIN_PAIRS within NOISE_SECONDS, the pass is not begun. The cap is checked between pairs, so a first
    pair of slow steps ran whole: a new user's 2.4 s steps beside a busy process spent 33.6 s on it against a 3 s
    cap, and their 40 s baseline trial ran 119.5 s."""
    import torch

    from tuner.data import make_loader
    from tuner.data import to_device
    from tuner.train.distributed import unwrap
    from tuner.train.loop import forever
    from tuner.workload import Shared

    phases = workload.training_phases()
    if len(phases) != 1:
        return None, MULTI_PHASE
    if step_seconds is not None and MIN_PAIRS * GROUP * step_seconds / 2 > NOISE_SECONDS:
        return None, (f"at the training's {step_seconds:.2g} s a micro-batch, a pair of {GROUP} would take about "
                      f"{GROUP * step_seconds:.2g} s: the {MIN_PAIRS} pairs an estimate needs do not fit "
                      f"{NOISE_SECONDS:g} s")
    phase = phases[0]
    p = cfg.params
    plain = {k: unwrap(m) for k, m in models.items()}
    owned = [t for k in phase.models for t in plain[k].parameters() if t.requires_grad]
    if not owned:
        return None, "no trainable parameters"
    loader_params = p.model_copy(update=Params.defaults(probed("input")))  # tuner's default loader: in-process
    loader = make_loader(train_set, loader_params, device, seed=p.seed + 7919, collate_fn=workload.collate)
    if len(loader) == 0:
        return None, f"the training split holds no full batch of {p.batch_size}"
    est = NoiseScale()
    b = float(p.batch_size)
    t0 = clock()
    it = forever(loader)  # a small dataset's next epoch, newly shuffled: each pair's batches are still random
    was = {k: m.training for k, m in plain.items()}
    for m in plain.values():
        m.train()
    planned, began, first = MAX_GROUPS, 0.0, 0.0
    try:
        while est.pairs < planned and (spent := clock() - t0) < 2 * NOISE_SECONDS:
            if est.pairs == 0:
                began = spent
            elif est.pairs == 1:
                first = spent - began
                planned = planned_pairs(first, seconds)
                if planned <= 1:
                    break
            total: list[Any] | None = None
            small = torch.zeros((), dtype=torch.float64, device=device.torch_device)
            batches = [to_device(next(it), device.torch_device) for _ in range(GROUP)]
            for i, batch in enumerate(batches):
                loss = phase.loss(plain, batch, Shared(i, GROUP))
                grads = torch.autograd.grad(loss.float(), owned, allow_unused=True)
                grads = [g if g is not None else torch.zeros_like(t) for g, t in zip(grads, owned)]
                small += sum(g.double().pow(2).sum() for g in grads)
                if total is None:
                    total = [g.detach().clone() for g in grads]
                else:
                    torch._foreach_add_(total, grads)
            assert total is not None
            big = sum((g.double() / GROUP).pow(2).sum() for g in total)
            est.add(float(small) / GROUP, float(big), b, GROUP * b)  # one read per pair: outside any window
    finally:
        for k, m in plain.items():
            m.train(was[k])
    if est.pairs < MIN_PAIRS:
        if planned <= 1:
            return None, (f"a pair of {GROUP} micro-batches took {first:.2g} s: the {MIN_PAIRS} pairs an estimate "
                          f"needs do not fit {NOISE_SECONDS:g} s")
        return None, f"{est.pairs} of the {MIN_PAIRS} pairs of {GROUP} micro-batches it needs within {seconds:.1f} s"
    return est, None
