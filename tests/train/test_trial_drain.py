"""A trial with evaluations between its windows (rungs, a target) drains what the loader's workers prefetched
during them (issue 52): the loop's clock leaves the evaluations out, the pause the drain measures must not. Time is
a fake clock the planted workload and its planted loader advance: no real clock is asserted on."""

import statistics
import sys

import pytest
import torch

import tuner.data
from tuner.config import parse_config
from tuner.train import run_trial
from tests.helpers.fakes import PrefetchingLoader
from tests.helpers.userworkloads import IMPORTS, evaluate_source, write

# A step trains in 0.005 s of the fake clock, an evaluation takes 5 s: the loader (a batch of 10 every 0.02 s,
# 500 samples/s) bounds training.
LOADER_BOUND = IMPORTS + '''
T = [0.0]


def data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(96, 4, generator=g)
    y = (x.sum(1) > 0).long()
    return TensorDataset(x[:64], y[:64]), TensorDataset(x[64:], y[64:])


def loss(models, batch):
    T[0] += 0.005
    return F.cross_entropy(models["net"](batch[0]), batch[1])
''' + evaluate_source("T[0] += 5.0") + '''

def make():
    return tuner.Workload(models={"net": lambda: torch.nn.Linear(4, 2)}, datasets=data, loss=loss,
                          evaluate=evaluate, quality=("val_loss", "min"))
'''

RATE = 500.0  # samples/s the planted loader makes


class ModuleClock:
    """The planted module's T[0] (0 until the trial imports it), advanced by the planted loader's waits."""

    def __init__(self, module):
        self.module = module

    def __call__(self):
        return sys.modules[self.module].T[0] if self.module in sys.modules else 0.0

    def advance(self, dt):
        sys.modules[self.module].T[0] += dt


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """(the workload's path, its clock), its loader the planted pipeline with the trial's prefetch depth (2
    workers x 8): build_training's one call of tuner.data.make_loader is patched."""
    module = "loaderbound"
    path = write(tmp_path, LOADER_BOUND, f"{module}.py")
    sys.modules.pop(module, None)
    clock = ModuleClock(module)

    def make_loader(dataset, params, device, **_):
        x, y = dataset.tensors
        batches = [(x[i:i + params.batch_size], y[i:i + params.batch_size])
                   for i in range(0, len(x) - params.batch_size + 1, params.batch_size)]
        return PrefetchingLoader(clock, make_s=params.batch_size / RATE, depth=16, batches=batches)

    monkeypatch.setattr(tuner.data, "make_loader", make_loader)
    yield path, clock
    sys.modules.pop(module, None)


def config(path, budget, target=True):
    raw = {"workload": f"{path}:make", "budget": budget,
           "params": {"batch_size": 10, "device": "cpu", "num_workers": 2, "prefetch_factor": 8},
           "measure": {"warmup_steps": 2, "windows": 5, "min_windows": 3, "window_min_steps": 3,
                       "window_min_seconds": 0.2, "ceiling_seconds": 0}}
    if target:  # never met: an evaluation every 200 samples, after each window
        raw["target"] = {"metric": "val_loss", "value": 0.0, "eval_every_samples": 200}
    return parse_config(raw)


class Rungs:
    """A search's reporter with a rung after each fifth of a 20 s budget."""

    rungs = [4.0, 8.0, 12.0, 16.0, 20.0]

    def __init__(self):
        self.closed = []

    def window(self, report):
        pass

    def rung(self, report):
        self.closed.append(report.rung)


@pytest.mark.parametrize("budget, reporter", [({"samples": 2000}, None), ({"seconds": 20}, None),
                                              ({"seconds": 20}, Rungs)])
def test_a_loader_bound_trial_with_evaluations_between_its_windows_reads_the_loaders_rate(planted, budget, reporter):
    """The issue's case: the median window read 540 samples/s (seconds budget) and 2,000 (samples budget) for a
    500 samples/s pipeline, the windows after each evaluation taking the 16 batches the workers made during it."""
    path, clock = planted
    cfg = config(path, budget, target=reporter is None)
    rungs = reporter() if reporter is not None else None
    res = run_trial(cfg, cache_dir=path.parent / "cache", clock=clock, reporter=rungs)
    assert res.state in ("complete", "not reached"), res.error
    evaluations = len(res.quality_curve or []) if rungs is None else len(rungs.closed)
    assert evaluations >= 3  # evaluations between the windows, each a pause the workers fill their queue in
    assert len(res.windows) >= 3
    assert statistics.median(res.windows) == pytest.approx(RATE, rel=0.05), res.windows
    assert max(res.windows) <= 1.1 * RATE  # no window reads a queue filled during an evaluation
