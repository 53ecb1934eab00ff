"""Shared fixtures. `ray_session`: one small local Ray for the whole test session (starting Ray costs ~5 s)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def ray_session():
    """A 2-CPU local Ray with a small object store, no dashboard, and worker output kept off the test's.

    Tests that call `tuner search` in-process reuse it (run_search does not start or stop Ray when one is up).
    """
    for key, value in (("RAY_AUTH_MODE", "disabled"), ("RAY_USAGE_STATS_ENABLED", "0"),
                       ("RAY_AIR_NEW_OUTPUT", "0"), ("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1"),
                       ("TUNE_PRINT_ALL_TRIAL_ERRORS", "0")):
        os.environ.setdefault(key, value)
    import logging

    import ray

    started = False
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                 object_store_memory=100 * 2**20)
        started = True
    yield ray
    if started:
        ray.shutdown()
