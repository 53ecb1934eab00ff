"""The environment a trial's process trains under, beside its config: the variables that change torch's speed,
torch's CPU thread counts and the process's niceness (tuner.study.RunEnvironment). A trial records it all;
`tuner export` writes the variables and the thread count back (the niceness is recorded, not exported), so a
re-run, or a user's own loop, reads what the trial read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuner.study import RunEnvironment

if TYPE_CHECKING:
    from tuner.measure.load import CpuShare


def run_environment() -> RunEnvironment:
    """This process's environment now (inside the trial's scope: its threads set)."""
    import os

    import torch

    from tuner.config import speed_env

    return RunEnvironment(variables=speed_env(os.environ), torch_threads=torch.get_num_threads(),
                          interop_threads=torch.get_num_interop_threads(), niceness=niceness())


def niceness() -> int | None:
    """This process's niceness (None where the OS has none): a trial's, and the study's own to compare with."""
    import os

    return os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None


def env_threads(env: dict[str, str] | None) -> int | None:
    """A config's OMP_NUM_THREADS as torch's thread count: `tuner train` sets the variable before torch loads, but
    a run in a process where torch is loaded already (`tuner export --verify`) applies it as set_num_threads."""
    value = (env or {}).get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def record_others(environment: RunEnvironment, share: "CpuShare | None") -> None:
    """What other processes took of the run's CPUs while it trained (tuner.measure.load), into its environment."""
    if share is not None:
        environment.others_share, environment.others_cpus, environment.load1 = share.share, share.others_cpus, \
            share.load1
