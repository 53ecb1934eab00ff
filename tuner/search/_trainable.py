"""The Ray Tune function trainable: one trial, its reports while it trains and its last (the trial's work is
_trial.run_one, in a process of its own forked for it: _fresh; DDP trials _ddp)."""

from __future__ import annotations

from typing import Any

from tuner.search._protocol import TrialOrder
from tuner.search._trial import Engine, TrialSetup, train_trial


def trainable(config: dict[str, Any], setup: TrialSetup, engine: Engine = train_trial) -> None:
    """The Ray Tune function trainable: the reports made while it trains, its last report, then return.
    `engine` trains the trial (tuner's own; the tests hand theirs to a study by patching _runner.trainable
    with a function that passes one)."""
    from ray import tune

    from tuner.search._busy import wait_before_trial

    wait_before_trial(setup.busy_wait_s, setup.cpus)  # --busy wait: before anything of it is timed
    if setup.ddp_workers > 1:  # its workers are fresh processes of Ray Train's, started for it
        from tuner.search._ddp import run_ddp_trial

        run_ddp_trial(config, setup, engine)  # rank 0's report reaches Tune through TuneReportCallback
        return
    from tuner.search._fresh import run_fresh

    # Every trial in a process of its own (issue 55): this Ray trial process is reused across trials, so what a
    # trial leaves (threads, caches, allocator and RNG state, a workload's globals) must never reach the next.
    # A confirmation re-run trains its whole budget (no scheduler reads its reports): only its last is sent.
    rerun = TrialOrder.from_config(config).rerun
    tune.report(run_fresh(config, setup, engine, send=None if rerun else tune.report))
