"""Parity runs on planted workloads: a model whose math ignores autocast is within seed noise under bf16, one that
rounds its output under autocast drifts, one whose loss overflows under autocast diverged."""

from __future__ import annotations

import pytest

from tests.helpers.userworkloads import HEADER, write
from tuner.config import TrialConfig
from tuner.parity import check_parity

FORWARD = {
    # autocast switched off around the model: bf16 changes nothing at all
    "immune": '''
def forward(net, x):
    with torch.autocast("cpu", enabled=False):
        return net(x.float())
''',
    # a numerics defect: under autocast the logits are rounded to a coarse grid, so the gradient is lost
    "rounds": '''
def forward(net, x):
    out = net(x)
    if torch.is_autocast_enabled("cpu"):
        out = (out.float() * 0.5).round() * 2.0
    return out.float()
''',
    # a numerics defect that overflows: the loss is infinite under autocast
    "overflows": '''
def forward(net, x):
    out = net(x).float()
    if torch.is_autocast_enabled("cpu"):
        out = out * float("inf")
    return out
''',
}

MAKE = '''

def make():
    def loss(m, b):
        return F.cross_entropy(forward(m["net"], b[0]), b[1])
    return tuner.Workload(models={"net": lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))},
                          datasets=data, loss=loss, evaluate=evaluate, quality=("val_loss", "min"), hyperparameters={"lr": 0.05})
'''


def _cfg(tmp_path, kind):
    path = write(tmp_path / kind, HEADER + FORWARD[kind] + MAKE)
    return TrialConfig.model_validate({"workload": f"{path}:make", "params": {"batch_size": 16, "device": "cpu"}})


@pytest.mark.parametrize(("kind", "state"), [("immune", "within seed noise"), ("rounds", "drifts"),
                                             ("overflows", "diverged")])
def test_a_planted_numerics_defect_is_caught(tmp_path, kind, state):
    [verdict] = check_parity(_cfg(tmp_path, kind), [{"precision": "bf16"}], 48, tmp_path / "cache")
    assert verdict.knob == "precision=bf16" and verdict.state == state, verdict.text()
    if state == "diverged":
        assert verdict.from_step == 1
    if state == "within seed noise":
        assert verdict.gap == pytest.approx(0.0, abs=1e-6)


def test_the_fp32_arms_are_shared_between_knobs_and_two_other_seeds_are_the_yardstick(tmp_path):
    said: list[str] = []
    verdicts = check_parity(_cfg(tmp_path, "immune"), [{"precision": "bf16"}, {"compile": "off"}], 16,
                            tmp_path / "cache", progress=said.append)
    assert [v.knob for v in verdicts] == ["precision=bf16", "compile=off"]
    assert [s.split(" in ", 1)[1] for s in said] == ["fp32 ...", "precision=bf16 ...", "compile=off ...",
                                                      "fp32, seed 1 ...", "fp32, seed 2 ..."]
