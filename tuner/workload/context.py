"""What a workload's own code may ask about the trial it runs in: `tuner.trial_context()`.

A workload factory, its datasets(), losses and evaluate() are called by tuner inside a trial; when they need the
trial's device, a folder for artifacts (sample images) or caches, the seed, or the DDP rank, they read it here
instead of through globals. Outside a trial, `trial_context()` raises.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from tuner.config import Params, Quality


@dataclass(frozen=True)
class TrialContext:
    """The running trial, as a workload sees it (through `tuner.trial_context()`).

    Attributes:
        device: the torch device the models train on.
        cache_dir: a folder for caches shared by the trials of a study (tuner keeps its dataset and FID caches
            here).
        out_dir: this trial's own folder for artifacts (e.g. a sample grid), or None when nothing is kept.
        seed: the trial's seed (tuner has already seeded torch with it, and with seed + rank after DDP wrapping).
        rank: the DDP rank (0 without DDP).
        world_size: the number of DDP processes (1 without DDP).
        params: the trial's knobs (batch size, precision, ...), read-only.
        quality: the config's quality settings (FID sample count and extractor for the built-in GAN).
        preflight: True while tuner checks the workload before a run (one evaluate() call on a few validation
            batches): keep expensive scoring cheap then, the result is only checked for its keys.
        eval_subset: while evaluate() is a time-to-target evaluation of a workload that asks for a subset
            (`Workload.target_eval_samples`), that number (its batches hold that many validation samples, or the
            whole split where it is smaller); None when it scores the whole split for the trial's quality. An
            evaluate() that scores something else than its batches (the built-in GAN's FID over generated
            images) sizes that by it.
        extra: free-form entries tuner may add; not part of the contract.
    """

    device: "torch.device"
    cache_dir: Path
    out_dir: Path | None = None
    seed: int = 0
    rank: int = 0
    world_size: int = 1
    params: "Params | None" = None
    quality: "Quality | None" = None
    preflight: bool = False
    eval_subset: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def with_(self, **changes: Any) -> "TrialContext":
        return replace(self, **changes)


_CURRENT: contextvars.ContextVar[TrialContext | None] = contextvars.ContextVar("tuner_trial", default=None)


def trial_context() -> TrialContext:
    """The trial the calling code runs in, for a workload's factory, datasets, loss or evaluate to read.

    Returns:
        The running trial's `TrialContext`.

    Raises:
        RuntimeError: outside a trial (tuner sets it while it runs your workload's code).

    Example:
        ```python
        def evaluate(models, val_batches):
            ctx = tuner.trial_context()
            n = 64 if ctx.preflight else 1000  # the pre-flight only checks the keys: keep it cheap
            ...
        ```
    """
    ctx = _CURRENT.get()
    if ctx is None:
        raise RuntimeError("tuner.trial_context() is only available while tuner runs a trial (inside the workload's "
                           "factory, datasets, loss or evaluate)")
    return ctx


@contextlib.contextmanager
def running(ctx: TrialContext) -> Iterator[TrialContext]:
    """Make `ctx` the current trial for the duration (tuner's engine and pre-flight check use this)."""
    token = _CURRENT.set(ctx)
    try:
        yield ctx
    finally:
        _CURRENT.reset(token)
