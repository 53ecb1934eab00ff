"""The Workload API: how a user's model reaches tuner (api), what it may ask about the trial (context), how a
reference such as `path/to/file.py:make` is resolved (reference), imported and built (loader), imported once
before a fork where that is safe (preimport), shipped to Ray's other nodes (shipping), and how the user's frames
are told apart in an error (frames)."""

from tuner.workload.api import OptimizerFactory, Phase, Shared, Workload
from tuner.workload.context import TrialContext, running, trial_context
from tuner.workload.frames import SHIPPED_ENV, user_error_line, user_traceback
from tuner.workload.loader import build, factory_arguments, import_factory, kill_process, probe_import
from tuner.workload.preimport import import_changes, process_state
from tuner.workload.reference import WorkloadRef, parse_ref
from tuner.workload.shipping import SHIP_EXCLUDES, Shipment, importable_sources, ship_paths, shipment

__all__ = [
    "OptimizerFactory", "Phase", "SHIP_EXCLUDES", "SHIPPED_ENV", "Shared", "Shipment", "TrialContext", "Workload",
    "WorkloadRef", "build", "factory_arguments", "import_changes", "import_factory", "importable_sources",
    "kill_process", "parse_ref", "probe_import", "process_state", "running", "ship_paths", "shipment",
    "trial_context", "user_error_line", "user_traceback",
]
