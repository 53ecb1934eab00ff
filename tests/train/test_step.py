"""One optimizer step of any workload (tuner.train.step): accumulation equivalence, precision plumbing, phases
that update only their own models, and the built-in GAN's step."""

import itertools
import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import tuner
from tests.helpers.fakes import FakeCudaDevice
from tuner.builtin import gan as gan_builtin
from tuner.config import Params
from tuner.device import Device, cpu_has_bf16
from tuner.models import Discriminator, Generator, SmallCNN
from tuner.train.step import PhaseStep
from tuner.workload.context import TrialContext, running

CPU = Device("cpu", torch.device("cpu"))


def classifier_workload(net):
    return tuner.Workload(models={"net": lambda: net}, datasets=lambda: ([], []),
                          loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]))


def grads_after_one_step(batch_size, acc, x, y):
    torch.manual_seed(0)
    model = SmallCNN(batch_norm=False)
    step = PhaseStep(classifier_workload(model), {"net": model},
                     Params(batch_size=batch_size, accumulation_steps=acc, lr=1e-3), CPU)
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
    different = grads_after_one_step(8, 1, x[:8], y[:8])  # a different split of the data would not
    assert not all(torch.allclose(a, b, atol=1e-6) for a, b in zip(big, different))


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_every_cpu_precision_trains_finite(precision):
    torch.manual_seed(0)
    model = SmallCNN()
    step = PhaseStep(classifier_workload(model), {"net": model}, Params(batch_size=8, precision=precision), CPU)
    batches = itertools.repeat((torch.randn(8, 1, 16, 16), torch.randint(0, 10, (8,))))
    for _ in range(3):
        step(batches)
    loss = step.pop_mean_loss()
    assert loss == loss and loss < 10


@pytest.mark.skipif(not cpu_has_bf16(), reason="this CPU has no native bf16 (AVX512-BF16 / AMX-BF16 / Arm BF16)")
def test_a_native_bf16_cpu_step_computes_in_bf16_without_a_scaler_and_trains_finite():
    """What a CPU study with native bf16 runs: autocast on device_type cpu with torch.bfloat16 (the forward's
    matmuls in bf16, the weights and their gradients kept in fp32), no GradScaler, a finite loss that falls."""
    torch.manual_seed(0)
    model = SmallCNN(batch_norm=False)
    seen = []
    model.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    step = PhaseStep(classifier_workload(model), {"net": model}, Params(batch_size=8, precision="bf16", lr=1e-3), CPU)
    assert not any(s.is_enabled() for s in step.scalers)
    x, y = torch.randn(8, 1, 16, 16), torch.randint(0, 10, (8,))
    step(itertools.repeat((x, y)))
    first = step.pop_mean_loss()
    for _ in range(10):
        step(itertools.repeat((x, y)))
    last = step.pop_mean_loss()
    assert seen and set(seen) == {torch.bfloat16}
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())
    assert math.isfinite(first) and math.isfinite(last) and last < first


def _gan_step(params, device=CPU, world=1):
    """The built-in GAN's step on 16x16 noise, built through the public factory (as a trial builds it)."""
    ctx = TrialContext(device=device.torch_device, cache_dir=torch.__path__[0], world_size=world)
    with running(ctx):
        wl = gan_builtin.make(dataset="synthetic", image_size=16, width=8)
    torch.manual_seed(0)
    models = {"g": Generator(nz=64, ngf=8, image_size=16), "d": Discriminator(ndf=8, image_size=16)}
    return wl, models, PhaseStep(wl, models, params, device), ctx


def test_fp16_on_cuda_has_one_grad_scaler_per_optimizer_and_fused_adam():
    _, _, fp16, _ = _gan_step(Params(precision="fp16"), FakeCudaDevice())
    assert len(fp16.scalers) == 2 and all(s.is_enabled() for s in fp16.scalers)
    assert fp16.scalers[0] is not fp16.scalers[1]  # D's overflows must not change G's scale
    assert all(opt.defaults["fused"] for opt in fp16.optimizers)  # no found_inf host sync per step on CUDA
    _, _, bf16, _ = _gan_step(Params(precision="bf16"), FakeCudaDevice())
    assert not any(s.is_enabled() for s in bf16.scalers)
    _, _, cpu, _ = _gan_step(Params(precision="fp16"))
    assert not any(opt.defaults.get("fused") for opt in cpu.optimizers)


@pytest.mark.parametrize("acc, g_forwards", [(1, 1), (3, 6)])
def test_gan_step_updates_both_networks_and_keeps_graphs_only_as_long_as_needed(acc, g_forwards, monkeypatch):
    """Accumulation 1: one G forward per step, as the textbook. Accumulation 3: G runs again in its own phase
    (3 no-grad + 3 with grad), so no micro-batch's graph outlives its micro-batch."""
    _, models, step, ctx = _gan_step(Params(batch_size=4, accumulation_steps=acc))
    g0 = [p.clone() for p in models["g"].parameters()]
    d0 = [p.clone() for p in models["d"].parameters()]
    calls = []
    original = Generator.forward
    monkeypatch.setattr(Generator, "forward", lambda self, z: calls.append(torch.is_grad_enabled()) or original(self, z))
    batches = itertools.repeat((torch.rand(4, 1, 16, 16) * 2 - 1, torch.zeros(4)))
    with running(ctx):
        assert step(batches) == 4 * acc
    assert len(calls) == g_forwards and sum(calls) == acc  # graphs built: one per micro-batch, in the G phase
    assert any(not torch.equal(a, b) for a, b in zip(g0, models["g"].parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(d0, models["d"].parameters()))
    assert torch.isfinite(torch.tensor(step.pop_mean_loss()))


def test_a_phase_computes_and_applies_only_its_own_models_gradients():
    a, b = nn.Linear(3, 1), nn.Linear(3, 1)
    wl = tuner.Workload(models={"a": lambda: a, "b": lambda: b}, datasets=lambda: ([], []),
                        phases=[tuner.Phase("a", lambda m, batch, s: (m["a"](batch) * m["b"](batch)).mean(), ["a"])])
    b0 = [p.clone() for p in b.parameters()]
    step = PhaseStep(wl, {"a": a, "b": b}, Params(batch_size=2, lr=0.1), CPU)
    step(itertools.repeat(torch.randn(2, 3)))
    assert all(p.grad is None for p in b.parameters())  # not even computed
    assert all(torch.equal(x, y) for x, y in zip(b0, b.parameters()))
    assert all(p.grad is not None for p in a.parameters())


def test_shared_values_pass_from_phase_to_phase_per_micro_batch():
    seen = []

    def first(m, batch, shared):
        shared["x"] = batch.sum()
        return m["a"](batch).mean()

    def second(m, batch, shared):
        seen.append((shared.index, shared.count, float(shared["x"])))
        return m["b"](batch).mean()

    a, b = nn.Linear(1, 1), nn.Linear(1, 1)
    wl = tuner.Workload(models={"a": lambda: a, "b": lambda: b}, datasets=lambda: ([], []),
                        phases=[tuner.Phase("one", first, ["a"]), tuner.Phase("two", second, ["b"])])
    step = PhaseStep(wl, {"a": a, "b": b}, Params(batch_size=1, accumulation_steps=2), CPU)
    step(iter([torch.ones(1, 1), torch.full((1, 1), 2.0)]))
    assert seen == [(0, 2, 1.0), (1, 2, 2.0)]  # each micro-batch's own values, in order


def test_a_loss_that_is_not_a_scalar_tensor_is_a_clear_error():
    net = nn.Linear(2, 2)
    wl = tuner.Workload(models={"net": lambda: net}, datasets=lambda: ([], []), loss=lambda m, b: m["net"](b))
    step = PhaseStep(wl, {"net": net}, Params(batch_size=2), CPU)
    with pytest.raises(TypeError, match="must be a scalar tensor"):
        step(itertools.repeat(torch.randn(2, 2)))


def test_a_trial_step_marks_nothing_and_a_profiled_one_marks_each_part():
    """Outside tuner profile a step's parts enter one shared empty context: no range shows in a profile."""
    from tuner.measure.profile import PhaseClock

    model = SmallCNN(batch_norm=False)
    step = PhaseStep(classifier_workload(model), {"net": model}, Params(batch_size=4), CPU)
    batch = (torch.randn(4, 1, 32, 32), torch.randint(0, 10, (4,)))

    def ranges():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            step(iter([batch]))
        return sorted(e.key for e in prof.key_averages() if e.key.startswith("tuner."))

    assert ranges() == []
    step.mark = PhaseClock(CPU)
    assert ranges() == ["tuner.backward", "tuner.data", "tuner.forward", "tuner.optimizer"]
    assert all(s > 0 for s in step.mark.seconds.values())
