"""Training one trial: a workload, its knobs and a budget in; measured throughput, quality and a state out."""

from tuner.study import TrialResult
from tuner.train.deadline import SetupTimeout, is_setup_timeout
from tuner.train.parity import FP32, arm_config, check_parity, knob_settings
from tuner.train.preflight import WorkloadCheck, check_budget, check_workload, needed_budget, preflight
from tuner.train.probe import CLOSE, probe_ceilings
from tuner.train.profile import profile_config, trace_file
from tuner.train.reports import StopTrial
from tuner.train.trial import run_trial

__all__ = [
    "CLOSE", "FP32", "SetupTimeout", "StopTrial", "TrialResult", "WorkloadCheck", "arm_config", "check_budget", "check_parity",
    "check_workload", "is_setup_timeout", "knob_settings", "needed_budget", "preflight", "probe_ceilings",
    "profile_config", "run_trial", "trace_file",
]
