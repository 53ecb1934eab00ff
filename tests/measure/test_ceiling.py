"""Ceilings timed like a trial (warm-up left out, windows, median), and the study's cache of them."""

import pytest
import torch

from tuner.device import resolve_device
from tuner.measure.ceiling import CeilingCache, cache_key, compute_ceiling, input_ceiling
from fakes import FakeClock


class CountingDevice:
    """The CPU device, counting the syncs that must come before every clock read."""

    def __init__(self):
        self.inner = resolve_device("cpu")
        self.torch_device = self.inner.torch_device
        self.syncs = 0

    def synchronize(self):
        self.syncs += 1

    def sample_memory(self):
        pass


def test_the_compute_ceiling_feeds_one_batch_over_and_over_and_leaves_warm_up_out():
    clock, dev = FakeClock(), CountingDevice()
    batch = torch.zeros(8, 3)
    seen = []

    class Step:
        calls = 0

        def __call__(self, batches):
            b = next(batches)
            seen.append(b)
            self.calls += 1
            clock.advance(1.0 if self.calls == 1 else 0.02)  # a slow first (warm-up) step
            return int(b.shape[0])

        def pop_mean_loss(self):
            return 0.5

    rate = compute_ceiling(Step(), batch, dev, seconds=0.6, clock=clock)
    assert rate == pytest.approx(8 / 0.02)  # the slow warm-up step is not in it
    assert all(b is batch for b in seen) and dev.syncs >= 4  # the same batch; a sync at every window end


def test_a_diverging_step_has_no_compute_ceiling():
    clock = FakeClock()

    class Step:
        def __call__(self, batches):
            next(batches)
            clock.advance(0.01)
            return 4

        def pop_mean_loss(self):
            return float("nan")

    assert compute_ceiling(Step(), torch.zeros(4), CountingDevice(), seconds=0.3, clock=clock) is None


def test_the_input_ceiling_counts_samples_delivered_per_second_after_warm_up():
    clock, dev = FakeClock(), CountingDevice()

    def batches():
        n = 0
        while True:
            n += 1
            clock.advance(5.0 if n <= 3 else 0.01)  # worker start-up for the first three
            yield torch.zeros(4, 2), torch.zeros(4)

    rate = input_ceiling(batches(), dev, seconds=0.3, warmup_batches=3, clock=clock)
    assert abs(rate - 4 / 0.01) < 1e-6
    assert dev.syncs >= 6  # start and close of each window


def test_cache_keys_follow_what_a_ceiling_depends_on():
    a = cache_key("input", {"batch_size": 64, "num_workers": 2})
    assert a == cache_key("input", {"num_workers": 2, "batch_size": 64})  # order does not matter
    assert a != cache_key("input", {"batch_size": 64, "num_workers": 3})
    assert a != cache_key("compute", {"batch_size": 64, "num_workers": 2})


def test_the_cache_keeps_values_across_readers_and_survives_a_damaged_file(tmp_path):
    path = tmp_path / "study" / "ceilings.json"
    CeilingCache(path).put("input-1", 5100.0, {"kind": "input"})
    CeilingCache(path).put("compute-1", 74000.0, {"kind": "compute"})
    reader = CeilingCache(path)
    assert reader.get("input-1") == 5100.0 and reader.get("compute-1") == 74000.0 and reader.get("x") is None
    path.write_text("{not json")
    assert reader.get("input-1") is None  # measured again, never a wrong value
    reader.put("input-1", 4000.0, {})
    assert reader.get("input-1") == 4000.0
