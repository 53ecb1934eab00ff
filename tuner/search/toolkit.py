"""Pieces of a study a program may reuse on its own, exactly as `tuner search` uses them (the benchmarks do):

- make_sampler: the Optuna sampler a study builds for `--sampler`, seed and trial count;
- tell_trial: how one trial's outcome (values, or a failure as penalties and a violated constraint) reaches it;
- wall_limit: the wall-time cap a trial's training loop gets for a budget;
- start_local_ray: a quiet local Ray session with exactly these resources, able to import tuner;
- run_probes: the loader probes a study runs before its first trial (in this process when given no resources);
- twin_of, redraws_for: how a study spots a draw that repeats a trial's config, and how often it draws anew;
- ParetoASHA, rung_budgets: the rung scheduler of `--scheduler asha` (Ray-free: `goes_on_at` ranks one rung report) and its ladder.
"""

from tuner.schedule import ParetoASHA, rung_budgets
from tuner.search._outcome import tell_trial, wall_limit
from tuner.search._probe import run_probes
from tuner.search._ray_env import start_local_ray
from tuner.search._redraw import redraws_for, twin_of
from tuner.search._sampler import make_sampler

__all__ = ["ParetoASHA", "make_sampler", "redraws_for", "rung_budgets", "run_probes", "start_local_ray",
           "tell_trial", "twin_of", "wall_limit"]
