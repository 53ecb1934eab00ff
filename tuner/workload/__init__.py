"""The Workload API: how a user's model reaches tuner (api), what it may ask about the trial (context), and how
a reference such as `path/to/file.py:make` is found and shipped (loader)."""

from tuner.workload.api import Phase, Shared, Workload
from tuner.workload.context import TrialContext, trial_context

__all__ = ["Phase", "Shared", "TrialContext", "Workload", "trial_context"]
