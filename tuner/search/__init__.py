"""`tuner search` as a library: Ray Tune trials driven by Optuna over a search space (tuner.space), multi-objective
and resumable.

What a program that drives a study needs: `run_search(SearchOptions(...)) -> SearchSummary` (plan_search checks
the options alone, without Ray or disk), and the resources its trials get (resolve_resources over a ClusterInfo
from local_cluster or ray_cluster), the sampling context a space is resolved for (trial_context, cpu_facts), and
a storage URL as reports show it (shown_url, its password hidden). The pieces a program may reuse on their own (the sampler tuner builds, how a
trial's outcome is told to Optuna, the wall cap, the loader probes) are in tuner.search.toolkit. A run that must
train in a process of its own, as a trial's re-run does (`tuner export --horizon`'s runs), goes through
`run_apart` with its own `Servers`. Every other module here is internal (underscore-named).
"""

from typing import Any

from tuner.search._context import cpu_facts, trial_context
from tuner.search._fresh_server import Servers
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
    "Servers",
    "cpu_facts",
    "local_cluster",
    "plan_search",
    "ray_cluster",
    "resolve_resources",
    "run_apart",
    "run_search",
    "shown_url",
    "trial_context",
]


def run_apart(fn: Any, args: tuple[Any, ...], env: dict[str, str | None] | None = None, *,
              servers: Servers | None = None) -> tuple[int, Any]:
    """`fn(*args)` (a module-level function whose result is JSON) in a process of its own, as a confirmation
    re-run trains (tuner.search._fresh.run_job): forked from the fork server `servers` keeps for `env`'s variables
    (set before torch loads there; None: this process's environment), or a fresh interpreter on a host with a GPU.
    Returns the child's exit code and its result (None: it reported none). The caller closes `servers`."""
    from tuner.search._fresh import run_job

    return run_job(fn, args, env, servers=servers)
