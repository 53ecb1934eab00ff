"""The workload's own optimizer and hyperparameters (issue 18, items 4, 7 and 8): the baseline trains with exactly
what the workload declares, a trial's params override or scale it, optimizer factories may build their own
parameter groups from the models, a class is a model factory, batching problems and autograd errors name the
dataset / phase, and a declared sample unit gives `<unit>/s` beside samples/s."""

import json

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import TensorDataset

import tuner
from tuner.config import Params, TrialConfig
from tuner.device import Device
from tuner.errors import ConfigError, WorkloadError
from tuner.train.step import PhaseStep

from tests.helpers.userworkloads import HEADER, write

CPU = Device("cpu", torch.device("cpu"))


def data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=g)
    return TensorDataset(x, (x.sum(1) > 0).long()), TensorDataset(x[:16], (x[:16].sum(1) > 0).long())


def loss(m, b):
    return F.cross_entropy(m["net"](b[0]), b[1])


class Net(nn.Module):  # a class with a zero-argument constructor: a factory
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.norm(self.body(x)))


def step_for(workload, params=None):
    models = {k: f() for k, f in workload.models.items()}
    return PhaseStep(workload, models, params or Params(batch_size=8), CPU), models


def test_a_class_is_a_model_factory_and_an_instance_is_still_refused():
    w = tuner.Workload(models={"net": Net}, datasets=data, loss=loss)
    step, models = step_for(w)
    assert isinstance(models["net"], Net)
    with pytest.raises(TypeError, match="is a model; give a factory"):
        tuner.Workload(models={"net": Net()}, datasets=data, loss=loss)


def test_the_baseline_trains_with_the_workloads_declared_optimizer_settings():
    w = tuner.Workload(models={"net": Net}, datasets=data, loss=loss,
                       hyperparameters={"lr": 3e-3, "betas": (0.8, 0.95), "weight_decay": 0.01})
    step, _ = step_for(w)
    group = step.optimizers[0].param_groups[0]
    assert group["lr"] == 3e-3 and group["betas"] == (0.8, 0.95) and group["weight_decay"] == 0.01
    assert step.settings == {"train": {"optimizer": "Adam", "lr": 3e-3, "betas": [0.8, 0.95], "weight_decay": 0.01}}


def test_an_undeclared_workload_gets_torch_adams_defaults_not_dcgans():
    step, _ = step_for(tuner.Workload(models={"net": Net}, datasets=data, loss=loss))
    group = step.optimizers[0].param_groups[0]
    assert group["lr"] == 1e-3 and group["betas"] == (0.9, 0.999)


def test_the_builtin_gan_declares_dcgans_settings_as_its_own():
    from tuner.builtin import gan

    w = gan.make(dataset="synthetic", image_size=16, width=8, nz=8)
    assert w.hyperparameters == {"lr": 2e-4, "betas": (0.5, 0.999)}


def test_a_trials_params_override_and_lr_scale_is_relative_to_the_workloads_lr():
    w = tuner.Workload(models={"net": Net}, datasets=data, loss=loss, hyperparameters={"lr": 2e-3, "betas": (0.9, 0.99)})
    step, _ = step_for(w, Params(batch_size=8, lr_scale=0.5, beta1=0.7))
    group = step.optimizers[0].param_groups[0]
    assert group["lr"] == pytest.approx(1e-3) and group["betas"] == (0.7, 0.99)
    step, _ = step_for(w, Params(batch_size=8, lr=1e-2))
    assert step.optimizers[0].param_groups[0]["lr"] == 1e-2


def test_betas_for_an_optimizer_without_betas_are_a_config_error():
    w = tuner.Workload(models={"net": Net}, datasets=data, loss=loss, hyperparameters={"lr": 0.1, "momentum": 0.9},
                       optimizer=lambda params, **hp: torch.optim.SGD(params, **hp))
    step, _ = step_for(w)
    assert type(step.optimizers[0]).__name__ == "SGD" and step.optimizers[0].param_groups[0]["momentum"] == 0.9
    with pytest.raises(ConfigError, match="takes no betas"):
        step_for(w, Params(batch_size=8, beta1=0.5))


def test_an_optimizer_factory_that_takes_the_models_builds_weight_decay_groups():
    """nanoGPT's configure_optimizers: decay the matrices, not biases and norms, with AdamW."""
    seen = {}

    def configure(models, lr, betas, weight_decay):
        seen["models"] = models
        params = [p for m in models.values() for p in m.parameters()]
        decay = [p for p in params if p.dim() >= 2]
        rest = [p for p in params if p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                  {"params": rest, "weight_decay": 0.0}], lr=lr, betas=betas)

    w = tuner.Workload(models={"net": Net}, datasets=data, loss=loss, optimizer=configure,
                       hyperparameters={"lr": 1e-3, "betas": (0.9, 0.99), "weight_decay": 0.1})
    step, models = step_for(w)
    opt = step.optimizers[0]
    assert seen["models"] == {"net": models["net"]}
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]
    assert len(opt.param_groups[0]["params"]) == 2 and opt.param_groups[0]["betas"] == (0.9, 0.99)
    assert step.settings["train"]["optimizer"] == "AdamW"
    x = torch.randn(8, 4)
    step(iter([(x, (x.sum(1) > 0).long())]))  # it trains


def test_the_old_optimizer_form_params_lr_betas_still_works():
    calls = []

    def old(params, lr, betas):
        calls.append((lr, betas))
        return torch.optim.Adam(params, lr=lr, betas=betas)

    step_for(tuner.Workload(models={"net": Net}, datasets=data, loss=loss, optimizer=old))
    assert calls == [(1e-3, (0.9, 0.999))]


def test_grad_clip_and_lr_schedule_apply_per_step():
    w = tuner.Workload(models={"net": Net}, datasets=data, loss=lambda m, b: 1e6 * loss(m, b),
                       hyperparameters={"lr": 1.0}, grad_clip=0.5, lr_schedule=lambda s: 1.0 / (s + 1),
                       optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr))
    step, models = step_for(w)
    before = [p.detach().clone() for p in models["net"].parameters()]
    x = torch.randn(8, 4)
    step(iter([(x, (x.sum(1) > 0).long())]))
    moved = torch.sqrt(sum(((p.detach() - b) ** 2).sum() for p, b in zip(models["net"].parameters(), before)))
    assert float(moved) <= 0.5 + 1e-4  # lr 1 x a gradient clipped to norm 0.5
    assert step.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.5)  # the schedule's step 1
    assert step.settings["train"]["grad_clip"] == 0.5


def test_the_record_and_tuner_train_show_the_effective_settings(tmp_path, capsys):
    from tuner.cli import main

    path = write(tmp_path, HEADER + '''

def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data,
                          loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]),
                          hyperparameters={"lr": 0.003, "betas": (0.8, 0.99)})
''')
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"workload: {path}:make\nbudget: {{samples: 64}}\nparams: {{batch_size: 8, lr_scale: 2, "
                   f"device: cpu}}\nmeasure: {{warmup_steps: 1, windows: 2}}\n")
    assert main(["train", "--config", str(cfg), "--format", "json", "--reports-dir", str(tmp_path / "r")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["optimizer"] == {"train": {"optimizer": "Adam", "lr": 0.006, "betas": [0.8, 0.99]}}
    assert main(["train", "--config", str(cfg), "--reports-dir", str(tmp_path / "r")]) == 0
    assert "Adam lr 0.006, betas 0.8/0.99" in capsys.readouterr().out


def test_old_exported_configs_with_dcgan_settings_still_load(tmp_path):
    from tuner.config import load_config

    p = tmp_path / "best.yaml"
    p.write_text("workload: gan\nparams: {batch_size: 64, lr: 0.0002, beta1: 0.5, beta2: 0.999}\n"
                 "provenance: {pytorch: {optimizer: {name: Adam, lr: 0.0002, betas: [0.5, 0.999]}}}\n")
    cfg = load_config(p)
    assert cfg.params.lr == 2e-4 and cfg.params.beta1 == 0.5


def test_the_baseline_point_uses_the_workloads_own_values():
    from tuner.space import parse_space

    space = parse_space({"objectives": [{"metric": "throughput", "direction": "max"}],
                         "params": {"lr_scale": {"type": "float", "low": 0.3, "high": 3, "log": True},
                                    "beta1": {"type": "float", "low": 0.0, "high": 0.95}}}, source="s.yaml", name="s")
    assert space.baseline_point({}, own={"beta1": 0.9}) == {"lr_scale": 1.0, "beta1": 0.9}


def test_the_preflight_reports_the_workloads_own_settings_for_the_baseline():
    from tuner.train.preflight import own_params

    w = tuner.Workload(models={"net": Net}, datasets=data, loss=loss, hyperparameters={"lr": 1e-3, "betas": (0.9, 0.99)})
    assert own_params(w) == {"lr_scale": 1.0, "lr": 1e-3, "beta1": 0.9, "beta2": 0.99}
    sgd = tuner.Workload(models={"net": Net}, datasets=data, loss=loss, hyperparameters={"lr": 0.1, "momentum": 0.9},
                         optimizer=lambda params, **hp: torch.optim.SGD(params, **hp))
    assert own_params(sgd) == {"lr_scale": 1.0, "lr": 0.1}  # a space searching betas is refused for it


# --- batching problems, named before the model runs ---------------------------------------------------------------


class Ragged(torch.utils.data.Dataset):
    def __init__(self, as_lists=False):
        self.as_lists = as_lists

    def __len__(self):
        return 32

    def __getitem__(self, i):
        n = 5 + i % 3
        if self.as_lists:
            return list(range(n))[:5], i % 2
        return torch.arange(n), i % 2


def ragged_workload(folder, as_lists):
    return write(folder, HEADER + f'''
import sys
sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent)!r})
from test_own_hyperparameters import Ragged


def make():
    return tuner.Workload(models={{"net": lambda: nn.EmbeddingBag(16, 2)}},
                          datasets=lambda: (Ragged({as_lists}), Ragged({as_lists})),
                          loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]))
''', name=f"ragged{int(as_lists)}.py")


@pytest.mark.parametrize("as_lists, needles", [
    (False, ["cannot be batched by the default collate", "sample[0] shapes (5,), (6,), (7,)", "Workload(collate="]),
    (True, ["hold Python lists, not tensors", "[0]", "torch.tensor", "Workload(collate="]),
])
def test_samples_default_collate_cannot_batch_are_one_line_naming_collate(tmp_path, as_lists, needles):
    from tuner.train import preflight

    path = ragged_workload(tmp_path, as_lists)
    cfg = TrialConfig(workload=f"{path}:make", params=Params(batch_size=8, device="cpu"))
    with pytest.raises(WorkloadError) as info:
        preflight(cfg, tmp_path / "cache")
    text = str(info.value)
    assert "\n" not in text and "loss" not in text.split("raised")[0][-30:]
    for needle in needles:
        assert needle in text


def test_a_collate_error_in_a_loader_worker_keeps_its_one_line():
    from tuner.data import make_loader

    loader = make_loader(Ragged(), Params(batch_size=8, num_workers=1), CPU)
    with pytest.raises(WorkloadError) as info:
        next(iter(loader))
    assert str(info.value).startswith("the dataset's samples cannot be batched") and "\n" not in str(info.value)


def test_an_inplace_change_across_phases_names_the_phase_and_the_users_loss():
    """DCGAN's `label.fill_`: a tensor the first loss used, changed in place before its backward."""
    def d_loss(models, batch, shared):
        x = batch[0]
        out = torch.sigmoid(models["d"](x))
        label = torch.ones_like(out)
        y = out * label
        label.fill_(0.0)  # in place, after autograd saved it
        return y.mean()

    w = tuner.Workload(models={"d": lambda: nn.Linear(4, 1)}, datasets=data,
                       phases=[tuner.Phase("d", d_loss, ["d"])])
    step, _ = step_for(w)
    with pytest.raises(RuntimeError) as info:
        step(iter([(torch.randn(8, 4), torch.zeros(8))]))
    text = str(info.value)
    assert text.startswith("phase 'd': backward of the loss at ") and f"{__file__}:" in text
    assert "modified by an inplace operation" in text and "fill_" in text


# --- throughput in the user's unit ----------------------------------------------------------------------------------


def test_a_declared_sample_unit_gives_units_per_second_from_the_batches(tmp_path):
    from tuner.train import run_trial

    path = write(tmp_path, HEADER + '''

def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data,
                          loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]),
                          sample_unit="tokens", sample_size=lambda batch: batch[0].numel())
''', name="tokens.py")
    cfg = TrialConfig(workload=f"{path}:make", budget={"samples": 64},
                      params=Params(batch_size=8, device="cpu"), measure={"warmup_steps": 1, "windows": 2})
    result = run_trial(cfg, cache_dir=tmp_path / "cache", device=CPU)
    assert result.state == "complete"
    assert result.get("sample_unit") == "tokens"
    assert result.get("unit_throughput") == pytest.approx(4 * result.throughput)  # 4 tokens a sample

    from tuner.study import table_columns, unit_suffix

    assert "unit_throughput" in [m.key for m in table_columns()]
    assert unit_suffix("unit_throughput", result) == " tokens/s"
    assert unit_suffix("throughput", result) == ""


def test_sample_unit_needs_sample_size():
    with pytest.raises(TypeError, match="both sample_unit"):
        tuner.Workload(models={"net": Net}, datasets=data, loss=loss, sample_unit="tokens")


def test_every_view_shows_the_declared_unit_beside_samples_per_second():
    from tuner.report.view import _measured_cell
    from tuner.cli.progress import trial_line
    from tuner.study import Objective, TrialRecord
    from tuner.study import fmt_metric

    r = TrialRecord(trial=1, state="complete", throughput=100.0, unit_throughput=3200.0, sample_unit="tokens",
                    optimizer={"train": {"optimizer": "AdamW", "lr": 1e-3, "betas": [0.9, 0.99]}})
    assert _measured_cell(r, "unit_throughput") == f"{fmt_metric('unit_throughput', 3200.0)} tokens/s"
    line = trial_line(r, [Objective(metric="throughput", direction="max")], []).plain
    assert "throughput 100" in line and "tokens/s" in line
    plain = TrialRecord(trial=2, state="complete", throughput=100.0)
    assert _measured_cell(plain, "unit_throughput") == fmt_metric("unit_throughput", None)
    assert "/s" not in trial_line(plain, [Objective(metric="throughput", direction="max")], []).plain
