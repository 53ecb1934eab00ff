"""A study's searcher on a tiny space with its folder, for tests that drive the searcher or the recorder (which
needs the run's searcher: the searcher records every trial) without a search."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CONTEXT = {"cpus": 2, "gpus": 0, "device": "cpu", "precisions": ["fp32"], "tf32_available": False}


def tiny_searcher(path: Path, rungs: list[float] | None = None, sampler: Any = None,
                  trials: int = 20) -> tuple[Any, Any, list[Any]]:
    """(StudySearcher, its StudyFolder at `path`, the objectives: throughput max, loss min) on tiny_space(4), with
    a RandomSampler (or `sampler`), the study's SQLite database in the folder, and `trials` planned."""
    import optuna
    import yaml

    from tests.helpers.spaces_for_tests import tiny_space
    from tuner.config import Budget
    from tuner.search._searcher import StudySearcher
    from tuner.search._storage import open_storage
    from tuner.space import parse_space
    from tuner.study import Objective, StudyFolder, StudyMeta

    space = parse_space(yaml.safe_load(tiny_space(4)), source="tiny", name="tiny").resolve(CONTEXT)
    objectives = [Objective(metric="throughput", direction="maximize"), Objective(metric="loss", direction="minimize")]
    folder = StudyFolder(path)
    folder.path.mkdir(parents=True)
    folder.write_meta(StudyMeta(name="s", objectives=objectives, params=["batch_size", "beta1"]))
    searcher = StudySearcher(space, objectives, context=CONTEXT, budget=Budget(samples=480),
                             sampler=sampler or optuna.samplers.RandomSampler(seed=0),
                             storage=open_storage(f"sqlite:///{folder.path / 'study.db'}"), study_name="s",
                             study_dir=folder.path, rungs=rungs, trials=trials)
    return searcher, folder, objectives
