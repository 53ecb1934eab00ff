"""channels_last, cudnn_benchmark and optimizer_impl: applied as a user would apply them, changing speed only.

On the CPU; CUDA paths through FakeCudaDevice. What only a GPU can confirm: that cuDNN's autotuning and NHWC
convolutions are faster there, and fused CUDA kernels' speed."""

import itertools
import json

import pytest
import torch
from torch.nn import functional as F

import tuner
from tests.helpers.fakes import FakeCudaDevice
from tuner.cli import main
from tuner.config import Params
from tuner.device import Device
from tuner.models import SmallCNN
from tuner.train.step import PhaseStep
from tuner.train.trial import build_models

CPU = Device("cpu", torch.device("cpu"))


def workload(net, seen=None, optimizer=None):
    def loss(m, b):
        if seen is not None:
            seen.append(b[0].stride(1) == 1)  # channels innermost: NHWC
        return F.cross_entropy(m["net"](b[0]), b[1])

    own = {"optimizer": optimizer, "hyperparameters": {"lr": 0.1}} if optimizer is not None else {}  # SGD's
    return tuner.Workload(models={"net": lambda: net}, datasets=lambda: ([], []), loss=loss, **own)


def one_step(params, seen=None, optimizer=None, device=CPU):
    torch.manual_seed(0)
    model = SmallCNN(channels=3, batch_norm=False)
    wl = workload(model, seen, optimizer)
    step = PhaseStep(wl, build_models(wl, device, params), params, device)  # as a trial builds them
    torch.manual_seed(1)
    batch = (torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,)))
    step(itertools.repeat(batch))
    return model, step


def test_channels_last_puts_the_models_and_4d_inputs_in_nhwc_and_learns_the_same():
    seen: list[bool] = []
    model, _ = one_step(Params(batch_size=8, channels_last=True), seen)
    convs = [p for p in model.parameters() if p.dim() == 4]
    assert convs and all(p.is_contiguous(memory_format=torch.channels_last) for p in convs)
    assert seen == [True]  # the loss saw the images in channels_last
    plain_seen: list[bool] = []
    plain, _ = one_step(Params(batch_size=8), plain_seen)
    assert plain_seen == [False] and not all(p.is_contiguous(memory_format=torch.channels_last) for p in plain.parameters()
                                             if p.dim() == 4)
    for a, b in zip(model.parameters(), plain.parameters()):  # same values after a step: a layout, not a change
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("impl", ["foreach", "fused"])
def test_optimizer_impl_reaches_tuners_own_adam_and_a_factory_that_takes_it(impl):
    _, step = one_step(Params(batch_size=8, optimizer_impl=impl))
    assert step.optimizers[0].defaults[impl] is True and step.settings["train"][impl] is True
    _, sgd = one_step(Params(batch_size=8, optimizer_impl=impl), optimizer=torch.optim.SGD)  # a class takes it
    assert sgd.optimizers[0].defaults[impl] is True


def test_optimizer_impl_not_taken_by_the_users_factory_is_not_passed_and_said():
    def make(params, lr):  # takes no fused=
        return torch.optim.SGD(params, lr=lr)

    _, step = one_step(Params(batch_size=8, optimizer_impl="fused"), optimizer=make)
    assert not step.optimizers[0].defaults.get("fused")
    assert "fused not passed" in step.settings["train"]["optimizer_impl"]
    assert "takes no fused= argument" in step.settings["train"]["optimizer_impl"]


def test_default_optimizer_is_fused_on_cuda_unless_the_knob_says_foreach():
    _, step = one_step(Params(batch_size=8), device=FakeCudaDevice())
    assert step.optimizers[0].defaults["fused"] is True
    _, step = one_step(Params(batch_size=8, optimizer_impl="foreach"), device=FakeCudaDevice())
    assert step.optimizers[0].defaults["foreach"] is True and not step.optimizers[0].defaults["fused"]


def test_cudnn_benchmark_is_set_for_the_trial_on_cuda_and_restored():
    before = torch.backends.cudnn.benchmark
    with FakeCudaDevice().numerics(Params(cudnn_benchmark=not before)):
        assert torch.backends.cudnn.benchmark is (not before)
    assert torch.backends.cudnn.benchmark is before
    with CPU.numerics(Params(cudnn_benchmark=not before)):  # never on a CPU (refused before it gets here)
        assert torch.backends.cudnn.benchmark is before


CONFIG = """
workload: cnn
dataset: synthetic
workload_options: {image_size: 16}
budget: {samples: 64}
params: {batch_size: 8, device: cpu, PARAMS}
measure: {warmup_steps: 1, windows: 2, window_min_steps: 1, window_min_seconds: 0, ceiling_seconds: 0}
quality: {enabled: false}
"""


def test_tuner_train_runs_with_channels_last_and_a_foreach_optimizer(tmp_path, capsys):
    path = tmp_path / "run.yaml"
    path.write_text(CONFIG.replace("PARAMS", "channels_last: true, optimizer_impl: foreach"))
    rc = main(["train", "--config", str(path), "--format", "json", "--reports-dir", str(tmp_path / "r")])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["state"] == "complete" and data["samples"] >= 64


def test_tuner_train_refuses_cudnn_benchmark_on_a_cpu_in_one_line(tmp_path, capsys):
    path = tmp_path / "run.yaml"
    path.write_text(CONFIG.replace("PARAMS", "cudnn_benchmark: true"))
    rc = main(["train", "--config", str(path), "--reports-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == ["tuner: error: cudnn_benchmark needs a CUDA device; set cudnn_benchmark: false on the CPU"]
    assert not (tmp_path / "r").exists()


def test_channels_last_off_leaves_a_model_the_workload_built_in_channels_last_as_it_is():
    torch.manual_seed(0)
    model = SmallCNN(channels=3, batch_norm=False).to(memory_format=torch.channels_last)
    wl = workload(model)
    PhaseStep(wl, build_models(wl, CPU, Params(batch_size=8)), Params(batch_size=8), CPU)
    assert all(p.is_contiguous(memory_format=torch.channels_last) for p in model.parameters() if p.dim() == 4)
