"""params.compile on the CPU: a compiled model trains and reports its compile time and break-even; a compile failure
and a frame that recompiles on every step are trial states; recompiles after the first steps are counted; CUDA-graph
modes are refused on a CPU. One test compiles with Inductor (tiny MLP, mode default: ~25 s on 2 busy cores); the
others plant Dynamo's `eager` backend, which traces and guards like Inductor but generates no code."""

import pytest

from tuner.cli import main
from tuner.config import parse_config
from tuner.errors import ConfigError, DeviceError
from tuner.train import run_trial
from tests.helpers.userworkloads import HEADER, write

# The user's evaluate reports how many of the evaluated model's state_dict keys carry torch.compile's prefix.
MLP = HEADER + '''

def evaluate_keys(models, val_batches):
    out = evaluate(models, val_batches)
    out["orig_mod_keys"] = sum("_orig_mod" in k for k in models["net"].state_dict())
    return out


def make():
    return tuner.Workload(models={"net": lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))},
                          datasets=data, loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]),
                          evaluate=evaluate_keys, quality=("val_loss", "min"))
'''

# An int attribute bumped in forward: Dynamo guards on it, so every call recompiles (a common user mistake).
COUNTER = HEADER + '''

class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * self.calls


def make():
    return tuner.Workload(models={"net": Counting}, datasets=data,
                          loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]))
'''

# The loss feeds the model a shorter batch from its 8th call on: one shape change, one recompile.
SHAPE_CHANGE = HEADER + '''

calls = [0]


def loss(m, b):
    calls[0] += 1
    x, y = (b[0], b[1]) if calls[0] < 8 else (b[0][:4], b[1][:4])
    return F.cross_entropy(m["net"](x), y)


def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data, loss=loss)
'''


def cfg(path, **params):
    return parse_config({"workload": f"{path}:make", "budget": {"samples": 96},
                         "params": {"batch_size": 8, "device": "cpu", "compile": "default", **params},
                         "measure": {"warmup_steps": 1, "windows": 2, "window_min_steps": 2, "ceiling_seconds": 0},
                         "quality": {"enabled": False}})


@pytest.fixture
def eager_backend(monkeypatch):
    import tuner.train.compile as compile_module

    monkeypatch.setattr(compile_module, "BACKEND", "eager")


def test_a_compiled_model_trains_and_tuner_train_reports_compile_time_and_break_even(tmp_path, capsys):
    path = write(tmp_path, MLP, "mlp_compiled.py")
    config = tmp_path / "run.yaml"
    config.write_text(f"workload: {path}:make\nbudget: {{samples: 96}}\n"
                      "params: {batch_size: 8, device: cpu, compile: default}\n"
                      "measure: {warmup_steps: 1, windows: 2, window_min_steps: 2, ceiling_seconds: 0}\n")
    rc = main(["train", "--config", str(config), "--reports-dir", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "compile s" in out and "of compiling" in out  # compile_seconds beside the throughput, with its payback
    # The pre-flight's eager step is planted at 1 ms (tests/conftest.py): on a busy machine compiled never catches up
    # with it, on a quiet one this tiny MLP compiled can run past 8 samples/ms; either way the payback is stated.
    assert ("never pays back" in out or "pays back its" in out) and "pre-flight's eager steps" in out
    assert "graph breaks" in out and "recompiles" in out
    assert [line.split()[-1] for line in out.splitlines() if line.strip().startswith("orig_mod_keys")] == ["0"]


def test_a_compile_failure_is_a_trial_state_with_the_compilers_line(tmp_path, monkeypatch):
    import tuner.train.compile as compile_module

    def broken_backend(gm, example_inputs):
        raise NotImplementedError("planted: no lowering for aten.planted_op")

    monkeypatch.setattr(compile_module, "BACKEND", broken_backend)
    res = run_trial(cfg(write(tmp_path, MLP, "mlp_broken.py")), cache_dir=tmp_path)
    assert res.state == "error" and res.traceback is None
    assert res.error.startswith("torch.compile (mode default) failed: ") and "planted" in res.error
    assert "\n" not in res.error


def test_a_model_that_recompiles_on_every_step_is_a_trial_state_naming_the_guard(tmp_path, eager_backend):
    res = run_trial(cfg(write(tmp_path, COUNTER, "counting.py")), cache_dir=tmp_path)
    assert res.state == "error" and "\n" not in res.error
    assert "recompiled on each of the first 5 steps" in res.error and "calls" in res.error  # Dynamo's guard


def test_recompiles_after_the_first_steps_are_counted(tmp_path, eager_backend):
    res = run_trial(cfg(write(tmp_path, SHAPE_CHANGE, "shapes.py")), cache_dir=tmp_path)
    assert res.state == "complete", res.error
    assert res.get("recompiles") >= 1 and res.get("graph_breaks") == 0
    assert res.get("compile_seconds") is not None and res.get("compile_steps") >= 1
    assert res.get("throughput") > 0 and len(res.windows) >= 1  # the windows came after the compile


def test_cuda_graph_modes_are_refused_on_a_cpu_and_a_bare_off_is_off(tmp_path):
    with pytest.raises(DeviceError, match="reduce-overhead needs a CUDA device"):
        run_trial(cfg(write(tmp_path, MLP, "mlp_cpu.py"), compile="reduce-overhead"), cache_dir=tmp_path)
    assert parse_config({"params": {"compile": False}}).params.compile == "off"  # YAML 1.1 reads `off` as false
    with pytest.raises(ConfigError, match="params.compile"):
        parse_config({"params": {"compile": "fast"}})


def test_unwrap_gives_the_users_module_under_compile():
    import torch
    from torch import nn

    from tuner.train.distributed import unwrap, without_ddp

    net = nn.Linear(2, 2)
    compiled = torch.compile(net)  # not called: nothing compiles
    assert unwrap(compiled) is net and without_ddp(compiled) is compiled
    assert list(unwrap(compiled).state_dict()) == ["weight", "bias"]


def test_graph_breaks_remembered_for_cached_graphs_are_those_of_the_same_classes_and_knobs(monkeypatch):
    """A trial whose graphs came from Dynamo's cache (nothing traced) reports the breaks counted when those graphs
    were traced: not those of another workload's class of the same name, nor of the same class at another
    precision (planted counters: each trace here breaks `breaks` times)."""
    from torch import nn

    from tuner.config import Params
    from tuner.train import compile as comp

    counters = {"frames": 0, "breaks": 0}
    monkeypatch.setattr(comp, "frames_compiled", lambda: counters["frames"])
    monkeypatch.setattr(comp, "graph_breaks", lambda: counters["breaks"])
    monkeypatch.setattr(comp, "_breaks_seen", {})

    def trial(model, params, traced_breaks=None):
        watch = comp.CompileWatch("default", {"net": model}, params)
        if traced_breaks is not None:  # Dynamo traced this trial's graphs
            counters["frames"] += 1
            counters["breaks"] += traced_breaks
        return watch.graph_breaks()

    def other_net():  # another workload's class, also named Net
        class Net(nn.Linear):
            pass

        return Net(2, 2)

    class Net(nn.Linear):
        pass

    fp32, bf16 = Params(precision="fp32", device="cpu"), Params(precision="bf16", device="cpu")
    assert trial(Net(2, 2), fp32, traced_breaks=2) == 2
    assert trial(Net(2, 2), fp32) == 2  # cached graphs: the breaks of their trace
    assert trial(other_net(), fp32) == 0  # same name, other code: not that trace's
    assert trial(Net(2, 2), bf16) == 0  # same class, another precision: other graphs
    assert trial(Net(2, 2), bf16, traced_breaks=3) == 3
    assert trial(Net(2, 2), fp32) == 2


def test_a_compile_past_its_limit_is_a_compile_timeout_state_naming_the_limit(tmp_path, monkeypatch):
    """Issue 37: a compile that hangs (planted: a backend that sleeps) must not hold the trial. Its first steps run
    within the compile limit (planted short here; 10 budgets, at least 180 s, otherwise), and past it the trial is
    `compile_timeout`. The sleep is finite only so a regression fails instead of hanging."""
    import time

    import tuner.train.compile as compile_module
    import tuner.train.trial as trial_module

    def hung_backend(gm, example_inputs):
        time.sleep(300)
        return gm.forward

    monkeypatch.setattr(compile_module, "BACKEND", hung_backend)
    monkeypatch.setattr(trial_module, "compile_limit", lambda budget: 1.0)
    res = run_trial(cfg(write(tmp_path, MLP, "mlp_hung.py")), cache_dir=tmp_path)
    assert res.state == "compile_timeout"
    assert res.error.startswith("torch.compile (mode default) did not finish its first steps within 1 s")


def test_the_compile_limit_grows_with_the_budget_and_holds_a_floor():
    from tuner.config import Budget
    from tuner.train.compile import compile_limit

    assert compile_limit(Budget(seconds=6)) == 180.0  # the 6 s budget whose compile hung for 600 s: 3 minutes
    assert compile_limit(Budget(seconds=60)) == 600.0
    assert compile_limit(Budget(samples=1000)) == 600.0
