"""Clock reads on a real GPU: tuner.measure.timing's window ends and tuner.train.loop synchronize the device before
reading the clock, so a reading holds the work done, not the work launched. The order is recorded by wrapping the
real torch.cuda.synchronize and the clock; whether the queued kernels had finished at each read is asked of a CUDA
event recorded after them (a long kernel still queued would say no)."""

import itertools
import time

import torch

import tuner.train.loop as loop_module
from tests.helpers.cuda import CUDA
from tuner.config import Budget, Measure
from tuner.measure.timing import WindowTimer
from tuner.train.loop import run_loop

pytestmark = CUDA

SLEEP_CYCLES = 20_000_000  # torch.cuda._sleep: a kernel that spins for this many GPU cycles (~10 ms)


class Recorder:
    """The events in order: ("sync",), ("clock", work_done), ("timer",) where a window timer reads its clock."""

    def __init__(self, monkeypatch):
        self.events: list[tuple] = []
        self.last: torch.cuda.Event | None = None
        real = torch.cuda.synchronize

        def sync(*args, **kwargs):
            self.events.append(("sync",))
            return real(*args, **kwargs)

        monkeypatch.setattr(torch.cuda, "synchronize", sync)

    def clock(self) -> float:
        self.events.append(("clock", self.last is None or self.last.query()))
        return time.perf_counter()

    def launch(self) -> None:
        """A kernel that takes a while, and an event after it."""
        torch.cuda._sleep(SLEEP_CYCLES)
        self.last = torch.cuda.Event()
        self.last.record()


def test_a_window_timer_synchronizes_before_each_clock_read_so_the_kernels_are_done(gpu, monkeypatch):
    rec = Recorder(monkeypatch)
    timer = WindowTimer(gpu, clock=rec.clock)
    rec.launch()
    timer.start()
    rec.launch()
    timer.add(1)
    window = timer.close()
    assert rec.events == [("sync",), ("clock", True), ("sync",), ("clock", True)]
    assert window.seconds > 0


class SleepStep:
    """A step of queued GPU work whose host side returns at once (as a real step's launches do)."""

    def __init__(self, rec):
        self.rec = rec

    def __call__(self, batches):
        next(batches)
        self.rec.launch()
        return 8

    def pop_mean_loss(self):
        return 1.0


def test_the_training_loop_syncs_before_every_timed_clock_read(gpu, monkeypatch):
    rec = Recorder(monkeypatch)

    class Marked(WindowTimer):  # marks where the loop's window timer reads its clock
        def _now(self):
            rec.events.append(("timer",))
            return super()._now()

    monkeypatch.setattr(loop_module, "WindowTimer", Marked)
    res = run_loop(SleepStep(rec), itertools.repeat(None), budget=Budget(samples=8 * 40),
                   measure=Measure(warmup_steps=1, windows=3, window_min_steps=2, window_min_seconds=0),
                   device=gpu, clock=rec.clock)
    assert len(res.windows) == 3
    timer_reads = [i for i, e in enumerate(rec.events) if e == ("timer",)]
    assert len(timer_reads) == 2 * 3  # each window's start and end
    for i in timer_reads:
        assert rec.events[i + 1] == ("sync",) and rec.events[i + 2] == ("clock", True), rec.events[i:i + 3]
    # the loop's own synced looks (window ends, the budget) read the clock after the kernels are done too
    for i, e in enumerate(rec.events[:-1]):
        if e == ("sync",):
            assert rec.events[i + 1][0] != "clock" or rec.events[i + 1] == ("clock", True)
