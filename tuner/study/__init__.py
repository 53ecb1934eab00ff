"""The record of a study, beneath `search/` (which writes it) and `report/` (which reads it): the typed trial
record, the one list of metrics, the Objective type, the folder layout and Pareto ranking."""

from tuner.study.folder import StudyFolder, StudyMeta
from tuner.study.metrics import METRICS, Metric, metric
from tuner.study.objective import Objective, quality_objective
from tuner.study.pareto import Pick, choose, knee, pareto_ranks
from tuner.study.record import FAILED_STATES, STATES, RunEnvironment, State, TrialRecord, TrialResult
from tuner.study.study import Study, known_studies, open_study
from tuner.study.target import NOT_REACHED, CurvePoint, curve_points, first_reached, target_metrics

__all__ = [
    "CurvePoint", "FAILED_STATES", "METRICS", "Metric", "NOT_REACHED", "Objective", "Pick", "RunEnvironment",
    "STATES", "State", "Study", "StudyFolder", "StudyMeta", "TrialRecord", "TrialResult", "choose", "curve_points",
    "first_reached", "knee", "known_studies", "metric", "open_study", "pareto_ranks", "quality_objective",
    "target_metrics",
]
