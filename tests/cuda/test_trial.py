"""tuner.train.run_trial on a real GPU: peak memory from the CUDA allocator, the oom state with the memory given
back, TF32 and cuDNN autotuning set for the trial and restored, torch.compile (default, and reduce-overhead's CUDA
graphs) with its compile time apart from the budget, pinned batches copied non_blocking, and of_peak in (0, 1]."""

import pytest
import torch

import tuner.train.step as step_module
from tests.helpers.cuda import CUDA, cnn_config
from tests.helpers.userworkloads import HEADER, write
from tuner.config import Params
from tuner.models import SmallCNN
from tuner.train import run_trial

pytestmark = CUDA


def test_a_gpu_trial_completes_with_the_allocators_peak_memory(gpu, tmp_path):
    torch.cuda.reset_peak_memory_stats()
    res = run_trial(cnn_config(), cache_dir=tmp_path, device=gpu)
    assert res.state == "complete", res.error
    assert res.device.startswith("cuda")
    peak = res.get("peak_mem_mb")
    assert 0 < peak <= torch.cuda.max_memory_allocated() / 2**20 + 1e-6  # max_memory_allocated, reset per trial


# The model repeats each image 1024 x 1024 times before its first layer: a batch of 16 needs ~200 GB.
HUGE = HEADER + '''

class Huge(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)

    def forward(self, x):
        big = x[:, :, None, None].repeat(1, 1, 1024, 1024 * 1024)  # batch x 4 x 1024 x 1M floats
        return self.lin(big.mean((2, 3)))


def make():
    return tuner.Workload(models={"net": Huge}, datasets=data,
                          loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]))
'''


def test_a_batch_too_large_for_the_gpu_is_the_oom_state_and_its_memory_is_given_back(gpu, tmp_path):
    from tuner.config import parse_config

    path = write(tmp_path, HUGE, "huge.py")
    cfg = parse_config({"workload": f"{path}:make", "budget": {"samples": 64},
                        "params": {"batch_size": 16, "device": "cuda"},
                        "measure": {"warmup_steps": 1, "windows": 2, "ceiling_seconds": 0},
                        "quality": {"enabled": False}})
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    res = run_trial(cfg, cache_dir=tmp_path, device=gpu)
    assert res.state == "oom", (res.state, res.error)
    assert "out of memory" in res.error.lower()
    assert res.throughput is None
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() - before < 64 * 2**20  # models, optimizer, activations: all released
    # and the GPU trains again at once
    again = run_trial(cnn_config(), cache_dir=tmp_path, device=gpu)
    assert again.state == "complete", again.error


def test_tf32_on_and_off_reach_the_gpus_matmuls_and_are_restored(gpu):
    if not gpu.tf32_available():
        pytest.skip(f"{gpu.describe()} has no TF32 (Ampere or newer)")
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(1024, 1024, device="cuda", generator=g)
    b = torch.randn(1024, 1024, device="cuda", generator=g)
    exact = (a.double() @ b.double())
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with gpu.numerics(Params(tf32=True)):
        err_tf32 = ((a @ b).double() - exact).abs().max().item()
    with gpu.numerics(Params(tf32=False)):
        err_fp32 = ((a @ b).double() - exact).abs().max().item()
    assert err_tf32 > 10 * err_fp32  # TF32 keeps 10 mantissa bits, fp32 23: the kernels did change
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == flags


def test_a_trial_with_tf32_and_cudnn_benchmark_trains_with_both_set_and_restores_them(gpu, tmp_path, monkeypatch):
    seen = []
    forward = SmallCNN.forward

    def spy(self, x):
        seen.append((torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32,
                     torch.backends.cudnn.allow_tf32))
        return forward(self, x)

    monkeypatch.setattr(SmallCNN, "forward", spy)
    before = (torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    on = run_trial(cnn_config(cudnn_benchmark=True, tf32=gpu.tf32_available()), cache_dir=tmp_path, device=gpu)
    assert on.state == "complete", on.error
    assert seen and all(s == (True, gpu.tf32_available(), gpu.tf32_available()) for s in seen)
    seen.clear()
    off = run_trial(cnn_config(cudnn_benchmark=False, tf32=False), cache_dir=tmp_path, device=gpu)
    assert off.state == "complete", off.error
    assert seen and all(s == (False, False, False) for s in seen)
    assert (torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32) == before


def test_pinned_batches_are_copied_to_the_gpu_non_blocking(gpu, tmp_path, monkeypatch):
    copies = []
    real = step_module.to_device

    def spy(batch, device, non_blocking=False):
        if not batch[0].is_cuda:  # a loader's batch (of_peak's FLOP count feeds one already on the GPU)
            copies.append((all(t.is_pinned() for t in batch), non_blocking, device.type))
        out = real(batch, device, non_blocking)
        assert all(t.is_cuda for t in out)
        return out

    monkeypatch.setattr(step_module, "to_device", spy)
    res = run_trial(cnn_config(pin_memory=True, num_workers=1), cache_dir=tmp_path, device=gpu)
    assert res.state == "complete", res.error
    assert copies and all(c == (True, True, "cuda") for c in copies)
    copies.clear()
    res = run_trial(cnn_config(pin_memory=False), cache_dir=tmp_path, device=gpu)
    assert res.state == "complete", res.error
    assert copies and all(c == (False, False, "cuda") for c in copies)


def test_of_peak_on_the_gpu_is_a_share_of_its_measured_matmul_peak(gpu, tmp_path):
    res = run_trial(cnn_config(ceiling_seconds=0.5), cache_dir=tmp_path, device=gpu)
    assert res.state == "complete", res.error
    share = res.get("of_peak")
    assert share is not None, res.get("of_peak_skipped")
    assert 0 < share <= 1
    from tuner.measure.flops import matmul_peak

    assert matmul_peak(gpu, "fp32", seconds=0.5) > 1e12  # any CUDA GPU of the last decade: over a TFLOP/s


# Last in the file (the proof's time limit would cut these first): Inductor's cold compiles are the slow tests.


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_a_compiled_gpu_trial_trains_with_its_compile_time_apart(gpu, tmp_path, mode):
    torch._dynamo.reset()
    res = run_trial(cnn_config(compile=mode), cache_dir=tmp_path, device=gpu)
    assert res.state == "complete", res.error
    assert res.get("compile_seconds") > 0 and res.get("compile_steps") >= 1
    assert res.get("recompiles") == 0
    # the budget's samples are counted after the compile steps: the timed windows are the compiled graphs'
    assert len(res.windows) == 3 and res.throughput > 0
    assert res.get("train_seconds") > 0
