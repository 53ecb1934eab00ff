"""The pre-flight check builds a workload as a trial would and calls evaluate() once: broken workloads are one
clear WorkloadError naming the path and the line, before anything runs."""

import sys

import pytest

from tuner.config import parse_config
from tuner.device import Device
from tuner.errors import WorkloadError
from tuner.train import check_workload
from tests.helpers.userworkloads import GOOD, HEADER, write

import torch

CPU = Device("cpu", torch.device("cpu"))


def check(tmp_path, text, **cfg):
    path = write(tmp_path, text, "pf.py")
    sys.modules.pop("pf", None)
    config = parse_config({"workload": f"{path}:make", "params": {"batch_size": 8}, **cfg})
    return check_workload(config, tmp_path / "cache", CPU)


def test_a_good_workload_reports_its_quality_and_metrics(tmp_path):
    result = check(tmp_path, GOOD)
    assert result.quality.metric == "val_loss" and result.quality.direction == "minimize"
    assert "val_loss" in result.metrics and result.ref.file.endswith("pf.py")


@pytest.mark.parametrize("make, message", [
    ('''
class Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        yield torch.zeros(4)

def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=lambda: (Stream(), Stream()),
                          loss=lambda m, b: m["net"](b).sum())
''', "the training dataset is a Stream, not a map-style dataset"),
    ('''
def make():
    empty = TensorDataset(torch.zeros(0, 4))
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=lambda: (data()[0], empty),
                          loss=lambda m, b: m["net"](b[0]).sum())
''', "the validation dataset is empty"),
    ('''
def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data,
                          loss=lambda m, b: m["net"](b[0]).sum(), evaluate=lambda m, b: {"loss": 1.0},
                          quality=("val_loss", "min"))
''', r"quality metric 'val_loss' is not among what evaluate\(\) returns \(loss\)"),
    ('''
def broken_evaluate(models, val_batches):
    return {"val_loss": 1 / 0}

def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data,
                          loss=lambda m, b: m["net"](b[0]).sum(), evaluate=broken_evaluate,
                          quality=("val_loss", "min"))
''', r"evaluate\(\) raised ZeroDivisionError: division by zero \(at .*pf.py:\d+\)"),
    ('''
def make():
    raise RuntimeError("no GPU weights here")
''', r"building the workload raised RuntimeError: no GPU weights here \(at .*pf.py:\d+\)"),
    ('''
def make():
    return tuner.Workload(models={"net": lambda: "not a module"}, datasets=data, loss=lambda m, b: 0)
''', r"building the models raised TypeError: Workload.models\['net'\]\(\) returned a str"),
])
def test_broken_workloads_are_refused_with_the_path_and_line(tmp_path, make, message):
    with pytest.raises(WorkloadError, match=message):
        check(tmp_path, HEADER + make)


def test_the_dataset_option_reaches_only_factories_that_take_it(tmp_path):
    with pytest.raises(WorkloadError, match="--dataset / dataset: does not fit make"):
        check(tmp_path, GOOD, dataset="digits")


def test_the_check_times_its_steps_and_a_budget_too_short_for_them_is_refused(tmp_path):
    from tuner.errors import BudgetError
    from tuner.train.preflight import check_budget

    result = check(tmp_path, GOOD)
    assert result.step_seconds is not None and result.step_seconds > 0
    cfg = parse_config({"workload": "gan", "budget": {"seconds": 5},
                        "measure": {"warmup_steps": 2, "min_windows": 3, "window_min_steps": 3}})
    check_budget(cfg, 0.1, "cpu", "gan")  # 0.2 + 3 x 0.3 s fit
    with pytest.raises(BudgetError, match=r"a 5 s budget is too short .* need 11 s; give --budget-seconds 14 or more"):
        check_budget(cfg, 1.0, "cpu", "gan")
    check_budget(parse_config({"workload": "gan", "budget": {"samples": 64}}), 100.0, "cpu", "gan")  # no wall contract
