"""A busy machine, seen before the study and before each trial (issue 58): a short sample of the CPU time other
processes take (tuner.measure.load), said in one line, and, as the user asked with --busy: measured on (note),
waited out (wait: before the study and before each trial and re-run, at most --busy-wait-seconds each), or refused
before anything is written (refuse). A cluster's trials run on other machines than this driver: there each trial
records its own share, and the verdict says it."""

from __future__ import annotations

from typing import Any

from tuner.errors import UserError
from tuner.measure.load import CpuShare, sample, wait_quiet

SAMPLE_S = 1.0  # the sample before the study (TUNER_BUSY_SAMPLE_S: another length; 0 takes none)


class BusyMachine(UserError):
    """--busy refuse on a busy machine: nothing was started or written."""


def check_machine(busy: str, wait_s: float, console: Any = None, local: bool = True) -> CpuShare | None:
    """The machine before the study: sampled and handled as `busy` asks (refused, or waited out); a sample still
    busy is returned for busy_warning() to say once the plan's checks pass."""
    import os

    seconds = float(os.environ.get("TUNER_BUSY_SAMPLE_S", SAMPLE_S) or 0)
    if not local or seconds <= 0:
        return None
    got = sample(seconds)
    if got is None or not got.busy:
        return got
    if busy == "refuse":
        raise BusyMachine(f"the machine is busy: {got.describe()} in a {seconds:g} s sample; its figures would move "
                          f"with that load: wait for it to end, or run with --busy wait (waits for a quiet machine) "
                          f"or --busy note (measures on and says so)")
    if busy == "wait":
        if console is not None:
            console.print(f"the machine is busy ({got.describe()}): waiting up to {wait_s:g} s for it to be quiet "
                          f"...", soft_wrap=True)
        got = wait_quiet(wait_s) or got
    return got


def busy_warning(got: CpuShare) -> str:
    """The one warning line for a machine still busy when the study starts. Printed once the plan's own checks
    (the pre-flight's included) have passed, so bad input stays one line on a busy machine too."""
    return (f"the machine is busy: {got.describe()}; every figure this study reads moves with that load (each "
            f"trial records the share others took; the verdict says which figures it touches). --busy wait waits "
            f"for a quiet machine, --busy refuse stops here")


def wait_before_trial(wait_s: float | None, cpus: int | None) -> None:
    """--busy wait, in a trial's process before its timed work: until others leave its CPUs, at most `wait_s`."""
    if wait_s:
        wait_quiet(wait_s, cpus)
