"""Training one trial: a workload, its knobs and a budget in; measured throughput, quality and a state out."""

from tuner.study import TrialResult
from tuner.train.parity import arm_config, check_parity
from tuner.train.preflight import WorkloadCheck, check_workload, preflight
from tuner.train.probe import probe_ceilings
from tuner.train.trial import run_trial

__all__ = ["TrialResult", "WorkloadCheck", "arm_config", "check_parity", "check_workload", "preflight", "probe_ceilings",
           "run_trial"]
