"""Training one trial: a workload, its knobs and a budget in; measured throughput, quality and a state out."""

from tuner.study import TrialResult
from tuner.train.deadline import SetupTimeout, is_setup_timeout
from tuner.train.environment import niceness
from tuner.train.fixed import train_steps
from tuner.train.preflight import WorkloadCheck, check_budget, check_workload, needed_budget, preflight
from tuner.train.probe import CLOSE, probe_ceilings
from tuner.train.profile import profile_config, trace_file
from tuner.train.reports import StopTrial
from tuner.train.trial import run_trial

__all__ = [
    "CLOSE", "SetupTimeout", "StopTrial", "TrialResult", "WorkloadCheck", "check_budget", "check_workload",
    "is_setup_timeout", "needed_budget", "niceness", "preflight", "probe_ceilings", "profile_config", "run_trial",
    "trace_file", "train_steps",
]
