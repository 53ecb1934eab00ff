"""The study's one Ray Tune run, as tuner.search._runner fits it: the trial function with each trial's resources,
the Tuner over the run's searcher (tuner.search._phases: the search, then the confirmation) and scheduler, its
run config (under the study folder's ray/, no retry of a failed trial), and each trial's name and folder."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.search._options import SearchPlan
    from tuner.search._resources import Resources


def make_tuner(trainable: Any, setup: Any, plan: "SearchPlan", resources: "Resources", phases: Any, scheduler: Any,
               callbacks: list[Any], verbose: bool) -> Any:
    """The Tuner of the study's run: `trainable` (the runner's, the tests' seam) handed `setup` (the
    tuner.search._trial.TrialSetup) with one trial's resources (a DDP trial's one CPU: its workers hold the rest),
    `phases` its searcher, at most the study's concurrency at once. One Tune run for the search and the
    confirmation: a run of its own for the re-runs paid Tune's start-up and a fresh trial process again.
    num_samples=-1: the searcher says when it is done."""
    from ray import tune

    if resources.ddp_workers > 1:
        trial_resources: dict[str, float] = {"cpu": 1}
    else:
        trial_resources = {"cpu": resources.cpus_per_trial, "gpu": resources.gpus_per_trial}
    fn = tune.with_resources(tune.with_parameters(trainable, setup=setup), trial_resources)
    return tune.Tuner(
        fn,
        tune_config=tune.TuneConfig(search_alg=phases, scheduler=scheduler, num_samples=-1,
                                    max_concurrent_trials=resources.concurrency, reuse_actors=True,
                                    trial_name_creator=trial_name, trial_dirname_creator=trial_name),
        run_config=run_config("run", plan, verbose, callbacks),
    )


def run_config(kind: str, plan: "SearchPlan", verbose: bool, callbacks: list[Any]) -> Any:
    from ray import tune

    return tune.RunConfig(name=f"{kind}-" + datetime.now().strftime("%Y%m%d-%H%M%S"),
                          storage_path=str(plan.folder.ray_dir), verbose=1 if verbose else 0, callbacks=callbacks,
                          failure_config=tune.FailureConfig(max_failures=0))


def rerun_name(trial: Any) -> str:
    from tuner.search._protocol import TrialOrder

    order = TrialOrder.from_config(trial.config)
    return f"trial-{order.trial:04d}-rerun-{int(order.repeat or 0)}"


def trial_name(trial: Any) -> str:
    """Ray's name and folder for a trial: the study's trial number (Ray's default embeds every param), and the
    repeat for a confirmation re-run."""
    from tuner.search._protocol import order_of

    order = order_of(trial.config)
    if order is not None and order.rerun:
        return rerun_name(trial)
    return f"trial-{order.trial:04d}" if order is not None else f"trial-{trial.trial_id}"
