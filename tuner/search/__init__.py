"""`tuner search`: Ray Tune trials driven by Optuna over a YAML search space, multi-objective and resumable."""

from tuner.search.options import SearchOptions, SearchPlan, plan_search
from tuner.search.outcome import tell_trial, wall_limit
from tuner.search.ray_env import start_local_ray
from tuner.search.resources import ClusterInfo, Resources, local_cluster, ray_cluster, resolve_resources
from tuner.search.runner import SearchSummary, make_sampler, run_search
from tuner.search.space import Space
from tuner.search.spaces import list_spaces, load_space, parse_space, space_names

__all__ = [
    "ClusterInfo",
    "Resources",
    "SearchOptions",
    "SearchPlan",
    "SearchSummary",
    "Space",
    "list_spaces",
    "load_space",
    "local_cluster",
    "make_sampler",
    "parse_space",
    "plan_search",
    "ray_cluster",
    "resolve_resources",
    "run_search",
    "space_names",
    "start_local_ray",
    "tell_trial",
    "wall_limit",
]
