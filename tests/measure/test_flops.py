"""How far from the hardware's peak: FLOPs per sample counted on the real step, the device's measured matmul peak
(cached per machine), and of_peak on every trial, or its reason when the count fails. Device pinned to cpu."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.helpers.fakes import TickingClock
from tuner.config import parse_config
from tuner.device import resolve_device
from tuner.measure import flops
from tuner.measure.ceiling import CeilingCache
from tuner.study.metrics import table_columns
from tuner.train import run_trial
from tests.helpers.userworkloads import write

# Two bias-free linear layers, 64 -> 32 -> 16, on inputs that need no gradient. Per sample: forward
# 2*64*32 + 2*32*16; backward: both weight gradients (2*64*32 + 2*32*16) and the second layer's input gradient
# (2*32*16). The loss (square, mean) and Adam's update are elementwise: not counted.
MATMUL = '''
import torch
from torch import nn
from torch.utils.data import TensorDataset

import tuner


def data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 64, generator=g)
    return TensorDataset(x[:192]), TensorDataset(x[192:])


def loss(models, batch):
    return models["net"](batch[0]).square().mean()


def make():
    return tuner.Workload(models={"net": lambda: nn.Sequential(nn.Linear(64, 32, bias=False),
                                                               nn.Linear(32, 16, bias=False))},
                          datasets=data, loss=loss)
'''
MATMUL_FLOPS_PER_SAMPLE = 4 * 64 * 32 + 6 * 32 * 16

# A model built on a kernel that cannot run under a dispatch mode (as some custom extensions): it trains, but
# FlopCounterMode cannot follow its step.
UNCOUNTABLE = MATMUL.replace('''def make():''', '''class Opaque(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 16)

    def forward(self, x):
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        if _get_current_dispatch_mode() is not None:
            raise RuntimeError("opaque_kernel has no dispatch-mode support")
        return self.lin(x)


def make_opaque():
    return tuner.Workload(models={"net": Opaque}, datasets=data, loss=loss)


def make():''')

CONFIG = """
workload: {ref}
budget: {{samples: 96}}
params: {{batch_size: 8, accumulation_steps: {acc}, num_workers: 0, precision: fp32, device: cpu, threads: 1}}
measure: {{warmup_steps: 1, windows: 2, ceiling_seconds: 0.3}}
quality: {{enabled: false}}
"""


def config(tmp_path, text=MATMUL, attr="make", acc=1):
    path = write(tmp_path / "work", text, "planted.py")
    return parse_config(yaml.safe_load(CONFIG.format(ref=f"{path}:{attr}", acc=acc)), "test")


@pytest.fixture
def planted_peak(monkeypatch):
    """The peak measurement replaced by a fixed 10 TFLOP/s (no 1-thread CPU reaches it: of_peak cannot pass 1
    however the machine's load moves the trial's throughput), in a fresh process memo."""
    calls = []

    def fake(device, precision, seconds):
        calls.append(precision)
        return 1e13

    monkeypatch.setattr(flops, "matmul_peak", fake)
    monkeypatch.setattr(flops, "_MEMO", {})
    return calls


@pytest.mark.parametrize("acc", [1, 2])
def test_flops_per_sample_of_a_planted_matmul_workload_is_its_known_count(tmp_path, planted_peak, acc):
    res = run_trial(config(tmp_path, acc=acc), cache_dir=tmp_path / "cache")
    assert res.state == "complete"
    assert res.metrics["flops_per_sample"] == MATMUL_FLOPS_PER_SAMPLE  # accumulation does not change it


def test_of_peak_is_achieved_flops_over_the_peak_and_between_0_and_1(tmp_path, planted_peak):
    res = run_trial(config(tmp_path), cache_dir=tmp_path / "cache")
    of_peak = res.metrics["of_peak"]
    assert 0 < of_peak < 1
    assert of_peak == pytest.approx(res.throughput * MATMUL_FLOPS_PER_SAMPLE / 1e13)
    assert res.metrics["peak_flops"] == 1e13 and planted_peak == ["fp32"]
    assert "matmul peak" in (res.metrics.get("headroom") or "")
    assert "of_peak" in [m.key for m in table_columns()]  # a column of every trial table and trials.csv


def test_a_model_the_flop_counter_cannot_follow_still_trains_with_of_peak_missing_and_why(tmp_path, planted_peak):
    res = run_trial(config(tmp_path, UNCOUNTABLE, "make_opaque"), cache_dir=tmp_path / "cache")
    assert res.state == "complete" and res.throughput > 0 and res.error is None
    assert res.metrics.get("of_peak") is None and res.metrics.get("flops_per_sample") is None
    assert res.metrics["of_peak_skipped"] == ("FLOPs not counted: RuntimeError: opaque_kernel has no dispatch-mode "
                                              "support")


def test_a_study_counts_the_flops_of_a_batch_size_once(tmp_path, planted_peak, monkeypatch):
    counted = []
    real = flops.count_step_flops
    monkeypatch.setattr(flops, "count_step_flops", lambda *a: counted.append(1) or real(*a))
    cache = CeilingCache(tmp_path / "study" / "ceilings.json")
    first = run_trial(config(tmp_path), cache_dir=tmp_path / "cache", ceilings=cache)
    second = run_trial(config(tmp_path), cache_dir=tmp_path / "cache", ceilings=cache)
    assert len(counted) == 1
    assert first.metrics["flops_per_sample"] == second.metrics["flops_per_sample"] == MATMUL_FLOPS_PER_SAMPLE


def knobs(precision: str) -> dict:
    return {"precision": precision, "tf32": False, "threads": 2}


def test_the_peak_is_measured_once_per_machine_and_precision_and_cached_on_disk(tmp_path):
    device = resolve_device("cpu")
    calls = []

    def measure(dev, precision, seconds):
        calls.append(precision)
        return {"fp32": 5e10, "bf16": 1e9}[precision]

    # a fresh memo each call: another process on the same machine reads the file, not the device
    assert flops.peak_flops(device, knobs("fp32"), tmp_path, measure=measure, memo={}) == (5e10, True)
    assert flops.peak_flops(device, knobs("fp32"), tmp_path, measure=measure, memo={}) == (5e10, False)
    assert flops.peak_flops(device, knobs("bf16"), tmp_path, measure=measure, memo={}) == (1e9, True)
    assert calls == ["fp32", "bf16"]
    stored = json.loads((tmp_path / "peak.json").read_text())
    assert sorted(e["precision"] for e in stored.values()) == ["bf16", "fp32"]
    # a trial faster than the stored peak (read while something else ran) has it measured once more, higher kept
    memo: dict[str, float] = {}
    assert flops.peak_flops(device, knobs("fp32"), tmp_path, at_least=6e10, measure=measure, memo=memo) == \
        (5e10, True)
    assert flops.peak_flops(device, knobs("fp32"), tmp_path, at_least=6e10, measure=measure, memo=memo) == \
        (5e10, False)  # once per process, not at every trial
    assert calls == ["fp32", "bf16", "fp32"]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_matmul_benchmark_keeps_its_time_and_reads_a_positive_peak(precision):
    clock = TickingClock(0.2)  # time counted in clock reads: it ends however slow bf16 is on this CPU
    peak = flops.matmul_peak(resolve_device("cpu"), precision, seconds=1.0, clock=clock)
    assert peak > 0 and clock.t < 3


def test_tuner_train_shows_the_share_of_the_peak_in_its_table(tmp_path, planted_peak, capsys):
    from tuner.cli import main

    cfg_file = tmp_path / "cfg.yaml"
    path = write(tmp_path / "work", MATMUL, "planted.py")
    cfg_file.write_text(CONFIG.format(ref=f"{path}:make", acc=1))
    assert main(["train", "--config", str(cfg_file), "--reports-dir", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "% peak" in out and "FLOPs/sample" in out and "11.3k FLOP" in out


def test_the_flop_and_peak_cache_keys_hold_the_knobs_the_role_table_names(tmp_path, monkeypatch):
    """A knob lands in one place: the role table's `counts` decide what each key holds (a new one is in the key
    with no other change)."""
    import dataclasses

    from tuner import knobs as knob_table

    cfg = config(tmp_path)
    device = resolve_device("cpu")
    other = lambda **kw: cfg.model_copy(update={"params": cfg.params.model_copy(update=kw)})  # noqa: E731
    assert flops.flops_key(other(batch_size=cfg.params.batch_size * 2)) != flops.flops_key(cfg)
    assert flops.flops_key(other(precision="bf16")) == flops.flops_key(cfg)  # precision does not change the count
    assert flops.peak_knobs(cfg.params, device, 3) == {"precision": "fp32", "tf32": False, "threads": 3}
    assert flops.peak_knobs(cfg.params.model_copy(update={"tf32": True}), device, 3)["tf32"] is False  # a CPU
    assert flops.peak_key(device, knobs("fp32")) != flops.peak_key(device, {**knobs("fp32"), "threads": 4})
    planted = dataclasses.replace(knob_table.KNOBS["channels_last"], counts=("flops", "peak"))
    monkeypatch.setitem(knob_table.KNOBS, "channels_last", planted)
    assert flops.flops_key(other(channels_last=True)) != flops.flops_key(cfg)
    assert flops.peak_knobs(cfg.params, device, 3)["channels_last"] == cfg.params.channels_last


def test_flops_are_counted_on_one_micro_batch_whatever_the_accumulation(tmp_path, planted_peak, monkeypatch):
    """Accumulation repeats the same work per sample, so the count runs one micro-batch, not accumulation_steps of
    them under the (slow) FLOP counter; the figure is the same."""
    counted = []
    real = flops.count_step_flops

    def spy(step, batch):
        out = real(step, batch)
        counted.append(out[1])
        return out

    monkeypatch.setattr(flops, "count_step_flops", spy)
    res = run_trial(config(tmp_path, acc=3), cache_dir=tmp_path / "cache")
    assert res.state == "complete" and res.metrics["flops_per_sample"] == MATMUL_FLOPS_PER_SAMPLE
    assert counted == [8]  # one batch of 8 samples, not 3 x 8
