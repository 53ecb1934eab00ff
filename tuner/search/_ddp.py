"""Multi-GPU trials: the Tune trial drives a Ray Train TorchTrainer; every worker runs the same engine.

Ray Train sets up the torch.distributed process group before the loop runs, and the engine wraps its models in
DDP when it finds one. Rank 0's report (the same payload a single-process trial reports) reaches Tune through
TuneReportCallback. On the CPU (use_gpu=False) the backend is gloo, which is how this path is smoke-tested.

A trial the rung scheduler stops is ended by Tune killing its trial actor; its workers die with it, but the
workers' placement group outlives them (Ray Train's cleaner needs the state API, which a study's Ray runs
without: no dashboard; a placement group lives as long as the job that made it) and would hold their CPUs or GPUs
for the rest of the study. So every report names the workers' placement group (_protocol.with_workers), the first one made
before the workload is built, and it is released on every way a DDP trial ends: the scheduler releases it when it
stops the trial, the study's recorders when it completes or errors and, for the trials Tune stopped at its end
(Ctrl-C, SIGTERM, --study-seconds), when the Tune run ends (release_workers, release_ended).
"""

from __future__ import annotations

import logging
from typing import Any

from tuner.search._protocol import StartReport, TrialOrder, to_tune, with_workers, workers_of
from tuner.search._trial import Engine, TrialSetup, run_one, train_trial


logger = logging.getLogger(__name__)

def _worker_loop(loop_config: dict[str, Any]) -> None:
    import ray.train
    import ray.util

    ctx = ray.train.get_context()
    group = ray.util.get_current_placement_group()
    group_hex = group.id.hex() if group is not None else None

    def send(payload: dict[str, Any]) -> None:
        ray.train.report(with_workers(payload, group_hex))

    send(to_tune(StartReport()))  # names the placement group before the workload builds: one ended then releases it
    payload = run_one(loop_config["config"], loop_config["setup"], rank=ctx.get_world_rank(),
                      engine=loop_config["engine"], send=send)  # the engine reports alike on every rank
    send(payload)  # every rank reports (Train V2 expects it); Tune receives rank 0's


def release_workers(result: dict[str, Any] | None) -> None:
    """Remove the placement group of the DDP trial that reported `result` (a trial that ended: stopped, errored,
    interrupted), which ends any of its workers still alive and gives their resources back to the study. No-op for
    other trials and for a group Ray Train removed already (a trial that finished its loop)."""
    hex_id = workers_of(result)
    if not hex_id:
        return
    try:
        from ray._raylet import PlacementGroupID
        from ray.util import placement_group_table
        from ray.util.placement_group import PlacementGroup, remove_placement_group

        group = PlacementGroup(PlacementGroupID(bytes.fromhex(str(hex_id))))
        if placement_group_table(group).get("state") not in (None, "REMOVED"):
            remove_placement_group(group)
    except Exception as exc:  # noqa: BLE001 - bookkeeping: the study goes on, with fewer free resources
        logger.warning("could not release the workers of an ended DDP trial: %s", exc)


def release_ended(trials: list[Any]) -> None:
    """Release the workers of every DDP trial of a Tune run that has ended (its `on_experiment_end`): a trial Tune
    stopped there (Ctrl-C, SIGTERM, the study's allowance) had its actor killed and left its placement group."""
    seen: set[str] = set()
    for trial in trials:
        result = getattr(trial, "last_result", None) or {}
        hex_id = workers_of(result)
        if hex_id and hex_id not in seen:
            seen.add(hex_id)
            release_workers(result)


def run_ddp_trial(config: dict[str, Any], setup: TrialSetup, engine: Engine = train_trial) -> None:
    """Run one trial on `setup.ddp_workers` workers; call from inside a Tune function trainable."""
    from pathlib import Path

    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    order = TrialOrder.from_config(config)
    per_worker: dict[str, float] = {"CPU": setup.ddp_cpus_per_worker}
    if setup.ddp_use_gpu:
        per_worker["GPU"] = 1
    trainer = TorchTrainer(
        _worker_loop,
        train_loop_config={"config": config, "setup": setup, "engine": engine},
        # A rank that dies (an OOM on one GPU) leaves the others waiting in a collective: bound that wait by the
        # trial's own wall cap instead of the process group's 30-minute default.
        torch_config=TorchConfig(backend="nccl" if setup.ddp_use_gpu else "gloo",
                                 timeout_s=int(max(120, 3 * float(order.limits.wall_limit_s or 600)))),
        scaling_config=ScalingConfig(num_workers=setup.ddp_workers, use_gpu=setup.ddp_use_gpu,
                                     resources_per_worker=per_worker),
        run_config=RunConfig(name=f"trial-{order.trial:04d}",
                             storage_path=str(Path(setup.study_dir) / "ray" / "ddp"),
                             callbacks=[TuneReportCallback()]),
    )
    trainer.fit()
