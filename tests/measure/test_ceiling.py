"""Ceilings timed like a trial (warm-up left out, windows, median), and the study's cache of them."""

import pytest
import torch

from tuner.device import resolve_device
from tuner.measure.ceiling import CeilingCache, CeilingSkipped, cache_key
from tuner.train.ceilings import compute_ceiling, input_ceiling
from tests.helpers.fakes import FakeClock


class CountingDevice:
    """The CPU device, counting the syncs that must come before every clock read."""

    is_cuda = False

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
            clock.advance(0.1 if self.calls == 1 else 0.02)  # a slow first (warm-up) step
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
            clock.advance(0.05 if n <= 3 else 0.01)  # worker start-up for the first three
            yield torch.zeros(4, 2), torch.zeros(4)

    rate = input_ceiling(batches(), dev, seconds=0.6, warmup_batches=3, clock=clock)
    assert abs(rate - 4 / 0.01) < 1e-6
    assert dev.syncs >= 6  # start and close of each window


class OneSecondStep:
    def __init__(self, clock):
        self.clock, self.calls = clock, 0

    def __call__(self, batches):
        next(batches)
        self.calls += 1
        self.clock.advance(1.0)
        return 4

    def pop_mean_loss(self):
        return 0.5


def test_a_compute_ceiling_whose_deadline_cannot_hold_enough_steps_is_skipped_before_it_starts():
    clock = FakeClock()
    step = OneSecondStep(clock)
    with pytest.raises(CeilingSkipped, match="one step takes 1 s: 0.5 s cannot hold"):
        compute_ceiling(step, torch.zeros(4), CountingDevice(), seconds=0.5, clock=clock, step_seconds=1.0)
    assert step.calls == 0 and clock() == 0.0  # nothing ran: the deadline is kept


def test_a_compute_ceiling_without_a_step_estimate_stops_at_its_deadline_and_reads_nothing():
    clock = FakeClock()
    step = OneSecondStep(clock)
    with pytest.raises(CeilingSkipped, match="deadline") as cut:
        compute_ceiling(step, torch.zeros(4), CountingDevice(), seconds=0.5, clock=clock)
    assert clock() <= 0.5 + 1.0  # one step past the deadline at most: that step had to be taken to be timed
    assert cut.value.step_seconds == pytest.approx(1.0)  # the step it timed: the probes fit a deadline to it


def test_an_input_ceiling_from_a_slow_loader_stops_at_its_deadline_with_a_reason():
    clock = FakeClock()

    def batches():
        while True:
            clock.advance(0.3)
            yield torch.zeros(4, 2), torch.zeros(4)

    with pytest.raises(CeilingSkipped, match="deadline"):
        input_ceiling(batches(), CountingDevice(), seconds=0.5, warmup_batches=1, clock=clock)
    assert clock() <= 0.5 + 0.3


def _user_ceiling(tmp_path, source, batch_size, step_seconds):
    """The compute ceiling of a user's workload file at `batch_size`, and the notes it left."""
    import sys

    from tuner.builtin import resolve_workload
    from tuner.config import parse_config
    from tuner.train.ceilings import measure_ceiling
    from tuner.workload.loader import build
    from tests.helpers.userworkloads import write

    path = write(tmp_path, source, "ceil_wl.py")
    sys.modules.pop("ceil_wl", None)
    cfg = parse_config({"workload": f"{path}:make", "params": {"batch_size": batch_size, "device": "cpu"},
                        "measure": {"ceiling_seconds": 0.5}})
    workload = build(resolve_workload(cfg.workload), {}, None)
    train_set, _ = workload.datasets()
    models = {k: f() for k, f in workload.models.items()}
    notes = {}
    value = measure_ceiling("compute", cfg, resolve_device("cpu"), workload, train_set, models, 0.5,
                            step_seconds=step_seconds, notes=notes)
    return value, notes


def test_a_trial_s_ceilings_record_why_one_was_skipped(tmp_path):
    from tests.helpers.userworkloads import GOOD

    value, notes = _user_ceiling(tmp_path, GOOD, 8, step_seconds=1.0)
    assert value is None and "one step takes 1 s" in notes["compute"].text and not notes["compute"].raised
    assert str(notes["compute"]) == notes["compute"].text  # what the trial's ceiling_skipped says


def test_a_ceiling_whose_step_raises_in_the_user_s_code_says_so_with_their_line(tmp_path):
    """Not a deadline: the workload's own bug at this batch size, typed as raised, at the user's line."""
    from tests.helpers.userworkloads import RAISES_AT_32

    value, notes = _user_ceiling(tmp_path, RAISES_AT_32, 32, step_seconds=None)
    note = notes["compute"]
    assert value is None and note.raised and "ValueError" in note.text and "ceil_wl.py:" in note.text
    assert str(note) == f"raised {note.text}"
    value, notes = _user_ceiling(tmp_path, RAISES_AT_32, 16, step_seconds=None)
    assert value is not None or not notes["compute"].raised  # another batch size reads (or its deadline cut it)


def test_a_ceiling_the_study_s_cache_holds_leaves_its_deadline_to_the_other(tmp_path):
    """After a search trial its input ceiling is usually the probes' (cached): the compute ceiling may then take
    both deadlines, as the default study's GAN needed (steps of 0.145 s on a loaded moment, 0.75 s could not hold
    them: every re-run skipped it). Nothing cached, each keeps its own deadline and the same step is skipped."""
    import sys

    from tuner.builtin import resolve_workload
    from tuner.config import parse_config
    from tuner.train.ceilings import ceiling_keys, ceilings
    from tuner.workload.loader import build
    from tests.helpers.userworkloads import GOOD, write

    path = write(tmp_path, GOOD, "ceil_share_wl.py")
    sys.modules.pop("ceil_share_wl", None)
    cfg = parse_config({"workload": f"{path}:make", "params": {"batch_size": 8, "device": "cpu"},
                        "measure": {"ceiling_seconds": 0.5}})
    workload = build(resolve_workload(cfg.workload), {}, None)
    train_set, _ = workload.datasets()
    device = resolve_device("cpu")

    def read(cache):
        notes = {}
        models = {k: f() for k, f in workload.models.items()}
        found = ceilings(cfg, device, workload, train_set, models, 0.5, cache, step_seconds=0.1, notes=notes)
        return found, notes

    found, notes = read(None)  # 0.5 s cannot hold a warm-up step and two windows of 0.1 s steps
    assert found["compute"] is None and "one step takes 0.1 s" in notes["compute"].text
    cache = CeilingCache(tmp_path / "study" / "ceilings.json")
    cache.put(ceiling_keys(cfg, device)["input"], 5100.0, {"kind": "input"})
    found, notes = read(cache)
    assert found["input"] == 5100.0 and found["compute"] is not None and "compute" not in notes


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


def _varying_step(clock, pace):
    """A step of 8 samples whose n-th call takes pace(n) seconds on the fake clock."""

    class Step:
        calls = 0

        def __call__(self, batches):
            next(batches)
            self.calls += 1
            clock.advance(pace(self.calls))
            return 8

        def pop_mean_loss(self):
            return 0.5

    return Step()


def test_a_probe_reading_of_a_stable_rate_ends_early_and_reads_the_same_rate():
    from tuner.measure.ceiling import settled

    assert settled([100.0, 101.0, 102.0], 0.03) and not settled([100.0, 110.0, 100.0], 0.03)
    assert not settled([100.0, 100.0], 0.03)  # two windows are not enough to call a rate stable
    clock = FakeClock()
    rate = compute_ceiling(_varying_step(clock, lambda n: 0.01), torch.zeros(4), CountingDevice(), seconds=0.8,
                           clock=clock, stable=0.03)
    assert rate == pytest.approx(800.0) and clock() < 0.5  # read in under 0.5 s of its 0.8 s deadline
    clock = FakeClock()
    full = compute_ceiling(_varying_step(clock, lambda n: 0.01), torch.zeros(4), CountingDevice(), seconds=0.8,
                           clock=clock)
    assert full == pytest.approx(800.0) and clock() >= 0.79  # without `stable`, the whole deadline as before


def test_a_probe_reading_of_an_unstable_rate_reads_on_to_its_deadline():
    clock = FakeClock()
    # the pace swings by 2x every 10 steps: no three windows agree within 3%
    step = _varying_step(clock, lambda n: 0.01 if (n // 10) % 2 else 0.02)
    rate = compute_ceiling(step, torch.zeros(4), CountingDevice(), seconds=0.8, clock=clock, stable=0.03)
    assert rate is not None and clock() >= 0.75


def test_an_input_probe_reading_ends_once_stable_and_not_while_unstable():
    def batches(clock, pace):
        n = 0
        while True:
            n += 1
            clock.advance(pace(n))
            yield torch.zeros(4, 2), torch.zeros(4)

    clock = FakeClock()
    rate = input_ceiling(batches(clock, lambda n: 0.01), CountingDevice(), seconds=0.8, warmup_batches=1,
                         clock=clock, stable=0.03)
    assert rate == pytest.approx(400.0) and clock() < 0.5
    clock = FakeClock()
    input_ceiling(batches(clock, lambda n: 0.01 if (n // 7) % 2 else 0.03), CountingDevice(), seconds=0.8,
                  warmup_batches=1, clock=clock, stable=0.03)
    assert clock() >= 0.75
