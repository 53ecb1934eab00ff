"""profile_config end to end on the CPU: a trace Chromium's trace viewer reads, top operators, shares, verdict."""

import json

import pytest
from tests.helpers.fakes import FakeCudaDevice

from tuner.config import parse_config
from tuner.errors import RunFailed
from tuner.measure.profile import PARTS
from tuner.models import SmallCNN
from tuner.train.profile import profile_config


def cfg(**over):
    base = {"workload": "cnn", "dataset": "synthetic", "workload_options": {"image_size": 16},
            "budget": {"samples": 160}, "params": {"batch_size": 8},
            "measure": {"warmup_steps": 1, "windows": 3, "window_min_steps": 1, "ceiling_seconds": 1.0}, "quality": {"enabled": False}}
    for k, v in over.items():
        base[k] = {**base[k], **v} if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return parse_config(base)


@pytest.fixture
def planted_peak(monkeypatch):
    """A fixed 10 TFLOP/s matmul peak (no CPU here reaches it), in a fresh process memo: fast and load-proof."""
    from tuner.measure import flops

    monkeypatch.setattr(flops, "matmul_peak", lambda device, precision, seconds: 1e13)
    monkeypatch.setattr(flops, "_MEMO", {})


def test_profile_writes_a_chrome_trace_with_the_step_parts_and_ranks_operators(tmp_path):
    trace = tmp_path / "out" / "trace.json"
    res = profile_config(cfg(), cache_dir=tmp_path / "cache", trace=trace, steps=2, top=10)

    doc = json.loads(trace.read_text())  # the JSON Object Format of Chromium's trace viewer, which Perfetto reads
    assert isinstance(doc["traceEvents"], list)
    names = {e.get("name") for e in doc["traceEvents"]}
    assert {f"tuner.{part}" for part in PARTS} <= names

    ops = res.top_ops
    assert 0 < len(ops) <= 10
    assert [op["self_ms"] for op in ops] == sorted((op["self_ms"] for op in ops), reverse=True)
    assert all(op["calls"] > 0 and 0 <= op["share"] <= 1 for op in ops) and sum(op["share"] for op in ops) <= 1 + 1e-9
    assert not any(op["name"].startswith("tuner.") for op in ops)
    assert any(op["name"].startswith("aten::") for op in ops)

    assert set(res.phases) == {*PARTS, "other"}
    assert all(0 <= share <= 1 for share in res.phases.values())
    assert sum(res.phases.values()) == pytest.approx(1.0)
    assert res.phases["forward"] > 0 and res.phases["backward"] > 0

    assert res.throughput > 0 and res.step_ms > 0 and 0 <= res.data_wait <= 1
    assert res.compute_ceiling > 0 and res.input_ceiling > 0
    assert res.headroom.bound in ("input-bound", "compute-bound", "overhead-bound")
    assert "of the compute ceiling" in res.headroom.sentence
    doc = res.to_json()
    assert doc["bound"] == res.headroom.bound and doc["headroom"] == res.headroom.sentence
    assert doc["trace"] == str(trace) and doc["steps"] == 2


def test_profile_reports_of_peak_as_tuner_train_does(tmp_path, planted_peak):
    """FLOPs per sample (one step of the models) x throughput over the device's matmul peak, in the result and its
    JSON; the verdict says it too."""
    res = profile_config(cfg(), cache_dir=tmp_path / "cache", trace=tmp_path / "t.json", steps=2, top=5)
    assert res.flops_per_sample > 0 and res.peak_flops == 1e13
    assert res.of_peak == pytest.approx(res.throughput * res.flops_per_sample / 1e13)
    assert res.to_json()["of_peak"] == res.of_peak and res.of_peak_skipped is None
    assert "matmul peak" in res.headroom.sentence


def test_two_phase_gan_and_accumulation_mark_every_micro_batch(tmp_path):
    trace = tmp_path / "trace.json"
    res = profile_config(cfg(workload="gan", params={"accumulation_steps": 2}, measure={"ceiling_seconds": 0}),
                         cache_dir=tmp_path / "cache", trace=trace, steps=1, top=5)
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if str(e.get("name")).startswith("tuner.")]
    count = {part: sum(e["name"] == f"tuner.{part}" for e in events) for part in PARTS}
    # one step: 2 micro-batches loaded once; D and G each run forward and backward on both; each phase zeroes
    # its gradients and steps its optimizer
    assert count == {"data": 2, "forward": 4, "backward": 4, "optimizer": 4}
    assert res.compute_ceiling is None and "no ceilings measured" in res.headroom.sentence
    assert res.of_peak is None and res.of_peak_skipped == "measure.ceiling_seconds is 0"


def test_fake_cuda_device_syncs_at_every_part_boundary_and_records_cpu_only(tmp_path):
    dev = FakeCudaDevice()
    res = profile_config(cfg(measure={"ceiling_seconds": 0}), cache_dir=tmp_path, trace=tmp_path / "t.json",
                         steps=1, top=3, device=dev)
    # timed steps: 2 syncs; recorded: 2 around the steps + 2 per part (optimizer x2, data, forward, backward)
    assert dev.sync_calls == 2 + 2 + 2 * 5
    assert all(op["self_device_ms"] is None for op in res.top_ops)  # it computes on the CPU: no CUDA activity


def test_a_failing_step_is_run_failed_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(SmallCNN, "forward", lambda self, x: (_ for _ in ()).throw(ValueError("bad shape\nmore")))
    with pytest.raises(RunFailed, match="the profiled run failed: ValueError: bad shape"):
        profile_config(cfg(), cache_dir=tmp_path, trace=tmp_path / "t.json", steps=1, top=3)
