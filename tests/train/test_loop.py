"""The measured loop: warm-up exclusion, window count, budgets, divergence, clock reads after a sync."""

import itertools
import math

import pytest
import torch

from tuner.config import Budget, Measure
from tuner.device import Device
from tuner.train.loop import run_loop
from tests.helpers.fakes import FakeClock, FakeCudaDevice, PrefetchingLoader


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


class HostAheadCuda(Device):
    """A CUDA device as its host sees it: a step launches its work and returns (the host runs up to `ahead_s` of
    queued work ahead of the GPU), synchronize() waits until the queue is done. Its clock is the host's; every
    step, sync and clock read is recorded in order."""

    def __init__(self, work_s=0.1, launch_s=0.001, ahead_s=2.0):
        super().__init__("cuda", torch.device("cpu"), "host-ahead fake")
        self.t, self.gpu_free = 0.0, 0.0
        self.work_s, self.launch_s, self.ahead_s = work_s, launch_s, ahead_s
        self.events = []

    def clock(self):
        self.events.append("clock")
        return self.t

    def synchronize(self):
        super().synchronize()
        self.events.append("sync")
        self.t = max(self.t, self.gpu_free)

    def launch(self):
        self.events.append("step")
        self.t += self.launch_s
        self.gpu_free = max(self.gpu_free, self.t) + self.work_s
        self.t = max(self.t, self.gpu_free - self.ahead_s)  # the launch queue is full: the host waits


class LaunchStep:
    def __init__(self, dev):
        self.dev = dev

    def __call__(self, batches):
        self.dev.launch()
        return 10

    def pop_mean_loss(self):
        return 1.0


def test_windows_budgets_and_rungs_are_decided_on_synced_clock_reads():
    """On CUDA the host runs ahead of the GPU (here by 2 s of 0.1 s steps): a window, the budget or a rung ended
    on the host's clock alone ends that much late. Every clock read follows a sync after the last step launched,
    and the budget and the rung point are kept to within a step."""
    dev = HostAheadCuda()
    reports = []
    res = run_loop(LaunchStep(dev), itertools.repeat(None), budget=Budget(seconds=10),
                   measure=Measure(warmup_steps=2, windows=5, min_windows=3), device=dev, clock=dev.clock,
                   rung_points=[5.0], on_window=reports.append)
    synced = True
    for i, event in enumerate(dev.events):
        if event == "step":
            synced = False
        elif event == "sync":
            synced = True
        else:
            assert synced, f"clock read {i} follows a step without a sync: {dev.events[max(i - 4, 0):i + 1]}"
    assert len(res.windows) == 5
    assert all(math.isclose(w.throughput, 100.0, rel_tol=0.02) for w in res.windows)  # 10 samples / 0.1 s
    assert res.seconds <= 10 + 0.1 + 1e-6  # within one step of the budget
    at_rung = [r["budget_used"] for r in reports if r["budget_used"] >= 5.0]
    assert at_rung[0] <= 5.0 + 0.1 + 1e-6  # the window that crossed the rung point ended within a step of it
    syncs_in_windows = dev.sync_calls - res.warmup_steps - 2 * len(res.windows)
    assert syncs_in_windows <= 4 * len(res.windows)  # a few looks a window, not a sync a step (~19 steps each)


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


def test_an_unsettled_warm_up_leaves_a_samples_budget_its_windows_and_never_overruns_it():
    clock = FakeClock()  # 8 steps of 32: 20 unsettled warm-up steps trained 640 samples of a 256-sample budget
    res = run(FakeStep(clock, itertools.cycle([0.1, 0.2]), batch=32), clock, Budget(samples=256),
              Measure(warmup_steps=1, warmup_max_steps=20, windows=2, window_min_seconds=0, window_min_steps=3))
    assert res.samples == 256 and res.warmup_steps == 2 and len(res.windows) == 2


def test_warm_up_ends_before_a_targets_sample_point_so_its_evaluation_is_not_late():
    clock = FakeClock()
    seen = []
    res = run(FakeStep(clock, itertools.cycle([0.1, 0.2]), batch=8), clock, Budget(samples=256),
              Measure(warmup_steps=1, warmup_max_steps=20, windows=2, window_min_seconds=0, window_min_steps=3),
              sample_points=lambda: [k for k in (32, 64) if k > (seen[-1] if seen else 0)],
              on_window=lambda w: seen.append(w["samples"]))
    assert res.warmup_steps == 3  # 24 samples: one more step reaches the point at 32
    assert seen[0] == 48  # the first window's fewest steps (3) after it, not 20 warm-up steps (160 samples)


def test_windows_cut_at_sample_points_never_carry_a_samples_budget_past_its_end():
    clock = FakeClock()  # evaluations every 32 samples cut 3-step windows: the last window once trained 320 of 256
    seen = []
    res = run(FakeStep(clock, itertools.repeat(0.1), batch=32), clock, Budget(samples=256),
              Measure(warmup_steps=1, windows=2, window_min_seconds=0, window_min_steps=3),
              sample_points=lambda: [32 * (seen[-1] // 32 + 1) if seen else 32],
              on_window=lambda w: seen.append(w["samples"]))
    assert res.samples == 256 and res.tail_steps == 1 and res.skipped_windows == 1
    assert all(w.samples >= 3 * 32 for w in res.windows)  # the untimed tail is not a reading


def test_throughput_keeps_the_slow_window_that_a_median_would_drop():
    """A plain loop's samples / seconds pays for an epoch boundary's slow step; the trial's throughput does too
    (the median of the windows, which it was until 2026-12-08, read loader-bound configs 12% above a plain loop)."""
    from tuner.measure.timing import summarize

    clock = FakeClock()
    durations = [0.01] * 20 + [0.5] + [0.01] * 10_000  # one slow step (an epoch boundary, say) in window 2
    res = run(FakeStep(clock, durations), clock, Budget(samples=500), Measure(warmup_steps=0, windows=5))
    s = summarize(res.windows)
    assert math.isclose(s.median, 1000.0)
    timed = sum(w.seconds for w in res.windows)
    assert math.isclose(s.throughput, sum(w.samples for w in res.windows) / timed)
    assert s.throughput < 0.9 * s.median


@pytest.mark.parametrize("budget", [Budget(seconds=20), Budget(samples=1000)])
def test_the_window_after_a_pause_does_not_read_the_batches_the_workers_prefetched_during_it(budget):
    """Batches take 0.02 s to make and 0.005 s to train on (loader-bound: 500 samples/s at 10 a batch); a 5 s
    evaluation after window 2 lets the workers fill their queue of 16. Without draining it, window 3 read 16
    batches it never waited for; every window reads the pipeline's rate, and the trial keeps its five windows."""
    clock = FakeClock()
    loader = PrefetchingLoader(clock, make_s=0.02, depth=16)

    def evaluate(w):
        if w["window"] == 2:
            clock.advance(5.0)

    res = run_loop(FakeStep(clock, itertools.repeat(0.005)), loader, budget=budget,
                   measure=Measure(warmup_steps=2, windows=5, min_windows=3), device=Device("cpu", torch.device("cpu")),
                   clock=clock, on_window=evaluate, prefetched=16)
    assert len(res.windows) == 5
    rates = [w.throughput for w in res.windows]
    assert all(math.isclose(r, 500.0, rel_tol=0.03) for r in rates), rates
    assert 16 <= res.drained_steps <= 2 * 16 + 1  # the refilled queue; none after the windows without a pause


def test_a_slow_loader_slows_the_reading_as_it_slows_a_plain_loop():
    """A batch that takes 0.01 s to fetch before a 0.01 s step: a user's perf_counter around the steps reads 500
    samples/s, not the step's 1000, and so must the windows (the fetch is inside them, read as data wait)."""
    clock = FakeClock()

    def slow_batches():
        while True:
            clock.advance(0.01)
            yield None

    res = run_loop(FakeStep(clock, itertools.repeat(0.01)), slow_batches(), budget=Budget(samples=1000),
                   measure=Measure(warmup_steps=2, windows=5), device=Device("cpu", torch.device("cpu")), clock=clock)
    assert len(res.windows) == 5
    assert all(math.isclose(w.throughput, 500.0) for w in res.windows)
    assert all(math.isclose(w.wait_seconds, w.seconds / 2) for w in res.windows)
