"""The record of a study, beneath `search/` (which writes it) and `report/` (which reads it): the typed trial
record, the one list of metrics, the Objective type, the folder layout and its lock, and the one writer of the
record (study/writer.py: result.json, re-runs, trials.csv, whose derived columns the caller's Figures give). What
is judged from the
records (ranks, statistics, suspects, verdicts) is tuner.analysis's: nothing here imports it. The two readings a
trial stores beside its figures (its headroom against its ceilings, its compile break-even: study/readings.py) are
functions of those figures alone, here so that the trial writing them and the analysis re-deriving them share one
function without a producer importing the judge."""

from tuner.study.folder import (
    CONFIRM_DIR, DB_FILE, LOCK_FILE, RESULT_FILE, STUDY_META, StudyFolder, StudyGone, param_columns, study_record,
)
from tuner.study.meta import HeavyStep, Preflight, SizedBudget, StudyMeta
from tuner.study.format import (
    STATE_COLORS, STATE_NOTES, budget_unit, fmt, fmt_figure, fmt_metric, fmt_param, measured_at_text,
    optimizer_text, ranges, state_hex, state_style,
)
from tuner.study.probes import EnvProbe, LoaderProbe, ProbeChoice, ProbePlan, SpeedProbe
from tuner.study.lock import lock_study
from tuner.study.metrics import (
    BY_KEY, METRICS, Metric, TARGET_COLUMNS, TO_TARGET, finite, metric, table_columns, unit_suffix,
)
from tuner.study.objective import Objective, QUALITY, THROUGHPUT, quality_objective
from tuner.study.horizon import HORIZON_FILE, HorizonCheck, HorizonRun, read_horizon, write_horizon
from tuner.study.parity import PARITY_FILE, KnobParity, StudyParity, read_parity
from tuner.study.provenance import hardware, versions
from tuner.study.readings import (
    BOUND_EXPLANATION, COMPUTE_BOUND_AT, COMPUTE_BOUND_BELOW, INPUT_BOUND_ABOVE, INPUT_SHORT_OF, LOW_OF_PEAK, Bound,
    Headroom, assess, bound_label, break_even_seconds, peak_clause, rate,
)
from tuner.study.reports import FinalReport, PhaseReport, RungReport, StartReport, TrialReport, WindowReport
from tuner.study.record import (
    BUSY_SHARE, Confirmed, ConfirmedFigure, FAILED_STATES, Rerun, RunEnvironment, STATES, State, TrialRecord, TrialResult,
)
from tuner.study.writer import Figures, write_csv, write_csv_row, write_record, write_rerun

__all__ = [
    "BOUND_EXPLANATION", "COMPUTE_BOUND_AT", "COMPUTE_BOUND_BELOW", "INPUT_BOUND_ABOVE", "INPUT_SHORT_OF", "LOW_OF_PEAK",
    "Bound", "Headroom", "assess", "bound_label", "break_even_seconds", "peak_clause", "rate",
    "BUSY_SHARE", "BY_KEY", "FinalReport", "PhaseReport", "RungReport", "StartReport", "TrialReport", "WindowReport", "CONFIRM_DIR", "Confirmed", "ConfirmedFigure", "DB_FILE", "FAILED_STATES", "HeavyStep", "HORIZON_FILE", "HorizonCheck", "HorizonRun", "KnobParity",
    "EnvProbe", "LOCK_FILE", "ProbeChoice", "ProbePlan", "LoaderProbe", "METRICS", "Metric", "Objective", "PARITY_FILE",
    "Preflight", "QUALITY", "RESULT_FILE", "Rerun", "RunEnvironment", "STATES", "STATE_COLORS", "STATE_NOTES", "STUDY_META",
    "SizedBudget", "SpeedProbe", "State", "StudyFolder", "StudyGone", "StudyMeta", "StudyParity", "TARGET_COLUMNS", "THROUGHPUT",
    "TO_TARGET", "TrialRecord", "TrialResult", "budget_unit", "finite",
    "fmt", "fmt_figure", "fmt_metric", "fmt_param", "hardware", "lock_study", "measured_at_text",
    "metric",
    "optimizer_text", "param_columns", "quality_objective", "ranges", "read_horizon", "read_parity",
    "state_hex",
    "state_style", "study_record", "table_columns", "unit_suffix", "versions", "write_horizon",
    "Figures", "write_csv", "write_csv_row", "write_record", "write_rerun",
]
