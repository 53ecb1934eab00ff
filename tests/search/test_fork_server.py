"""What a trial's fork server imports for the trials it forks (tuner.search._preload): the user's
workload module once, where its import changes nothing a trial reads; never one that seeds, starts a thread or
fails (issue 55 row 1)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tuner.search._fresh import run_fresh
from tuner.search._protocol import TrialOrder
from tuner.search._trial import TrialSetup
from tuner.space import Space
from tuner.study import Objective, TrialResult

HEAD = ("import os\nfrom pathlib import Path\n"
        "Path(__file__).with_suffix('.imports').open('a').write(f'{os.getpid()}\\n')\n")
MODULES = {
    "clean": HEAD,
    "sklearn": HEAD + "from sklearn.datasets import load_digits\n",
    "pool": HEAD + "import torch\ntorch.ones(1 << 22).add_(1).sum()\n",
    "seeds": HEAD + "import torch\ntorch.manual_seed(1)\n",
    "thread": HEAD + "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n",
    "fails": HEAD + "raise RuntimeError('no such dataset')\n",
}
TAIL = "\n\ndef make():\n    raise AssertionError('the fake engine never builds it')\n"


def engine_sees(cfg, *, out_dir=None, **_):
    """Fake: writes its pid and whether its workload's module was imported before it ran (it imports nothing)."""
    path = cfg.workload.rsplit(":", 1)[0]
    there = any(getattr(m, "__file__", None) == path for m in list(sys.modules.values()))
    (Path(out_dir) / "seen.json").write_text(json.dumps({"pid": os.getpid(), "imported": there}))
    return TrialResult(state="complete", throughput=1.0, train_seconds=0.01)


@pytest.fixture
def servers(monkeypatch):
    """A fresh trial process's servers, forking (the CPU), ended after the test."""
    from tuner.search import _fresh

    monkeypatch.setattr(_fresh, "_SERVERS", _fresh.Servers())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    yield
    _fresh._SERVERS.close()


def _setup(tmp_path: Path, workload: str) -> TrialSetup:
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the child cannot import a test module
    space = Space.model_validate({"objectives": [], "params": {"batch_size": 8}})
    return TrialSetup(space=space, base={"workload": workload, "dataset": "synthetic", "budget": {"samples": 64},
                                         "params": {"device": "cpu"}},
                      objectives=[Objective(metric="throughput", direction="max")], study_dir=str(tmp_path / "s"),
                      cache_dir=str(tmp_path / "c"))


def _module(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"wl_{kind}.py"
    path.write_text(MODULES[kind] + TAIL)
    return path


def _trials(tmp_path: Path, workloads: list[str]) -> list[dict]:
    setup = _setup(tmp_path, workloads[0])
    seen = []
    for n, workload in enumerate(workloads):
        run_fresh(TrialOrder(trial=n).to_config(), replace(setup, base=setup.base | {"workload": workload}),
                  engine_sees)
        seen.append(json.loads((tmp_path / "s" / "trials" / f"{n:04d}" / "seen.json").read_text()))
    return seen


def test_a_workload_module_whose_import_changes_nothing_is_imported_once_for_every_trial(tmp_path, servers):
    """Its module-level code ran in the server (and once in the server's throw-away trial import), never in a
    trial's process, and every trial started with it imported: the one before it on a built-in workload too (a
    child forked before the module came in is not used)."""
    path = _module(tmp_path, "clean")
    seen = _trials(tmp_path, ["cnn", f"{path}:make", f"{path}:make", f"{path}:make"])
    assert [s["imported"] for s in seen] == [False, True, True, True]
    importers = path.with_suffix(".imports").read_text().split()
    assert len(importers) == 2 and not {str(s["pid"]) for s in seen} & set(importers)
    assert len({s["pid"] for s in seen}) == 4 and os.getpid() not in {s["pid"] for s in seen}


def test_a_workload_module_that_imports_scikit_learn_is_imported_once_too(tmp_path, servers):
    """scikit-learn's import starts native threads (SciPy's OpenBLAS pool, jemalloc's), which a forked child makes
    again: its forks still run the parallel kernels, so the module is imported once, not in every trial (1-2 s
    each on 2 cores)."""
    path = _module(tmp_path, "sklearn")
    seen = _trials(tmp_path, [f"{path}:make", f"{path}:make"])
    assert [s["imported"] for s in seen] == [True, True]


@pytest.mark.parametrize("kind", ["seeds", "thread", "fails", "pool"])
def test_a_workload_module_whose_import_seeds_starts_a_thread_or_fails_is_imported_by_each_trial(tmp_path, servers,
                                                                                                 kind):
    """Imported once for all, a module that seeds torch would be re-seeded by each trial after it (not so in
    `tuner train`), one that starts a thread would leave the trials without it, one that ran a parallel kernel
    would leave GNU OpenMP's pool, in which a forked child hangs, and a failing one's error is the trial's to
    report: such a module stays out of the server (only its throw-away import ran there)."""
    import torch

    if kind == "pool" and torch.get_num_threads() < 2:
        pytest.skip("one thread: no pool to break")
    path = _module(tmp_path, kind)
    seen = _trials(tmp_path, [f"{path}:make", f"{path}:make"])
    assert [s["imported"] for s in seen] == [False, False]
    assert len(path.with_suffix(".imports").read_text().split()) == 1
