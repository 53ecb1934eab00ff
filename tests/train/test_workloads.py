"""One optimizer step of each workload: accumulation equivalence, precision plumbing, GAN step sanity."""

import itertools

import pytest
import torch

from tuner.config import Params
from tuner.device import Device
from tuner.models import Discriminator, Generator, SmallCNN
from tuner.train.workloads import CnnStep, GanStep
from fakes import FakeCudaDevice

CPU = Device("cpu", torch.device("cpu"))


def grads_after_one_step(batch_size, acc, x, y):
    torch.manual_seed(0)
    model = SmallCNN(batch_norm=False)
    step = CnnStep(model, Params(batch_size=batch_size, accumulation_steps=acc, lr=1e-3), CPU)
    batches = iter([(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, len(x), batch_size)])
    assert step(batches) == len(x)  # samples consumed, not optimizer steps
    return [p.grad.clone() for p in model.parameters()]


def test_two_micro_batches_of_8_give_the_gradient_of_one_batch_of_16():
    torch.manual_seed(1)
    x, y = torch.randn(16, 1, 32, 32), torch.randint(0, 10, (16,))
    big = grads_after_one_step(16, 1, x, y)
    accumulated = grads_after_one_step(8, 2, x, y)
    for a, b in zip(big, accumulated):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # and a different split of the data would not (the test can fail)
    different = grads_after_one_step(8, 1, x[:8], y[:8])
    assert not all(torch.allclose(a, b, atol=1e-6) for a, b in zip(big, different))


def test_gan_step_updates_both_networks_and_counts_samples():
    torch.manual_seed(0)
    g, d = Generator(image_size=16), Discriminator(image_size=16)
    g0 = [p.clone() for p in g.parameters()]
    d0 = [p.clone() for p in d.parameters()]
    step = GanStep(g, d, Params(batch_size=4, accumulation_steps=3), CPU)
    batches = itertools.repeat((torch.rand(4, 1, 16, 16) * 2 - 1, torch.zeros(4)))
    assert step(batches) == 12
    assert any(not torch.equal(a, b) for a, b in zip(g0, g.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(d0, d.parameters()))
    assert torch.isfinite(torch.tensor(step.pop_mean_loss()))


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_every_cpu_precision_trains_finite(precision):
    torch.manual_seed(0)
    step = CnnStep(SmallCNN(), Params(batch_size=8, precision=precision), CPU)
    batches = itertools.repeat((torch.randn(8, 1, 16, 16), torch.randint(0, 10, (8,))))
    for _ in range(3):
        step(batches)
    loss = step.pop_mean_loss()
    assert loss == loss and loss < 10


def test_fp16_on_cuda_uses_a_grad_scaler_and_bf16_does_not():
    fp16 = CnnStep(SmallCNN(), Params(precision="fp16"), FakeCudaDevice())
    bf16 = CnnStep(SmallCNN(), Params(precision="bf16"), FakeCudaDevice())
    assert fp16.scaler.is_enabled() and not bf16.scaler.is_enabled()
    gan = GanStep(Generator(image_size=16), Discriminator(image_size=16), Params(precision="fp16"), FakeCudaDevice())
    assert gan.scaler.is_enabled() and gan.scaler_g.is_enabled() and gan.scaler is not gan.scaler_g
