"""Training one trial: build data, model and optimizer from a TrialConfig, train within a budget, measure."""

from tuner.study import TrialResult
from tuner.train.trial import preflight, run_trial

__all__ = ["TrialResult", "preflight", "run_trial"]
