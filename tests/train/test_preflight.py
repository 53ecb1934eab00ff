"""The pre-flight check builds a workload as a trial would and calls evaluate() once: broken workloads are one
clear WorkloadError naming the path and the line, before anything runs."""

import sys
from pathlib import Path

import pytest

from tuner.config import Params, parse_config
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
    ('''
def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data,
                          loss=lambda m, b: m["net"](b[0]).sum(), evaluate=lambda m, b: {"val_loss": "low"},
                          quality=("val_loss", "min"))
''', r"evaluate\(\) returns quality metric 'val_loss' as 'low' \(str\), not a number; return a float"),
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


def test_scoring_counts_in_the_budget_check_whatever_the_device():
    """The check's arithmetic is the same on any device: a step timed on a (fake) GPU and scoring that fills the
    budget are refused naming both; without scoring (quality off) the same budget is enough."""
    from tests.helpers.fakes import FakeCudaDevice
    from tuner.errors import BudgetError
    from tuner.train.preflight import check_budget

    gpu = FakeCudaDevice().describe()
    cfg = parse_config({"workload": "gan", "budget": {"seconds": 5},
                        "measure": {"warmup_steps": 2, "min_windows": 3, "window_min_steps": 3}})
    check_budget(cfg, 0.1, gpu, "gan", score_s=3.0)  # 1.1 s of training and 3 s of scoring fit 5 s
    with pytest.raises(BudgetError, match=r"need 1.1 s, and scoring \(evaluate\(\)\) about 5 s more; give "
                                          r"--budget-seconds 8 or more"):
        check_budget(cfg, 0.1, gpu, "gan", score_s=5.0)
    check_budget(cfg.model_copy(update={"quality": cfg.quality.model_copy(update={"enabled": False})}), 0.1, gpu,
                 "gan", score_s=5.0)


def test_the_check_estimates_a_whole_scoring_from_the_batches_it_scored(tmp_path, monkeypatch):
    """The check scores 2 validation batches; a full scoring reads every batch, so its estimate scales by them."""
    monkeypatch.undo()  # the real estimate, not conftest's planted one
    from tuner.train.preflight import _score_timed
    from tuner.train.trial import build_models

    t = [0.0]

    def evaluate(models, val_batches):
        for _ in val_batches:
            t[0] += 1.0  # each batch costs one second of the planted clock
        return {"val_loss": 1.0}

    import tuner

    x, y = torch.randn(40, 4), torch.randint(0, 2, (40,))
    val = torch.utils.data.TensorDataset(x, y)
    workload = tuner.Workload(models={"net": lambda: torch.nn.Linear(4, 2)}, datasets=lambda: (val, val),
                              loss=lambda m, b: m["net"](b[0]).sum(), evaluate=evaluate, eval_batch_size=8)
    models = build_models(workload, CPU, Params())
    metrics, seconds = _score_timed(workload, models, val, CPU, clock=lambda: t[0])
    assert metrics["val_loss"] == 1.0
    assert seconds == pytest.approx(5.0)  # 2 batches took 2 s (timed the second time); the split holds 5 of 8
    assert t[0] == 4.0  # the first call, which pays one-time costs, is not the one timed


COUNTING = HEADER + '''

CALLS = {"loss": 0, "evaluate": 0}


def counted_loss(m, b):
    CALLS["loss"] += 1
    return F.cross_entropy(m["net"](b[0]), b[1])


def counted_evaluate(models, val_batches):
    CALLS["evaluate"] += 1
    return evaluate(models, val_batches)


def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data, loss=counted_loss,
                          evaluate=counted_evaluate, quality=("val_loss", "min"))
'''


@pytest.mark.parametrize("warm_only", [False, True])
def test_a_process_warm_up_takes_one_step_of_one_micro_batch_and_one_scoring(tmp_path, warm_only):
    """A trial process's warm-up (and each confirmation re-run's) needs the kernels primed, not the budget's
    figures: it must not train the config's whole accumulation twice nor score twice, as the budget check does."""
    path = write(tmp_path, COUNTING, "counting.py")
    sys.modules.pop("counting", None)
    config = parse_config({"workload": f"{path}:make", "budget": {"seconds": 30},
                           "params": {"batch_size": 8, "accumulation_steps": 3}})
    check_workload(config, tmp_path / "cache", CPU, warm_only=warm_only)
    calls = sys.modules["counting"].CALLS
    assert calls == ({"loss": 1, "evaluate": 1} if warm_only else {"loss": 6, "evaluate": 2})


def test_a_workload_that_scores_a_subset_while_training_has_k_chosen_from_the_subsets_cost():
    """Issue 51: a time-to-target evaluation of a workload with target_eval_samples is timed on its subset, as a
    trial runs it (eval_subset said, preflight off), not scaled from the whole split: an evaluate() whose cost does
    not follow the split's batches (the built-in GAN's FID over generated images) is read at what it costs."""
    import torch
    from torch.utils.data import TensorDataset

    import tuner
    from tuner.train.preflight import _target_score_timed
    from tuner.workload import TrialContext, running

    val = TensorDataset(torch.zeros(1000, 1))
    now, seen = [0.0], []

    def evaluate(models, batches):  # a planted cost: 0.3 s on a subset whatever its batches, 9 s on the whole
        ctx = tuner.trial_context()
        seen.append((ctx.eval_subset, ctx.preflight, sum(len(b[0]) for b in batches)))
        now[0] += 0.3 if ctx.eval_subset else 9.0
        return {"q": 1.0}

    make = lambda n: tuner.Workload(models={"m": lambda: torch.nn.Linear(1, 1)}, datasets=lambda: (val, val),  # noqa: E731
                                    loss=lambda m, b: b[0].sum(), evaluate=evaluate, target_eval_samples=n)
    models, clock = {"m": torch.nn.Linear(1, 1)}, lambda: now[0]
    with running(TrialContext(device=torch.device("cpu"), cache_dir=Path("."), preflight=True)):
        assert _target_score_timed(make(600), models, val, CPU, 9.0, clock=clock) == 0.3
        assert seen == [(600, False, 600)]  # scored the 600, told so, as a trial's evaluation (not a key check)
        assert _target_score_timed(make(None), models, val, CPU, 9.0, clock=clock) == 9.0  # no subset: the split's
        assert _target_score_timed(make(600), models, val, CPU, None, clock=clock) is None  # not timed: no budget
        # more than the split holds: all of it, still told the size asked (the GAN's FID images follow it)
        assert _target_score_timed(make(5000), models, val, CPU, 9.0, clock=clock) == 0.3
    assert seen == [(600, False, 600), (5000, False, 1000)]




SPY = '''
import json, sys
from pathlib import Path
import tuner.train
from tuner.config import parse_config

pf = sys.modules["tuner.train.preflight"]  # the module: tuner.train's name `preflight` is its function
real = pf.check_workload

def spy(*args, **kwargs):  # in the forked child: what the check imports that this process had not
    before = set(sys.modules)
    out = real(*args, **kwargs)
    new = sorted(m for m in set(sys.modules) - before if m.split(".")[0] == "torch")
    Path(sys.argv[3]).write_text(json.dumps({"pid": __import__("os").getpid(), "torch_imports": new}))
    return out

pf.check_workload = spy
pf.preflight(parse_config({"workload": sys.argv[1], "params": {"batch_size": 8}}), Path(sys.argv[2]))
print(__import__("os").getpid())
'''


def test_the_checks_child_imports_no_torch_module_the_run_would_import_again(tmp_path):
    """`tuner train` checks its workload in a forked child, then trains in the parent. torch's first optimizer
    imports torch._dynamo (about 1-3 s on 2 cores): imported in the child, the parent paid it again for its run,
    so every `tuner train` (and each parity arm) started that much later. The pre-flight imports it before the
    fork."""
    import json
    import subprocess

    path = write(tmp_path, GOOD, "pf.py")
    out = tmp_path / "seen.json"
    done = subprocess.run([sys.executable, "-c", SPY, f"{path}:make", str(tmp_path / "cache"), str(out)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(out.read_text())
    assert seen["pid"] != int(done.stdout.split()[-1])  # the check ran in a child of its own
    assert not [m for m in seen["torch_imports"] if m.startswith("torch._dynamo")], seen["torch_imports"]


COUNTS = '''
import sys
from pathlib import Path
import tuner.train
from tuner.builtin import resolve_workload
from tuner.config import parse_config
from tuner.workload import build

pf = sys.modules["tuner.train.preflight"]
pf.preflight(parse_config({"workload": sys.argv[1], "params": {"batch_size": 8}}), Path(sys.argv[2]))
build(resolve_workload(sys.argv[1]))  # the run, in this process, as `tuner train` builds it after the pre-flight
print(__import__("os").getpid())
'''

LOGS_ITS_IMPORT = "import os as _os\nopen(__file__ + '.imports', 'a').write(f'{_os.getpid()}\\n')\n"


@pytest.mark.parametrize("extra, imports", [("", 2), ("torch.manual_seed(3)\n", 3)])
def test_the_users_module_is_imported_once_before_the_checks_fork_where_that_changes_nothing(tmp_path, extra,
                                                                                              imports):
    """`tuner train` imported the user's module three times: the import check's fork, the check's child and the
    run. Where a throw-away fork's import changed nothing the run reads, the pre-flight imports it before the
    check's fork, and the check and the run find it imported: a module that imports torchvision started about
    1.3 s sooner. A module that seeds torch at import is imported as before, by the check and by the run."""
    import subprocess

    path = write(tmp_path, LOGS_ITS_IMPORT + GOOD + extra, "counted.py")
    done = subprocess.run([sys.executable, "-c", COUNTS, f"{path}:make", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    pids = Path(f"{path}.imports").read_text().split()
    assert len(pids) == imports, pids
    assert pids.count(done.stdout.split()[-1]) == 1  # the run's process imported it once, as the user's own run
