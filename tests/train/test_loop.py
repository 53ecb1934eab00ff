"""The measured loop: warm-up exclusion, window count, budgets, divergence, clock reads after a sync."""

import itertools
import math

import pytest
import torch

from tuner.config import Budget, Measure
from tuner.device import Device
from tuner.train.loop import run_loop
from tests.helpers.fakes import FakeClock, FakeCudaDevice


class FakeStep:
    """Each step consumes `batch` samples and advances the clock by a per-step duration."""

    def __init__(self, clock, durations, batch=10, losses=None):
        self.clock, self.durations, self.batch = clock, iter(durations), batch
        self.losses = losses
        self.calls = 0

    def __call__(self, batches):
        next(batches)
        self.clock.advance(next(self.durations))
        self.calls += 1
        return self.batch

    def pop_mean_loss(self):
        return self.losses(self.calls) if self.losses else 1.0


def run(step, clock, budget, measure, device=None, **kw):
    return run_loop(step, itertools.repeat(None), budget=budget, measure=measure,
                    device=device or Device("cpu", torch.device("cpu")), clock=clock, **kw)


def test_slow_warmup_steps_do_not_move_the_median():
    clock = FakeClock()
    slow_first = [5.0] * 3 + [0.01] * 10_000  # 3 pathological first steps, then 1000 samples/s
    res = run(FakeStep(clock, slow_first), clock, Budget(samples=2030), Measure(warmup_steps=3, windows=5))
    rates = [w.throughput for w in res.windows]
    assert len(rates) == 5
    assert all(math.isclose(r, 1000.0) for r in rates)
    # Without warm-up the first window absorbs the slow steps.
    clock = FakeClock()
    res = run(FakeStep(clock, slow_first), clock, Budget(samples=2000), Measure(warmup_steps=0, windows=5))
    assert res.windows[0].throughput < 100


def test_samples_budget_is_spent_and_counted_once():
    clock = FakeClock()
    res = run(FakeStep(clock, itertools.repeat(0.01)), clock, Budget(samples=1000), Measure(warmup_steps=2, windows=4))
    assert res.samples >= 1000 and res.samples < 1000 + 4 * 10
    assert sum(w.samples for w in res.windows) == res.samples - 20


def test_seconds_budget_covers_warmup_and_windows():
    clock = FakeClock()
    res = run(FakeStep(clock, itertools.repeat(0.1)), clock, Budget(seconds=10), Measure(warmup_steps=5, windows=5))
    assert len(res.windows) == 5
    assert 10 <= res.seconds <= 10.6
    assert all(math.isclose(w.seconds, 1.9, abs_tol=0.11) for w in res.windows)


def test_every_clock_read_follows_a_device_sync():
    clock, dev = FakeClock(), FakeCudaDevice()
    reads = []
    syncs_at_read = []
    original = dev.synchronize

    def counting_clock():
        reads.append(clock())
        return clock()

    def sync():
        original()
        syncs_at_read.append(len(reads))

    dev.synchronize = sync
    res = run_loop(FakeStep(clock, itertools.repeat(0.01)), itertools.repeat(None), budget=Budget(samples=500),
                   measure=Measure(warmup_steps=1, windows=5), device=dev, clock=clock)
    # Timer: one start and one close per window, each a sync then a read; each warm-up step is synced (untimed).
    assert dev.sync_calls == 10 + res.warmup_steps


def test_non_finite_loss_stops_the_run_as_diverged():
    clock = FakeClock()
    step = FakeStep(clock, itertools.repeat(0.01), losses=lambda calls: float("nan") if calls > 20 else 1.0)
    res = run(step, clock, Budget(samples=10_000), Measure(warmup_steps=1, windows=10))
    assert res.diverged
    assert len(res.windows) < 10


def test_wall_limit_caps_a_slow_config_but_keeps_its_throughput():
    clock = FakeClock()
    res = run(FakeStep(clock, itertools.repeat(1.0)), clock, Budget(samples=100_000),
              Measure(warmup_steps=1, windows=5), wall_limit_s=30)
    assert res.capped
    assert res.seconds <= 31
    assert res.windows and all(math.isclose(w.throughput, 10.0) for w in res.windows)


def test_a_config_slower_than_the_cap_stops_warming_up_early_and_reads_no_one_step_window():
    clock = FakeClock()
    res = run(FakeStep(clock, itertools.repeat(21.0)), clock, Budget(seconds=15),
              Measure(warmup_steps=3, windows=5), wall_limit_s=30)
    assert res.capped and res.windows == []  # the cap cut the first window at one step: no reading from it
    assert res.steps == 2 and res.seconds <= 42 and res.dropped_steps == 1


@pytest.mark.parametrize("budget_s, windows", [(20, 5), (12, 3)])
def test_a_slow_step_gets_fewer_windows_of_several_steps_within_the_budget(budget_s, windows):
    clock = FakeClock()
    res = run(FakeStep(clock, itertools.repeat(1.0)), clock, Budget(seconds=budget_s),
              Measure(warmup_steps=2, windows=5, min_windows=3, window_min_steps=3))
    assert len(res.windows) == windows
    assert all(w.samples >= 3 * 10 for w in res.windows)  # at least three 1-s steps of 10 samples each
    assert res.seconds <= budget_s + 1.0  # within one step of the budget


def test_a_budget_too_short_for_the_fewest_windows_never_reads_a_one_step_window():
    """The contract before the count: a window that cannot end by the budget is not started once one is read
    (the pre-flight refuses such a budget; here the step is as slow as that), and none is shorter."""
    clock = FakeClock()
    res = run(FakeStep(clock, itertools.repeat(1.0)), clock, Budget(seconds=5),
              Measure(warmup_steps=2, windows=5, min_windows=2, window_min_steps=3))
    assert len(res.windows) == 1 and all(w.samples == 30 for w in res.windows)
    assert res.skipped_windows == 1 and res.seconds <= 5


def test_a_step_that_slows_after_warm_up_takes_fewer_windows_rather_than_overrun():
    """Warm-up reads 0.5 s steps, then each step takes 1.5 s (the machine got busy): windows split at warm-up's
    pace would need 3 x 3 x 1.5 s; the windows not started keep the loop within a step of the budget."""
    clock = FakeClock()
    res = run(FakeStep(clock, [0.5, 0.5] + [1.5] * 10_000), clock, Budget(seconds=10),
              Measure(warmup_steps=2, windows=5, min_windows=3, window_min_steps=3))
    assert 1 <= len(res.windows) < 3 and res.skipped_windows >= 1
    assert all(w.samples >= 30 for w in res.windows)
    assert res.seconds <= 10 + 1.5


def test_the_reserve_ends_the_windows_earlier_and_is_asked_with_warm_up_s_pace():
    """What the trial keeps for scoring (`reserve`) comes off the windows' share, at the pace warm-up read."""
    clock = FakeClock()
    asked = []

    def reserve(step_s, samples):
        asked.append((step_s, samples))
        return 4.0

    res = run(FakeStep(clock, itertools.repeat(0.1)), clock, Budget(seconds=10), Measure(warmup_steps=2),
              reserve=reserve)
    assert res.seconds <= 10 - 4.0 + 0.1 + 1e-9 and len(res.windows) == 5
    assert (pytest.approx(0.1), 10) in asked


def test_warm_up_ends_when_the_step_time_settles():
    clock = FakeClock()
    durations = [3.0, 2.0, 1.5, 1.0, 1.02] + [1.0] * 10_000
    res = run(FakeStep(clock, durations), clock, Budget(seconds=60), Measure(warmup_steps=2, warmup_settle=0.1))
    assert res.warmup_steps == 5 and res.step_seconds == pytest.approx(1.02)
    assert all(math.isclose(w.throughput, 10.0) for w in res.windows)  # no warm-up step in a window


def test_warm_up_that_never_settles_stops_at_its_maximum():
    clock = FakeClock()
    res = run(FakeStep(clock, itertools.cycle([0.1, 0.2])), clock, Budget(seconds=60),
              Measure(warmup_steps=2, warmup_max_steps=7))
    assert res.warmup_steps == 7 and len(res.windows) == 5


def test_warm_up_stops_early_to_leave_the_budget_its_windows():
    clock = FakeClock()
    res = run(FakeStep(clock, itertools.cycle([1.0, 2.0])), clock, Budget(seconds=20),
              Measure(warmup_steps=2, warmup_max_steps=20, min_windows=3, window_min_steps=2))
    assert res.warmup_steps == 6 and len(res.windows) >= 3  # 9 s in, one more could not fit 3 windows
    assert all(w.samples >= 20 for w in res.windows)


def test_overall_rate_keeps_the_slow_window_that_the_median_drops():
    from tuner.measure.timing import summarize

    clock = FakeClock()
    durations = [0.01] * 20 + [0.5] + [0.01] * 10_000  # one slow step (an epoch boundary, say) in window 2
    res = run(FakeStep(clock, durations), clock, Budget(samples=500), Measure(warmup_steps=0, windows=5))
    s = summarize(res.windows)
    assert math.isclose(s.throughput, 1000.0)
    assert s.overall < 0.9 * s.throughput
