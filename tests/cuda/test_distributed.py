"""tuner.train.distributed over a real NCCL process group of one process (one GPU: NCCL refuses two ranks on the
same device): the agreement's all-reduce on the GPU, and a DDP-wrapped model trained by PhaseStep with no_sync
over accumulated micro-batches. What needs two or more GPUs (ranks that disagree, the throughput scaling) is
tests/train/test_ddp.py's, with gloo on the CPU."""

import itertools
import os

import pytest
import torch
import torch.distributed as dist
from torch.nn import functional as F

import tuner
from tests.helpers.cuda import CUDA
from tuner.config import Params
from tuner.models import SmallCNN
from tuner.train.distributed import Agreement, rank_world, unwrap, wrap_ddp
from tuner.train.step import PhaseStep

pytestmark = CUDA


@pytest.fixture
def nccl_group(tmp_path, monkeypatch):
    if not dist.is_available() or not dist.is_nccl_available():
        pytest.skip("torch is built without NCCL")
    monkeypatch.setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    dist.init_process_group("nccl", rank=0, world_size=1, init_method=f"file://{tmp_path}/store",
                            device_id=torch.device("cuda", torch.cuda.current_device()))
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_the_agreement_all_reduces_on_the_gpu_over_nccl(gpu, nccl_group, monkeypatch):
    assert rank_world() == (0, 1)
    calls = []
    real = dist.all_reduce

    def spy(tensor, *args, **kwargs):
        calls.append((tensor.device.type, dist.get_backend()))
        return real(tensor, *args, **kwargs)

    monkeypatch.setattr(dist, "all_reduce", spy)
    # world=2 takes the collective path (a one-rank world takes none); the group's one rank reduces to itself
    agree = Agreement(world=2)
    assert agree.max(3.5) == 3.5
    assert agree.any(True) is True and agree.any(False) is False
    assert calls == [("cuda", "nccl")] * 3


def test_a_ddp_model_on_nccl_trains_with_accumulation_through_no_sync(gpu, nccl_group):
    torch.manual_seed(0)
    model = wrap_ddp(SmallCNN(channels=3, batch_norm=False).to(gpu.torch_device), gpu)
    assert model.device_ids == [gpu.torch_device.index]
    wl = tuner.Workload(models={"net": lambda: model}, datasets=lambda: ([], []),
                        loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]))
    step = PhaseStep(wl, {"net": model}, Params(batch_size=8, accumulation_steps=2), gpu)
    before = [p.detach().clone() for p in unwrap(model).parameters()]
    g = torch.Generator().manual_seed(1)
    batches = itertools.repeat((torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g)))
    assert step(batches) == 16
    torch.cuda.synchronize()
    assert any(not torch.equal(a, b) for a, b in zip(before, unwrap(model).parameters()))
    assert step.pop_mean_loss() < 10
