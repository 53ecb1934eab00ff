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
from tuner.study import table_columns
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

# The same layers plus a B x B similarity of the batch's outputs in the loss (as a contrastive loss): forward
# 2*B*B*16, backward twice that, so 6*16*B FLOPs per sample more, growing with the batch size B.
SIMILARITY = MATMUL.replace('return models["net"](batch[0]).square().mean()',
                            'out = models["net"](batch[0])\n    return out.square().mean() + (out @ out.T).mean()')

# A convolution (with bias: its add counts nothing) and a linear layer on 3 x 8 x 8 images.
CONV = MATMUL.replace("x = torch.randn(256, 64, generator=g)", "x = torch.randn(256, 3, 8, 8, generator=g)").replace(
    "nn.Linear(64, 32, bias=False),", "nn.Conv2d(3, 4, 3), nn.Flatten(),").replace(
    "nn.Linear(32, 16, bias=False)", "nn.Linear(4 * 6 * 6, 16, bias=False)")

# A collate that pads as one padding to the batch's longest sample does, the trial's batches holding a longer sample
# than batches of 8 or fewer: each sample a sequence of 4 (or 12) tokens, the same FLOPs per sample at 2, 4 and 8.
PADDED = MATMUL.replace("def make():", '''def pad(samples):
    x = torch.stack([s[0] for s in samples])
    return (x.unsqueeze(1).expand(-1, 4 if len(samples) <= 8 else 12, -1),)


def make_padded():
    return tuner.Workload(models={"net": lambda: nn.Sequential(nn.Linear(64, 32, bias=False),
                                                               nn.Linear(32, 16, bias=False))},
                          datasets=data, loss=loss, collate=pad)


def make():''')

CONFIG = """
workload: {ref}
budget: {{samples: {samples}}}
params: {{batch_size: {batch}, accumulation_steps: {acc}, num_workers: 0, precision: fp32, device: cpu, threads: 1}}
measure: {{warmup_steps: 1, windows: 2, ceiling_seconds: 0.3}}
quality: {{enabled: false}}
"""


def config(tmp_path, text=MATMUL, attr="make", acc=1, batch=8):
    path = write(tmp_path / "work", text, "planted.py")
    return parse_config(yaml.safe_load(CONFIG.format(ref=f"{path}:{attr}", acc=acc, batch=batch,
                                                     samples=12 * batch)), "test")


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
    return {"precision": precision, "tf32": False, "threads": 2, "omp_wait_policy": "default"}


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
    cfg_file.write_text(CONFIG.format(ref=f"{path}:make", acc=1, batch=8, samples=96))
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
    assert flops.peak_knobs(cfg.params, device, 3) == {"precision": "fp32", "tf32": False, "threads": 3,
                                                      "omp_wait_policy": "default"}
    assert flops.peak_knobs(cfg.params.model_copy(update={"tf32": True}), device, 3)["tf32"] is False  # a CPU
    assert flops.peak_key(device, knobs("fp32")) != flops.peak_key(device, {**knobs("fp32"), "threads": 4})
    planted = dataclasses.replace(knob_table.KNOBS["channels_last"], counts=("flops", "peak"))
    monkeypatch.setitem(knob_table.KNOBS, "channels_last", planted)
    assert flops.flops_key(other(channels_last=True)) != flops.flops_key(cfg)
    assert flops.peak_knobs(cfg.params, device, 3)["channels_last"] == cfg.params.channels_last


def test_flops_are_counted_on_one_micro_batch_whatever_the_accumulation(tmp_path, planted_peak, counted):
    """Accumulation repeats the same work per sample, so the count runs one micro-batch, not accumulation_steps of
    them under the (slow) FLOP counter; the figure is the same."""
    res = run_trial(config(tmp_path, acc=3), cache_dir=tmp_path / "cache")
    assert res.state == "complete" and res.metrics["flops_per_sample"] == MATMUL_FLOPS_PER_SAMPLE
    assert counted == [8]  # one batch of 8 samples, not 3 x 8


def counted_directly(cfg) -> float:
    """FLOPs per sample of one step at cfg's own batch size, counted here (a fresh trial's models and loader)."""
    from tuner.train.step import PhaseStep
    from tuner.train.trial import build_training

    device = resolve_device("cpu")
    training = build_training(cfg, device)
    step = PhaseStep(training.workload, training.models, cfg.params.model_copy(update={"accumulation_steps": 1}),
                     device)
    f, n = flops.count_step_flops(step, next(iter(training.loader)))
    assert n == cfg.params.batch_size
    return f / n


@pytest.fixture
def counted(monkeypatch):
    """The samples of each step the FLOP counter runs in a trial."""
    calls: list[int] = []
    real = flops.count_step_flops

    def spy(step, batch):
        out = real(step, batch)
        calls.append(out[1])
        return out

    monkeypatch.setattr(flops, "count_step_flops", spy)
    return calls


def stored(study: CeilingCache) -> dict:
    return json.loads(study.path.with_name(flops.FLOPS_FILE).read_text())


def study_cache(tmp_path) -> CeilingCache:
    return CeilingCache(tmp_path / "study" / "ceilings.json")


@pytest.mark.parametrize("text", [MATMUL, CONV], ids=["linear", "conv"])
def test_flops_the_same_per_sample_at_small_batches_are_the_count_at_every_batch_size(tmp_path, planted_peak,
                                                                                         counted, text):
    """Counted at 2, 4 and 8 samples, not at the trial's 32, and cached for every batch size: a trial at 16 counts
    nothing, and both figures are what a step at their own batch size counts."""
    cfgs = {b: config(tmp_path, text, batch=b) for b in (32, 16)}
    expected = {b: counted_directly(c) for b, c in cfgs.items()}
    counted.clear()
    assert expected[32] == expected[16] > 0
    if text == MATMUL:
        assert expected[32] == MATMUL_FLOPS_PER_SAMPLE
    study = study_cache(tmp_path)
    first = run_trial(cfgs[32], cache_dir=tmp_path / "cache", ceilings=study)
    second = run_trial(cfgs[16], cache_dir=tmp_path / "cache", ceilings=study)
    assert counted == list(flops.SMALL_BATCHES) == [2, 4, 8]  # nothing at 32, nothing for the second batch size
    assert first.metrics["flops_per_sample"] == expected[32] and second.metrics["flops_per_sample"] == expected[16]
    any_batch = flops.flops_key(cfgs[32], any_batch=True)
    assert any_batch == flops.flops_key(cfgs[16], any_batch=True) != flops.flops_key(cfgs[32])
    assert stored(study) == {any_batch: {"value": expected[32], "kind": "flops", "workload": cfgs[32].workload,
                                         "batch_independent": True, "sizes": [2, 4, 8]}}


def test_a_model_whose_flops_per_sample_grow_with_the_batch_is_counted_at_its_own_batch_size(tmp_path, planted_peak,
                                                                                             counted):
    """A B x B similarity: the small batches disagree, so each batch size is counted at its own (once), and the
    model's dependence on the batch is cached: its second batch size is not checked at small batches again."""
    cfgs = {b: config(tmp_path, SIMILARITY, batch=b) for b in (32, 16)}
    expected = {b: counted_directly(c) for b, c in cfgs.items()}
    counted.clear()
    assert expected == {b: MATMUL_FLOPS_PER_SAMPLE + 6 * 16 * b for b in (32, 16)}
    study = study_cache(tmp_path)
    first = run_trial(cfgs[32], cache_dir=tmp_path / "cache", ceilings=study)
    assert counted == [2, 4, 8, 32]
    assert first.metrics["flops_per_sample"] == expected[32]  # not MATMUL + 6*16*2, what a step of 2 says
    second = run_trial(cfgs[16], cache_dir=tmp_path / "cache", ceilings=study)
    again = run_trial(cfgs[32], cache_dir=tmp_path / "cache", ceilings=study)
    assert counted == [2, 4, 8, 32, 16]  # 16 counted on its own, 32 found in the cache
    assert second.metrics["flops_per_sample"] == expected[16] and again.metrics["flops_per_sample"] == expected[32]
    entries = stored(study)
    marker = entries[flops.flops_key(cfgs[32], any_batch=True)]
    assert marker["value"] == 0 and marker["batch_independent"] is False and marker["sizes"] == [2, 4, 8]
    assert marker["flops_per_sample"] == [MATMUL_FLOPS_PER_SAMPLE + 6 * 16 * n for n in (2, 4, 8)]
    assert [entries[flops.flops_key(c)]["value"] for c in cfgs.values()] == list(expected.values())


def test_batches_padded_beyond_the_small_ones_are_counted_at_the_trial_s_batch_size(tmp_path, planted_peak,
                                                                                    counted):
    """A collate's padding: the same FLOPs per sample at 2, 4 and 8 samples of 4 tokens, but the trial's batch holds
    sequences of 12. The small batches are not counted; the trial's is."""
    cfg = config(tmp_path, PADDED, "make_padded", batch=32)
    expected = counted_directly(cfg)
    counted.clear()
    assert expected == 12 * MATMUL_FLOPS_PER_SAMPLE
    study = study_cache(tmp_path)
    res = run_trial(cfg, cache_dir=tmp_path / "cache", ceilings=study)
    assert counted == [32] and res.metrics["flops_per_sample"] == expected
    assert stored(study)[flops.flops_key(cfg, any_batch=True)]["why"] == "the batches differ beyond their batch size"


def test_batches_differ_in_their_batch_size_only_when_nothing_else_in_them_does():
    import torch

    sizes = [2, 4, 32]

    def alike(make) -> bool:
        return flops.differ_in_batch_only([make(n) for n in sizes], sizes)

    assert alike(lambda n: (torch.zeros(n, 5), torch.zeros(n)))
    assert alike(lambda n: {"x": torch.zeros(7, n, 5), "views": torch.zeros(2 * n)})  # time-major; two views each
    assert alike(lambda n: [torch.zeros(n, 3), torch.zeros(3), "train"])
    assert not alike(lambda n: torch.zeros(n, 4 if n < 8 else 12))  # padding to the longest sample
    assert not alike(lambda n: torch.zeros(n, n + 1))
    assert not alike(lambda n: {"x": torch.zeros(n)} if n < 8 else {"y": torch.zeros(n)})
    assert not alike(lambda n: (torch.zeros(n), [0] * n))  # a list of the samples' values
    assert not alike(lambda n: torch.zeros(n) if n < 8 else torch.zeros(n, 1))


class PlantedMeter:
    """An OthersMeter whose readings are planted: each reading is the next share others took (0.0: quiet)."""

    def __init__(self, shares: list[float]) -> None:
        self.shares = shares

    def __call__(self) -> "PlantedMeter":
        return self

    def read(self):
        from tuner.measure.load import CpuShare

        return CpuShare(seconds=1.0, others_cpus=2 * self.shares[0], share=self.shares.pop(0), load1=2.0, cpus=2)


def test_a_peak_read_while_the_machine_is_busy_reads_no_of_peak_and_the_next_quiet_reading_replaces_it(tmp_path):
    """A peak read beside other work reads low (4x beside one busy process), and a cached one would set every later
    of_peak on the machine against it: it is stored as a lower bound marked busy, read again by the next trial, and
    replaced by the first quiet reading, even a lower one."""
    device = resolve_device("cpu")
    readings = [5e10, 8e10, 7e10, 1e11]

    def measure(dev, precision, seconds):
        return readings.pop(0)

    busy = PlantedMeter([0.52, 0.4, 0.0])
    with pytest.raises(flops.PeakBusy, match="read while other processes took 52% of 2 CPUs"):
        flops.peak_flops(device, knobs("fp32"), tmp_path, measure=measure, memo={}, meter=busy)
    stored = json.loads((tmp_path / "peak.json").read_text())
    assert [(e["value"], e["busy"][:30]) for e in stored.values()] == [(5e10, "other processes took 52% of 2 ")]
    # busy again: the higher reading is kept, still a lower bound, still no peak handed out
    with pytest.raises(flops.PeakBusy, match="40% of 2 CPUs"):
        flops.peak_flops(device, knobs("fp32"), tmp_path, measure=measure, memo={}, meter=busy)
    # quiet: it replaces the busy one, even lower, and the next process reads it from the file without measuring
    assert flops.peak_flops(device, knobs("fp32"), tmp_path, measure=measure, memo={}, meter=busy) == (7e10, True)
    assert flops.peak_flops(device, knobs("fp32"), tmp_path, measure=measure, memo={}, meter=busy) == (7e10, False)
    assert "busy" not in json.loads((tmp_path / "peak.json").read_text()).popitem()[1] and readings == [1e11]


def test_a_trial_on_a_busy_machine_says_why_its_of_peak_is_missing(tmp_path, planted_peak, monkeypatch):
    real = flops.peak_flops
    monkeypatch.setattr(flops, "peak_flops", lambda *a, **k: real(*a, **k, meter=PlantedMeter([0.6])))
    res = run_trial(config(tmp_path), cache_dir=tmp_path / "cache")
    assert res.state == "complete" and res.metrics["flops_per_sample"] == MATMUL_FLOPS_PER_SAMPLE
    assert res.metrics.get("of_peak") is None and res.metrics.get("peak_flops") is None
    assert res.metrics["of_peak_skipped"].startswith("the matmul peak was read while other processes took 60% of 2 "
                                                     "CPUs")


def test_flops_are_counted_on_one_cpu_thread_and_the_trial_s_threads_come_back(tmp_path):
    """The count reads shapes, not speed: on one thread a small step waits at no barrier for a thread a busy
    neighbour holds (a 40 s count beside one busy process on every thread, 1.2 s on one)."""
    import torch

    seen = []

    def step(batches):
        seen.append(torch.get_num_threads())
        x = next(batches)
        torch.mm(x, x)
        return x.shape[0]

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert flops.count_step_flops(step, torch.ones(4, 4)) == (2 * 4 * 4 * 4, 4)
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("groups", [1, 4, 32])
def test_a_grouped_convolution_s_backward_counts_what_its_forward_does_per_gradient(groups):
    # PyTorch's own backward formula (torch 2.14) multiplies a grouped convolution's backward by its groups: a
    # depthwise EfficientNet-B0 trial read 191% of the peak. Each gradient costs the forward's multiply-adds.
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(32, 32, 3, padding=1, groups=groups)
    forward = 2 * 4 * 16 * 16 * 32 * (32 // groups) * 3 * 3  # batch x output pixels x multiply-adds per output

    def step(batches):
        x = next(batches).requires_grad_(True)
        conv(x).sum().backward()
        return x.shape[0]

    counted, samples = flops.count_step_flops(step, torch.randn(4, 32, 16, 16))
    assert samples == 4
    assert counted == 3 * forward  # forward, the input's gradient, the weight's gradient
    if groups == 1:  # where PyTorch's formula is right, the count is its own
        with FlopCounterMode(display=False) as theirs:
            step(iter([torch.randn(4, 32, 16, 16)]))
        assert counted == theirs.get_total_flops()
