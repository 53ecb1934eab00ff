"""Studies run in this process whose trials a fake engine answers: the engine handed in (the `trial_engine`
fixture, tests/conftest.py, uses `engine_user`), its module shipped to Ray's workers by value, the space written."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

from tests.helpers.spaces_for_tests import fake_engine_space


def engine_user(monkeypatch: Any) -> Callable[[Callable[..., Any]], None]:
    """use(engine): the in-process study's trials train with `engine` instead of tuner's own, by patching the one
    function the runner hands to Tune (through `monkeypatch`: a test's, or a module fixture's MonkeyPatch)."""
    from tuner.search import _runner
    from tuner.search._trainable import trainable

    def use(engine: Callable[..., Any]) -> None:
        def trial(config, setup):
            trainable(config, setup, engine=engine)

        monkeypatch.setattr(_runner, "trainable", trial)

    return use


def fake_engine_study(reports: Path, use_engine: Callable[[Callable[..., Any]], None], engine: Callable[..., Any],
                      space: str | None = None, **options: Any) -> Any:
    """Runs a study of `space` (fake_engine_space() unless given, written to reports/fake.yaml) whose trials
    `engine` answers, without probes (a fake engine trains nothing to probe); `options` go to SearchOptions.
    Returns run_search's summary."""
    import ray.cloudpickle

    from tuner.search import SearchOptions, run_search

    ray.cloudpickle.register_pickle_by_value(sys.modules[engine.__module__])
    use_engine(engine)
    path = Path(reports) / "fake.yaml"
    path.write_text(space if space is not None else fake_engine_space())
    return run_search(SearchOptions(space=str(path), reports_dir=reports, probe=False, **options))
