"""tuner: find PyTorch training settings that train fast without training worse.

The public API is the Workload contract: `tuner.Workload` (and `tuner.Phase` for several optimizers) describes a
model to tune; `tuner.trial_context()` tells the workload's code about the trial it runs in. Everything else is
reached through the `tuner` command.
"""

from tuner.workload import Phase, Shared, TrialContext, Workload, trial_context

__version__ = "0.2.0"
__all__ = ["Phase", "Shared", "TrialContext", "Workload", "__version__", "trial_context"]
