"""The study's analysis: what is judged from its records (tuner.study): Pareto ranks and picks, figures with
their uncertainty, suspect readings, headroom against the ceilings, goodput, the verdict, compile payback, the
Study view that reports start from, and trials.csv's derived columns. Above the record, beneath everything that
shows or acts on a judgement."""

from tuner.analysis.busy import Busy, busy_runs, niceness_note
from tuner.analysis.compile_cost import break_even_seconds, break_even_text, eager_reference, study_payback
from tuner.analysis.goodput import LrAdvice, baseline_record, efficiency, gain, lr_advice, sample_cost, scaled_lr
from tuner.analysis.headroom import (
    BOUND_EXPLANATION, COMPUTE_BOUND_AT, COMPUTE_BOUND_BELOW, Headroom, INPUT_BOUND_ABOVE, INPUT_SHORT_OF,
    NOT_MEASURED, assess, bound_label, cache_key, ceiling_cache_keys, fill_from_cache, of_record, rate, record_bound,
)
from tuner.analysis.horizon import (
    HOLDS, REVERSES, SHRINKS, horizon_ratio, horizon_target, horizon_text, judge, settled_quality, study_ratio, to_target,
)
from tuner.analysis.pareto import Pick, Value, choose, knee, knee_distances, measured, pareto_ranks
from tuner.analysis.eligible import next_to_confirm
from tuner.analysis.held import load_knobs_of, ratio_words
from tuner.analysis.rounds import beyond_one_more_run, is_confirmed
from tuner.analysis.stats import (Interval, NoiseFloor, Pooled, TimeToTarget, confirmed, differ, noise_floor, pool,
                                  ratio_interval, time_to_target)
from tuner.analysis.study import Study, known_studies, open_study
from tuner.analysis.suspect import MIN_SPREAD, WindowNoise, allowed_spread, ranks_windows, reason, window_noise
from tuner.analysis.trials import CSV_FIGURES, CsvFigures, read_records
from tuner.analysis.verdict import Verdict, against_baseline, decide
from tuner.analysis.wall import WallShares, wall_shares
from tuner.analysis.whatif import chase_could_move, pass_could_tell

__all__ = [
    "BOUND_EXPLANATION", "Busy", "COMPUTE_BOUND_AT", "COMPUTE_BOUND_BELOW", "Headroom", "INPUT_BOUND_ABOVE",
    "HOLDS", "INPUT_SHORT_OF", "Interval", "REVERSES", "SHRINKS", "LrAdvice", "MIN_SPREAD", "NOT_MEASURED", "NoiseFloor",
    "Pick", "Pooled", "Study",
    "TimeToTarget", "Value", "Verdict", "WallShares", "WindowNoise", "against_baseline", "allowed_spread", "assess",
    "baseline_record",
    "beyond_one_more_run", "bound_label", "break_even_seconds", "busy_runs", "break_even_text", "cache_key",
    "ceiling_cache_keys", "chase_could_move", "choose", "confirmed", "decide", "differ", "eager_reference", "efficiency",
    "fill_from_cache", "gain", "horizon_ratio", "horizon_target", "horizon_text", "is_confirmed", "judge", "knee", "knee_distances", "known_studies", "load_knobs_of", "lr_advice", "measured", "ratio_words",
    "next_to_confirm", "niceness_note", "noise_floor", "of_record", "open_study", "pareto_ranks", "pass_could_tell", "pool", "rate", "ranks_windows",
    "ratio_interval", "reason", "record_bound", "read_records", "sample_cost", "scaled_lr", "settled_quality", "study_payback", "study_ratio", "time_to_target", "to_target", "wall_shares",
    "window_noise", "CSV_FIGURES", "CsvFigures",
]
