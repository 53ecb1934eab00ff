"""`tuner search` as a library: Ray Tune trials driven by Optuna over a search space (tuner.space), multi-objective
and resumable.

What a program that drives a study needs: `run_search(SearchOptions(...)) -> SearchSummary` (plan_search checks
the options alone, without Ray or disk), and the resources its trials get (resolve_resources over a ClusterInfo
from local_cluster or ray_cluster), the sampling context a space is resolved for (trial_context, cpu_facts), and
a storage URL as reports show it (shown_url, its password hidden). The pieces a program may reuse on their own (the sampler tuner builds, how a
trial's outcome is told to Optuna, the wall cap, the loader probes) are in tuner.search.toolkit. Every other module
here is internal (underscore-named).
"""

from tuner.search._context import cpu_facts, trial_context
from tuner.search._options import SearchOptions, SearchPlan
from tuner.search._plan import plan_search
from tuner.search._resources import ClusterInfo, Resources, local_cluster, ray_cluster, resolve_resources
from tuner.search._runner import SearchSummary, run_search
from tuner.search._storage import shown_url

__all__ = [
    "ClusterInfo",
    "Resources",
    "SearchOptions",
    "SearchPlan",
    "SearchSummary",
    "cpu_facts",
    "local_cluster",
    "plan_search",
    "ray_cluster",
    "resolve_resources",
    "run_search",
    "shown_url",
    "trial_context",
]
