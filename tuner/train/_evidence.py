"""What a complete trial measures after training, each evidence and never the trial's failure: its compute and
input ceilings and the headroom verdict, of_peak (FLOPs per sample counted, the device's matmul peak) and the
gradient noise scale. A mixin of the trial's run state (tuner.train.trial._Run), whose fields it reads."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tuner.config import TrialConfig
from tuner.device import Device, is_oom
from tuner.errors import error_line
from tuner.measure.ceiling import NOT_MEASURED, STABLE, CeilingCache
from tuner.study import TrialResult, assess
from tuner.train.ceilings import CeilingNote, ceilings, first_batch
from tuner.train.distributed import rank_world, unwrap
from tuner.train.step import PhaseStep
from tuner.workload import Workload


CEILING_SHARE = 0.05  # each ceiling's deadline is at most this share of the budget: both fit the 10% margin


@dataclass
class _Evidence:
    """What `_Run._evidence` saw of its block: `failed` when the block raised (the record says why)."""
    failed: bool = False


class _AfterTraining:
    """The trial's measurements after training, on the run state's fields (set by tuner.train.trial._Run)."""

    cfg: TrialConfig
    device: Device
    clock: Callable[[], float]
    result: TrialResult
    models: dict[str, nn.Module] | None
    step: PhaseStep | None
    workload: Workload | None
    train_set: Any

    def ceilings(self, cache: CeilingCache | None, measure: bool = True) -> None:
        """Both ceilings of a complete trial, on the same process and resources, after scoring (the models may
        train on: they are done), then the verdict. A ceiling that fails is left out; the trial stands. With
        `measure` False (a search trial: nobody reads its verdict unless it makes the front) only the note why."""
        res, cfg, device = self.result, self.cfg, self.device
        seconds = cfg.measure.ceiling_seconds  # a samples budget has no wall-time contract to share with
        if cfg.budget.seconds is not None:
            seconds = min(seconds, CEILING_SHARE * cfg.budget.seconds)
        if not res.complete or self.workload is None or self.models is None or seconds <= 0:
            return
        if not measure:
            res.metrics["ceiling_skipped"] = NOT_MEASURED
            return
        rank, world = rank_world()
        t0 = self.clock()
        self.step = None  # the training's optimizer state: the compute ceiling builds its own
        notes: dict[str, CeilingNote] = {}
        # Each reading ends once its rate is stable (STABLE), as the probes' do: a steady rate needs no more of
        # the deadline, which the confirmation's re-runs paid in full for each confirmed config.
        found = ceilings(cfg, device, self.workload, self.train_set, self.models, seconds, cache,
                         rank=rank, world=world, step_seconds=res.value("step_seconds"), notes=notes,
                         clock=self.clock, stable=STABLE)
        for kind, value in found.items():
            res.metrics[f"{kind}_ceiling"] = value
        if notes:
            res.metrics["ceiling_skipped"] = "; ".join(f"{k}: {v}" for k, v in notes.items())
        res.metrics["ceiling_seconds"] = self.clock() - t0
        self.verdict()

    def verdict(self) -> None:
        """The headroom verdict from the ceilings (and of_peak, once known)."""
        res = self.result
        res.metrics.update(assess(res.throughput, res.metrics.get("compute_ceiling"),
                                  res.metrics.get("input_ceiling"), params=self.cfg.params.model_dump(),
                                  data_wait=res.metrics.get("data_wait"), device=res.device,
                                  of_peak=res.metrics.get("of_peak")).metrics())

    def of_peak(self, cache: CeilingCache | None, cache_dir: Path) -> None:
        """FLOPs per sample, the device's matmul peak and of_peak (tuner.measure.flops), then the verdict again.
        Run after wall_seconds: both are one-time costs, cached like set-up's. Rank 0 alone (the count runs the
        unwrapped models: no collective). A count or a peak that fails leaves of_peak out with the reason in
        of_peak_skipped; the trial stands."""
        from tuner.measure.flops import PEAK_SECONDS, PeakBusy, of_peak, peak_flops, peak_knobs

        res, cfg, p = self.result, self.cfg, self.cfg.params
        rank, world = rank_world()
        if not res.complete or self.workload is None or self.models is None or rank != 0 \
                or cfg.measure.ceiling_seconds <= 0 or res.throughput is None:
            return
        t0 = self.clock()
        per_sample = 0.0
        with self._evidence("of_peak_skipped", "FLOPs not counted", "of_peak_seconds", t0) as counted:
            per_sample = self._flops_per_sample(cache)  # a user model the counter cannot follow still trained
        if counted.failed:
            return
        res.metrics["flops_per_sample"] = per_sample
        if not per_sample:
            res.metrics["of_peak_skipped"] = ("no matmul, convolution or attention FLOPs counted in the step "
                                              "(elementwise work is not counted)")
            return
        peak = None
        with self._evidence("of_peak_skipped", "peak not measured", "of_peak_seconds", t0) as measured:
            try:
                peak, _ = peak_flops(self.device, peak_knobs(p, self.device, torch.get_num_threads()), cache_dir,
                                     min(PEAK_SECONDS, cfg.measure.ceiling_seconds),
                                     at_least=res.throughput * per_sample / world)
            except PeakBusy as err:  # a low peak: no of_peak read from it (the next quiet trial measures it)
                res.metrics["of_peak_skipped"] = f"the matmul peak was {err}"
                return
        if measured.failed:
            return
        res.metrics["peak_flops"] = peak or None
        res.metrics["of_peak"] = of_peak(res.throughput, per_sample, peak, world)
        self.verdict()

    def noise_scale(self, measure: bool = True) -> None:
        """The trial's effective batch (all ranks) and its gradient noise scale (tuner.train.noise): rank 0 of a
        complete trial alone, its cost in noise_seconds. A pass that fails or cannot read enough pairs leaves the
        noise scale out with the reason in noise_scale_skipped; the trial stands. Without `measure` (a study's
        search trial other than its baseline) the pass is left out and the record says why."""
        from tuner.train.noise import NOT_READ, measure_noise_scale, noise_seconds

        res, cfg = self.result, self.cfg
        rank, world = rank_world()
        if not res.complete:
            return
        res.metrics["effective_batch"] = cfg.params.effective_batch * world
        if not measure:
            res.metrics["noise_scale_skipped"] = NOT_READ
            return
        if self.workload is None or self.models is None or rank != 0 or cfg.measure.ceiling_seconds <= 0:
            return
        t0 = self.clock()
        found, why = None, None
        with self._evidence("noise_scale_skipped", "not measured", "noise_seconds", t0) as read:
            pace = cfg.params.batch_size * world / res.throughput if res.throughput else None
            found, why = measure_noise_scale(cfg, self.device, self.workload, self.train_set, self.models,
                                             noise_seconds(cfg), clock=self.clock, step_seconds=pace)
        if read.failed:
            return
        value = found.value() if found is not None else None
        if value is None:
            res.metrics["noise_scale_skipped"] = why or (
                "the true gradient's squared norm read <= 0 over the pairs: the gradient noise swamps it at this "
                "batch size")
            return
        res.metrics["noise_scale"] = value

    def _flops_per_sample(self, cache: CeilingCache | None) -> float:
        """From the study's cache (flops.json beside its ceilings.json), else counted on steps of one micro-batch of
        the trial's models, unwrapped (DDP, compile), each with a fresh optimizer: first at the small batches of
        tuner.measure.flops, whose count, the same per sample at each, holds at every batch size and is cached so
        (the study's other batch sizes count nothing); else at the trial's own batch size, cached for it, with the
        model's dependence on the batch cached too (its next batch size is not checked again)."""
        from tuner.measure.flops import FLOPS_FILE, SMALL_BATCHES, flops_key

        cfg, p = self.cfg, self.cfg.params
        assert self.workload is not None and self.models is not None
        key, any_key = flops_key(cfg), flops_key(cfg, any_batch=True)
        cache = cache.sibling(FLOPS_FILE) if cache is not None else None  # beside ceilings.json
        if cache is not None:
            value = cache.get(any_key) or cache.get(key)
            if value is not None:
                return value
        plain = {k: unwrap(m) for k, m in self.models.items()}  # the user's modules: counted in eager mode
        # A counted step updates the weights: they come back after each, so DDP's replicas stay equal on every
        # rank (only rank 0 counts) and the trained models are as training left them.
        saved = {k: {n: t.detach().clone() for n, t in m.state_dict().items()} for k, m in plain.items()}
        full = self._first_batch(p.batch_size)
        if p.batch_size > max(SMALL_BATCHES) and (cache is None or cache.entry(any_key) is None):
            value, found = self._small_batch_flops(plain, saved, full)
            if cache is not None:  # value 0: a marker, this model's count depends on the batch size
                cache.put(any_key, value, {"kind": "flops", "workload": cfg.workload, **found})
            if value > 0:
                return value
        flops, samples = self._count_flops(plain, saved, full)
        value = flops / samples if samples else 0.0
        if value > 0 and cache is not None:
            cache.put(key, value, {"kind": "flops", "workload": cfg.workload, "batch_size": p.batch_size})
        return value

    def _first_batch(self, size: int) -> Any:
        """The first micro-batch of `size` samples of the trial's loader without workers, on the device (the batch
        a compute ceiling steps on, at that size)."""
        assert self.workload is not None
        cfg = self.cfg.model_copy(update={"params": self.cfg.params.model_copy(update={"batch_size": size})})
        return first_batch(cfg, self.device, self.workload, self.train_set)

    def _count_flops(self, plain: dict[str, nn.Module], saved: dict[str, dict[str, torch.Tensor]],
                     batch: Any) -> tuple[int, int]:
        """(FLOPs, samples) of one step on `batch` with a fresh optimizer; the weights and buffers back to `saved`."""
        from tuner.measure.flops import count_step_flops

        assert self.workload is not None
        try:  # one micro-batch: accumulation repeats the same counted work per sample (a k-fold slower count)
            step = PhaseStep(self.workload, plain, self.cfg.params.model_copy(update={"accumulation_steps": 1}),
                             self.device)
            return count_step_flops(step, batch)
        finally:
            for k, m in plain.items():
                m.load_state_dict(saved[k])

    def _small_batch_flops(self, plain: dict[str, nn.Module], saved: dict[str, dict[str, torch.Tensor]],
                           full: Any) -> tuple[float, dict[str, Any]]:
        """(FLOPs per sample counted at the small batches when they hold at every batch size (tuner.measure.flops),
        else 0; what was found, for the cache's entry)."""
        from tuner.measure.flops import SMALL_BATCHES, differ_in_batch_only, same_per_sample

        sizes = list(SMALL_BATCHES)
        try:
            batches = [self._first_batch(n) for n in sizes]
            if not differ_in_batch_only([*batches, full], [*sizes, self.cfg.params.batch_size]):
                return 0.0, {"batch_independent": False, "sizes": sizes,
                             "why": "the batches differ beyond their batch size"}
            counts = [self._count_flops(plain, saved, b) for b in batches]
        except Exception as err:  # noqa: BLE001 - a model that cannot take so small a batch is counted at its own
            return 0.0, {"batch_independent": False, "sizes": sizes, "why": error_line(err)}
        per_sample = [f / n if n else 0.0 for f, n in counts]
        if not same_per_sample(counts):
            return 0.0, {"batch_independent": False, "sizes": sizes, "flops_per_sample": per_sample}
        return per_sample[0], {"batch_independent": True, "sizes": sizes}

    @contextlib.contextmanager
    def _evidence(self, skipped: str, why: str, seconds: str, t0: float) -> Iterator[_Evidence]:
        """A measurement after training that is evidence, never the trial's failure (FLOPs, the matmul peak, the
        noise scale): an exception in the block (KeyboardInterrupt aside) is dropped, its memory freed after an
        OOM, and the record says why in `skipped` ("<why>: <error line>"); the block's time since `t0` goes in
        `seconds` either way. The caller reads `failed` and stops there."""
        outcome = _Evidence()
        try:
            yield outcome
        except KeyboardInterrupt:
            raise
        except Exception as err:  # noqa: BLE001 - evidence, never the trial's failure
            self._drop_after(err)
            self.result.metrics[skipped] = f"{why}: {error_line(err)}"
            outcome.failed = True
        finally:
            self.result.metrics[seconds] = self.clock() - t0

    def _drop_after(self, err: BaseException) -> None:
        if is_oom(err):
            gc.collect()
            self.device.free_memory()

