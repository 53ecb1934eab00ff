"""The Ray Tune function trainable: one trial, its reports while it trains and its last (the trial's work is _trial.run_one; DDP trials _ddp)."""

from __future__ import annotations

from typing import Any

from tuner.search._protocol import TrialOrder
from tuner.search._trial import Engine, TrialSetup, run_one, train_trial


def trainable(config: dict[str, Any], setup: TrialSetup, engine: Engine = train_trial) -> None:
    """The Ray Tune function trainable: the reports made while it trains, its last report, then return.
    `engine` trains the trial (tuner's own; the tests hand theirs to a study by patching _runner.trainable
    with a function that passes one)."""
    from ray import tune

    from tuner.search._busy import wait_before_trial

    wait_before_trial(setup.busy_wait_s, setup.cpus)  # --busy wait: before anything of it is timed
    if TrialOrder.from_config(config).rerun:  # a confirmation re-run: the trial's own params, as the search ran it
        if setup.ddp_workers <= 1:  # in a fresh process of its own (a DDP trial's workers are fresh already)
            from tuner.search._fresh import run_fresh

            tune.report(run_fresh(config, setup, engine))
            return
    if setup.ddp_workers <= 1:  # a trial whose wait policy differs from the one torch loaded under here
        from tuner.search._fresh import place_trial, run_fresh

        env = place_trial(config, setup)
        if env is not None:
            tune.report(run_fresh(config, setup, engine, env=env))
            return
    if setup.reruns and setup.ddp_workers <= 1 and engine is train_trial:
        from tuner.search._fresh import start_server

        start_server()  # beside this process's warm-up, ready before the timed work: not before the first re-run
    if setup.ddp_workers > 1:
        from tuner.search._ddp import run_ddp_trial

        run_ddp_trial(config, setup, engine)  # rank 0's report reaches Tune through TuneReportCallback
        return
    tune.report(run_one(config, setup, engine=engine, send=tune.report))
