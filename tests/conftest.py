"""Shared fixtures. `ray_session`: one small local Ray for the whole test session (starting Ray costs ~5 s)."""

from __future__ import annotations

import pytest

from tests.helpers.spacesearch import SpaceSearch
from tests.helpers.studies import study_maker


def pytest_configure(config):
    """With `-n` and no `--dist`, pytest-xdist's workers share the queued tests (`worksteal`): under its default
    (`load`) one worker sat idle while 15 tests were still queued on the other, and the suite ended 157 s later
    (lab notes, sixty-sixth session). Set here, not in addopts, so `-p no:xdist` still runs the suite."""
    given = any(str(a) == "-d" or str(a).startswith("--dist") for a in config.invocation_params.args)
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", None) == "load" and not given:
        config.option.dist = "worksteal"


@pytest.fixture(scope="session")
def ray_session():
    """A 2-CPU local Ray with a small object store, no dashboard, and worker output kept off the test's.

    Tests that call `tuner search` in-process reuse it (run_search does not start or stop Ray when one is up).
    """
    from tuner.search._ray_env import start_local_ray

    import ray

    started = False
    if not ray.is_initialized():
        start_local_ray(2, 0, object_store_mb=100)
        started = True
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture
def make_study(tmp_path):
    """make_study(name, kind) -> reports dir holding a fake study (see tests/helpers/studies.py)."""
    return study_maker(tmp_path)


@pytest.fixture
def space_search(tmp_path, capsys):
    """space_search.run(space_text, *flags, name=, reports=) -> Searched(code, out, err, space, reports): the space
    written under tmp_path and `tuner search --space it FLAGS --reports-dir tmp_path/reports` run in-process;
    space_search.start(...) -> (process, reports): the same in its own process (tests/helpers/spacesearch.py)."""
    return SpaceSearch(tmp_path, capsys)


@pytest.fixture
def trial_engine(monkeypatch):
    """trial_engine(engine): the in-process study's trials train with `engine` (train_trial's signature:
    cfg, *, cache_dir, out_dir, wall_limit_s, setup, reporter, measure_ceilings; a fake takes **_ for what it
    ignores) instead of tuner's own, by patching the one function the
    runner hands to Tune. The engine must reach Ray's workers: ship its module by value
    (ray.cloudpickle.register_pickle_by_value). Fake engines train nothing to probe: pass probe=False."""
    from tests.helpers.fakeengine import engine_user

    return engine_user(monkeypatch)


@pytest.fixture(autouse=True)
def _a_fast_preflight_step(monkeypatch):
    """The pre-flight's timed step and scoring decide whether a seconds budget is refused
    (tuner.train.preflight.check_budget), and on a busy machine a real step can take seconds: plant fast ones so no
    in-process test depends on this machine's speed. The steps still run (they catch a loss that raises); the tests of the refusal plant their own
    step time over this one."""
    import sys

    import tuner.train.preflight  # noqa: F401 - the module: tuner.train exports a function of the same name

    preflight = sys.modules["tuner.train.preflight"]
    real = preflight._train_steps
    monkeypatch.setattr(preflight, "_train_steps", lambda *a, **k: (real(*a, **k), 0.001)[1])
    real_score = preflight._score_timed  # scoring's estimate too: evaluate() still runs (its metrics are checked)
    monkeypatch.setattr(preflight, "_score_timed", lambda *a, **k: (real_score(*a, **k)[0], 0.0))


@pytest.fixture(autouse=True)
def _no_busy_machine_sample(monkeypatch):
    """The sample of the machine's load before a study (tuner.search._busy) is not taken: a test's stderr must not
    depend on what else this machine runs (a warning line on a busy CI host). Its own tests plant samples, and
    tests/measure/test_load.py measures real ones."""
    monkeypatch.setenv("TUNER_BUSY_SAMPLE_S", "0")


@pytest.fixture(autouse=True)
def _speed_env_put_back():
    """`tuner train` run in-process (main([...])) sets a config's env in os.environ, as it does in its own process:
    each speed variable (tuner.config.SPEED_ENV) is put back as it was after every test, so one test's
    OMP_NUM_THREADS does not read as the user's own in a later one."""
    import os

    from tuner.config import SPEED_ENV

    had = {key: os.environ.get(key) for key in SPEED_ENV}
    yield
    for key, value in had.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
