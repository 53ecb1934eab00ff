"""The Workload API: how a user's model reaches tuner (api), what it may ask about the trial (context), and how
a reference such as `path/to/file.py:make` is found and shipped (loader)."""

from tuner.workload.api import OptimizerFactory, Phase, Shared, Workload
from tuner.workload.context import TrialContext, running, trial_context
from tuner.workload.loader import (
    SHIPPED_ENV, WorkloadRef, build, parse_ref, probe_import, ship_paths, user_error_line, user_traceback,
)

__all__ = [
    "OptimizerFactory", "Phase", "SHIPPED_ENV", "Shared", "TrialContext", "Workload", "WorkloadRef", "build",
    "parse_ref", "probe_import", "running", "ship_paths", "trial_context", "user_error_line", "user_traceback",
]
