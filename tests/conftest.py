"""Shared fixtures. `ray_session`: one small local Ray for the whole test session (starting Ray costs ~5 s)."""

from __future__ import annotations

import pytest

from studies import study_maker


@pytest.fixture(scope="session")
def ray_session():
    """A 2-CPU local Ray with a small object store, no dashboard, and worker output kept off the test's.

    Tests that call `tuner search` in-process reuse it (run_search does not start or stop Ray when one is up).
    """
    from tuner.search.ray_env import start_local_ray

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
    """make_study(name, kind) -> reports dir holding a fake study (see tests/studies.py)."""
    return study_maker(tmp_path)
