"""tuner.train.step on a real GPU: a step in each precision (GradScaler on fp16 only), fused and foreach Adam,
channels_last. The CPU tests reach these branches with a CPU stand-in; here the kernels run."""

import itertools

import pytest
import torch
from torch.nn import functional as F

import tuner
from tests.helpers.cuda import CUDA
from tuner.config import Params
from tuner.models import SmallCNN
from tuner.train.step import PhaseStep
from tuner.train.trial import build_models

pytestmark = CUDA


def _step(gpu, params, seen=None):
    torch.manual_seed(0)
    model = SmallCNN(channels=3, batch_norm=False).to(gpu.torch_device)

    def loss(m, b):
        if seen is not None:
            seen.append(b[0].is_contiguous(memory_format=torch.channels_last) and b[0].stride(1) == 1)
        return F.cross_entropy(m["net"](b[0]), b[1])

    wl = tuner.Workload(models={"net": lambda: model}, datasets=lambda: ([], []), loss=loss)
    return model, PhaseStep(wl, build_models(wl, gpu, params), params, gpu)  # as a trial builds them


def _batch(n=16):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 3, 16, 16, generator=g), torch.randint(0, 10, (n,), generator=g)


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_a_step_in_each_precision_trains_finite_on_the_gpu_with_the_scaler_on_fp16_only(gpu, precision):
    if precision not in gpu.supported_precisions():
        pytest.skip(f"{gpu.describe()} has no {precision}")
    model, step = _step(gpu, Params(batch_size=16, precision=precision))
    before = [p.detach().clone() for p in model.parameters()]
    batches = itertools.repeat(_batch())  # host tensors: the step copies them to the GPU as training does
    for _ in range(4):
        assert step(batches) == 16
    loss = step.pop_mean_loss()
    assert loss == loss and loss < 10
    assert step.scaler.is_enabled() == (precision == "fp16")
    if precision == "fp16":
        assert step.scaler.get_scale() > 0  # a real scale, updated on the device
    assert all(p.is_cuda for p in model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))  # it learned
    assert step.optimizers[0].defaults["fused"]  # tuner's default Adam on CUDA: fused


def test_fused_and_foreach_adam_both_run_on_the_gpu_and_take_the_same_step(gpu):
    fused, fs = _step(gpu, Params(batch_size=16, optimizer_impl="fused"))
    foreach, es = _step(gpu, Params(batch_size=16, optimizer_impl="foreach"))
    assert fs.optimizers[0].defaults["fused"] and es.optimizers[0].defaults["foreach"]
    batch = _batch()
    for _ in range(3):
        fs(itertools.repeat(batch))
        es(itertools.repeat(batch))
    for a, b in zip(fused.parameters(), foreach.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_fused_adam_with_fp16_and_the_grad_scaler_skips_an_overflowing_step(gpu):
    model, step = _step(gpu, Params(batch_size=16, precision="fp16", optimizer_impl="fused"))
    step(itertools.repeat(_batch()))
    before = [p.detach().clone() for p in model.parameters()]
    scale = step.scaler.get_scale()
    x, y = _batch()
    step(itertools.repeat((x * 1e30, y)))  # inf in fp16: the fused kernel sees found_inf and does not step
    assert step.scaler.get_scale() < scale
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_channels_last_on_the_gpu_puts_weights_and_inputs_in_nhwc_and_learns_the_same(gpu):
    seen: list[bool] = []
    nhwc, step = _step(gpu, Params(batch_size=16, channels_last=True), seen)
    plain, plain_step = _step(gpu, Params(batch_size=16))
    batch = _batch()
    step(itertools.repeat(batch))
    plain_step(itertools.repeat(batch))
    assert seen == [True]
    convs = [p for p in nhwc.parameters() if p.dim() == 4]
    assert convs and all(p.is_contiguous(memory_format=torch.channels_last) for p in convs)
    for a, b in zip(nhwc.parameters(), plain.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)
