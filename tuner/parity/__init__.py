"""Numerics parity: does a numerics knob (bf16 / fp16 autocast, TF32, torch.compile) change what a model learns?
A config's numerics are compared with fp32 before its speed counts. One home for the concept, its jobs behind it:

- _judge.py: the statistic (`judge`, `ParityVerdict`): the knob's loss trajectory against fp32's and against a change
  of seed. Pure arithmetic.
- _arms.py: the runs it judges (`check_parity`: fp32, each knob, fp32 with other seeds, on the same batches) and
  the check of each arm before it trains (`check_arms`), which `tuner parity` runs.
- _study.py: a study's check before its first trial (`plan_parity`), sized to its time caps (`parity_run`), run on
  the trials' resources (`parity_task`).
- _cache.py: the reports' cache of verdicts a later study of the same workload on the same machine reuses.

What a study keeps of it (parity.json: `StudyParity`, `KnobParity`, `read_parity`) stays in tuner/study: only
tuner/study names the record's files, and the study folder, the report and the export read it without this
package (which stands above train, space and study: it trains the arms and reads a study's space)."""

from tuner.parity._arms import FP32, STEPS, arm_config, check_arms, check_parity, knob_settings, trajectory
from tuner.parity._judge import TOLERANCE, WINDOWS, YARDSTICK_SEEDS, ParityVerdict, State, judge
from tuner.parity._study import STUDY_STEPS, numerics_candidates, plan_parity

__all__ = [
    "FP32", "STEPS", "STUDY_STEPS", "TOLERANCE", "WINDOWS", "YARDSTICK_SEEDS", "ParityVerdict", "State", "arm_config",
    "check_arms", "check_parity", "judge", "knob_settings", "numerics_candidates", "plan_parity", "trajectory",
]
