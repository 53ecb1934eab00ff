"""The Workload API: how a user's model reaches tuner (api), what it may ask about the trial (context), and how
a reference such as `path/to/file.py:make` is found and shipped (loader)."""

from tuner.workload.api import OptimizerFactory, Phase, Shared, Workload
from tuner.workload.context import TrialContext, running, trial_context
from tuner.workload.loader import (
    SHIP_EXCLUDES, SHIPPED_ENV, Shipment, WorkloadRef, build, importable_sources, parse_ref, probe_import, ship_paths,
    shipment, user_error_line, user_traceback,
)

__all__ = [
    "OptimizerFactory", "Phase", "SHIP_EXCLUDES", "SHIPPED_ENV", "Shared", "Shipment", "TrialContext", "Workload",
    "WorkloadRef", "build", "importable_sources", "parse_ref", "probe_import", "running", "ship_paths", "shipment", "trial_context",
    "user_error_line", "user_traceback",
]
