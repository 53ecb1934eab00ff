"""A trial's rungs and target during its training loop: the window and rung reports, a rung's quality evaluation,
the target's evaluations every K samples and its quality curve, all outside the loop's clock (tuner.train.trial
runs the loop)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

from tuner.config import TrialConfig
from tuner.device import Device
from tuner.study import TrialResult
from tuner.target import CurvePoint, past_cap
from tuner.train._build import Training, score, score_target
from tuner.train.distributed import Agreement, rank_world
from tuner.train.reports import RungReport, TrialReporter, WindowReport
from tuner.train.step import PhaseStep


class _Run(Protocol):
    """What the rungs read of the trial's run state (tuner.train.trial._Run): named here, not imported, since the
    trial imports this module."""

    cfg: TrialConfig
    device: Device
    clock: Callable[[], float]
    result: TrialResult
    step: PhaseStep | None
    reporter: TrialReporter | None
    train_limit_s: float | None

    def _phase(self, phase: str, limit_s: float, wall_limit_s: float | None = None) -> None: ...


class _DivergedAtRung(Exception):
    """The quality a rung evaluation read is not finite: the trial ends there as diverged."""


class _NoReports:
    """The reporter of a trial nobody reports to (`tuner train --until-target`): no rungs, reports dropped."""

    rungs: list[float] = []

    def window(self, report: WindowReport) -> None:
        pass

    def rung(self, report: RungReport) -> None:
        pass


class _Rungs:
    """The window and rung reports of one trial (tuner.train.reports). A rung's evaluation runs at the end of
    the first window that reaches its budget, outside the timed windows; the loop's clock is paused meanwhile, and
    a seconds budget keeps one scoring per rung the trial can reach out of training's share (`scale`: the rung
    points sit at the same fractions of that share, and reports give the budget used in the whole budget's
    terms). The share follows the reserve as it grows (a step slower than the pre-flight's) or shrinks (the
    rungs' evaluations measured), and the rung points with it, so every rung is reached before training ends.
    Under DDP every rank calls the reporter alike (rank 0's reports count) and every rung decision is
    agreed."""

    def __init__(self, run: "_Run", reporter: TrialReporter, training: Training, world: int) -> None:
        self.run, self.reporter, self.training = run, reporter, training
        budget = run.cfg.budget
        whole = float(budget.seconds if budget.seconds is not None else budget.samples)  # type: ignore[arg-type]
        self.points = [float(b) for b in reporter.rungs if float(b) < whole * (1 - 1e-9)]  # the last: the trial's end
        self.agree = Agreement(world)
        self.paused = 0.0
        self.rates: list[float] = []
        self.timed = [0.0, 0.0]  # the windows' samples and seconds so far (all ranks' samples)
        self.losses: list[list[float | None]] = []
        self.closed = 0  # rungs evaluated so far
        self.start = 0.0
        self.scale = 1.0  # training's share of the budget over the budget (the scoring reserve left out)
        self.evals: list[float] = []  # wall seconds of each rung evaluation so far
        self.reported = 0.0  # the budget used last reported: a share that grew back never reports less
        # A target's evaluations every K samples (tuner.target): paused out of the loop's clock like a rung's.
        self.target = run.cfg.target
        self.next_eval = self.target.eval_every_samples if self.target is not None else None
        self.curve: list[CurvePoint] = []
        self.target_eval_s = 0.0
        self.reached = False
        self.over_cap = False  # past the target's cap without meeting it: ends `not reached` (tuner.target)
        self.last_quality: dict[str, Any] | None = None  # the last evaluation's metrics (rank 0)
        self.fewest = min(run.cfg.measure.min_windows, run.cfg.measure.windows)

    @property
    def finished(self) -> bool:
        """No more evaluations: the target was met, or its cap passed without meeting it."""
        return self.reached or self.over_cap

    @property
    def done(self) -> bool:
        """The trial may stop: no more evaluations, and its throughput read from the fewest windows a reading
        has (measure.min_windows). A trial that met the target before them goes on to them, windows cut every K
        samples as before, unevaluated: stopped at one window, its throughput was suspect (tuner.analysis.suspect)
        and so were its re-runs', so a study ranking throughput passed over the configs that reach it soonest."""
        return self.finished and len(self.rates) >= self.fewest

    def sample_points(self) -> list[int]:
        """Where the loop ends a window for the target's next evaluation, or after it the next window the reading
        still needs (tuner.train.loop's sample_points)."""
        return [self.next_eval] if self.next_eval is not None and not self.done else []

    def train_points(self) -> list[float]:
        return [b * self.scale for b in self.points]

    def clock(self) -> float:
        return self.run.clock() - self.paused

    def window(self, w: dict[str, Any]) -> None:
        import statistics

        self.rates.append(float(w["throughput"]))
        self.timed[0] += float(w.get("timed_samples", 0.0))
        self.timed[1] += float(w.get("timed_seconds", 0.0))
        loss = w.get("train_loss")
        loss = float(loss) if loss is not None and math.isfinite(loss) else None
        self.losses.append([float(w["samples"]), loss])
        med = statistics.median(self.rates)
        spread = (max(self.rates) - min(self.rates)) / med if med > 0 else None
        # the windows' rate so far, as the trial's own throughput reads (tuner.measure.timing.summarize)
        rate = self.timed[0] / self.timed[1] if self.timed[1] > 0 else med
        used = float(w["budget_used"])
        self.reported = max(self.reported, used / self.scale)
        self.reporter.window(WindowReport(window=int(w["window"]), budget_used=self.reported,
                                          samples=int(w["samples"]), throughput=rate, throughput_spread=spread,
                                          train_loss=loss, train_seconds=self.clock() - self.start,
                                          time_to_target=self.curve[-1].seconds if self.reached else None))
        # past the target the trial only reads its last windows (done): no rung closes there, and the race
        # (tuner.schedule.race) leaves a window that says it reached the target alone
        due = not self.finished and self.closed < len(self.points) \
            and used >= self.points[self.closed] * self.scale * (1 - 1e-9)
        if self.agree.any(due):
            self._close(used, int(w["samples"]), rate, spread, med)
        if self.next_eval is not None and not self.finished and self.agree.any(int(w["samples"]) >= self.next_eval):
            self._evaluate_target(int(w["samples"]))

    def at_end(self, samples: int) -> None:
        """The loop's end: the target's evaluation a samples budget's untimed last steps made due (no window
        followed them to report it)."""
        if self.next_eval is not None and not self.finished and self.agree.any(samples >= self.next_eval):
            self._evaluate_target(samples)

    def _evaluate_target(self, samples: int) -> None:
        """The quality at `samples` on the target's metric, a point of the quality curve; reached when it meets
        the target (every rank agrees; rank 0 evaluates). Outside the timed windows and the loop's clock."""
        run, target = self.run, self.target
        assert target is not None and self.next_eval is not None
        rank, _ = rank_world()
        t = run.clock()
        trained = self.clock() - self.start
        value: float | None = None
        workload = self.training.workload
        if rank == 0 and workload.evaluate is not None:
            # a subset where the workload asks (issue 51); its end scores the whole
            quality = score_target(workload, self.training.models, self.training.val_set, run.device)
            quality.pop("sample_grid", None)
            self.last_quality = quality
            v = quality.get(target.metric)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                value = float(v)
        self.curve.append(CurvePoint(samples, trained, value))
        self.reached = self.agree.any(target.met(value))
        self.over_cap = not self.reached and self.agree.any(past_cap(self.curve[-1], target))
        while self.next_eval <= samples:
            self.next_eval += target.eval_every_samples
        took = run.clock() - t
        self.target_eval_s += took
        self.paused += took
        if run.train_limit_s is not None and getattr(run.reporter, "phase", None) is not None:
            run._phase("train", run.train_limit_s)  # the driver's limit from now: evaluations are not training

    def _close(self, used: float, samples: int, throughput: float, spread: float | None, median: float) -> None:
        run, cfg = self.run, self.run.cfg
        rank, _ = rank_world()
        t = run.clock()
        first = self.closed
        while self.closed < len(self.points) and used >= self.points[self.closed] * self.scale * (1 - 1e-9):
            self.closed += 1  # a window that crossed two rungs closes both, with the same figures
        rung = self.closed - 1
        used = self.reported = max(self.reported, used / self.scale)  # in the whole budget's terms, as the rungs are
        res = run.result
        part = TrialResult(state="stopped", device=res.device, windows=list(self.rates),
                           loss_curve=[list(x) for x in self.losses], optimizer=res.optimizer, rung=rung,
                           measured_at=used)
        part.metrics.update(throughput=throughput, throughput_spread=spread, throughput_median=median, samples=samples,
                            train_seconds=self.clock() - self.start, peak_mem_mb=run.device.peak_memory_mb())
        per_sample = run.step.units_per_sample() if run.step is not None else None
        if per_sample is not None:
            part.metrics.update(unit_throughput=throughput * per_sample, sample_unit=self.training.workload.sample_unit)
        bad = False
        workload = self.training.workload
        if rank == 0 and cfg.quality.enabled and workload.evaluate is not None:
            quality = score(workload, self.training.models, self.training.val_set, run.device)
            quality.pop("sample_grid", None)
            part.metrics.update(quality)
            if workload.quality is not None:
                value = quality.get(workload.quality[0])
                bad = isinstance(value, (int, float)) and not math.isfinite(value)
                if bad:
                    part.metrics[workload.quality[0]] = None
        diverged = self.agree.any(bad)  # also the barrier the other ranks wait at while rank 0 evaluates
        if not diverged:
            for i in range(first, self.closed):
                self.reporter.rung(RungReport(rung=i, budget_used=used, result=part.model_copy(update={"rung": i})))
        self.evals.append(run.clock() - t)
        self.paused += self.evals[-1]
        res.rung, res.measured_at = rung, used
        if diverged:
            raise _DivergedAtRung(f"quality metric {workload.quality[0] if workload.quality else ''} is not finite at "
                                  f"rung {rung} (the model's outputs are not)")

