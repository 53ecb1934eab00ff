"""The profiling primitives: PhaseClock's timing and shares, and the operator table."""

from types import SimpleNamespace

import pytest
import torch
from tests.helpers.fakes import FakeClock

from tuner.device import Device
from tuner.measure.profile import PhaseClock, top_operators


def test_phase_clock_adds_up_each_part_and_the_rest_is_other():
    clock = FakeClock()
    marks = PhaseClock(Device("cpu", torch.device("cpu")), clock=clock)
    for part, dt in (("data", 1.0), ("forward", 2.0), ("backward", 3.0), ("optimizer", 1.0), ("forward", 1.0)):
        with marks(part):
            clock.advance(dt)
    assert marks.seconds == {"data": 1.0, "forward": 3.0, "backward": 3.0, "optimizer": 1.0}
    shares = marks.shares(10.0)
    assert shares == pytest.approx({"data": 0.1, "forward": 0.3, "backward": 0.3, "optimizer": 0.1, "other": 0.2})
    assert marks.shares(0.0)["other"] == 0.0


def test_phase_clock_times_a_part_that_raises():
    clock = FakeClock()
    marks = PhaseClock(Device("cpu", torch.device("cpu")), clock=clock)
    with pytest.raises(ValueError), marks("forward"):
        clock.advance(2.0)
        raise ValueError
    assert marks.seconds["forward"] == 2.0


def event(key, count, cpu_us, **device):
    return SimpleNamespace(key=key, count=count, self_cpu_time_total=cpu_us, **device)


def test_operators_by_self_time_without_the_step_ranges():
    prof = SimpleNamespace(key_averages=lambda: [event("aten::mm", 4, 300.0), event("tuner.forward", 2, 900.0),
                                                 event("aten::conv2d", 2, 600.0), event("aten::add", 8, 100.0)])
    ops = top_operators(prof, 2, on_device=False)
    assert [(o["name"], o["calls"], o["self_ms"]) for o in ops] == [("aten::conv2d", 2, 0.6), ("aten::mm", 4, 0.3)]
    assert [o["share"] for o in ops] == pytest.approx([0.6, 0.3])  # of all operators' self time
    assert ops[0]["self_device_ms"] is None


@pytest.mark.parametrize("attr", ["self_device_time_total", "self_cuda_time_total"])
def test_on_a_gpu_operators_rank_by_self_device_time_under_either_torch_name(attr):
    prof = SimpleNamespace(key_averages=lambda: [event("cudaDeviceSynchronize", 5, 900.0, **{attr: 0.0}),
                                                 event("aten::mm", 4, 30.0, **{attr: 500.0})])
    ops = top_operators(prof, 5, on_device=True)
    assert [o["name"] for o in ops] == ["aten::mm", "cudaDeviceSynchronize"]
    assert ops[0]["self_ms"] == ops[0]["self_device_ms"] == 0.5 and ops[0]["self_cpu_ms"] == 0.03
    assert ops[0]["share"] == 1.0

