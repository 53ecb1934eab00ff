"""`tuner search`: Ray Tune trials driven by Optuna over a YAML search space, multi-objective and resumable."""

from tuner.search.runner import SearchOptions, SearchPlan, SearchSummary, plan_search, run_search
from tuner.search.space import Space, list_spaces, load_space, space_names

__all__ = [
    "SearchOptions",
    "SearchPlan",
    "SearchSummary",
    "Space",
    "list_spaces",
    "load_space",
    "plan_search",
    "run_search",
    "space_names",
]
