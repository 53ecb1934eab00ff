"""Whether other work took a share of the trials' CPUs while they trained: a busy machine is said, not read as
noise (issue 58). Each trial and re-run records the share of its CPUs other processes took
(RunEnvironment.others_share, tuner.measure.load); where it reaches BUSY_SHARE the verdict names the figures that
load touches instead of calling their spread noise or asking for a larger budget."""

from __future__ import annotations

from dataclasses import dataclass, field

from tuner.study import BUSY_SHARE, StudyFolder, TrialRecord, TrialResult


@dataclass
class Busy:
    """The runs read while others took BUSY_SHARE or more of their CPUs: trial numbers, and (trial, repeat) of
    re-runs, with the largest share seen."""

    trials: list[int] = field(default_factory=list)
    reruns: list[tuple[int, int]] = field(default_factory=list)
    worst: float = 0.0
    runs: int = 0  # every run with a reading of the share

    def __bool__(self) -> bool:
        return bool(self.trials or self.reruns)

    def text(self) -> str:
        """`the machine was busy: other processes took up to 62% of the trials' CPUs in trials 0, 3 and 2 re-runs
        of trial 6 (3 of 9 runs) ...`."""
        parts = []
        if self.trials:
            parts.append(("trial " if len(self.trials) == 1 else "trials ") + _names(self.trials))
        if self.reruns:
            of = sorted({t for t, _ in self.reruns})
            parts.append(f"{len(self.reruns)} re-run{'s' if len(self.reruns) > 1 else ''} of trial"
                         f"{'s' if len(of) > 1 else ''} {_names(of)}")
        n = len(self.trials) + len(self.reruns)
        return (f"the machine was busy: other processes took up to {self.worst:.0%} of the CPUs of "
                f"{' and '.join(parts)} ({n} of {self.runs} runs, {BUSY_SHARE:.0%} or more each): their throughput "
                f"(and any time to target) moves with that load, not with their settings; run again on a quiet "
                f"machine, or with --busy wait")


def _names(numbers: list[int]) -> str:
    numbers = sorted(numbers)
    return ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}" if len(numbers) > 1 else str(numbers[0])


def _share(result: TrialResult) -> float | None:
    env = result.environment
    return env.others_share if env is not None else None


def busy_runs(records: list[TrialRecord], folder: StudyFolder | None = None) -> Busy:
    """The study's runs read on a busy machine: each trial's own, and its re-runs' where `folder` holds them."""
    out = Busy()
    for record in records:
        share = _share(record)
        if share is not None:
            out.runs += 1
            if share >= BUSY_SHARE:
                out.trials.append(record.trial)
                out.worst = max(out.worst, share)
        for rerun in folder.reruns(record.trial) if folder is not None else []:
            share = _share(rerun)
            if share is None:
                continue
            out.runs += 1
            if share >= BUSY_SHARE:
                out.reruns.append((record.trial, rerun.repeat))
                out.worst = max(out.worst, share)
    return out


def niceness_note(records: list[TrialRecord], own: int | None) -> str | None:
    """Said where trials ran at a higher niceness than the study's own process. Ray's workers on nodes that
    `ray start` started run at its worker_niceness, 15 (a local study's Ray runs them at the study's own:
    tuner.search._ray_env), and beside other work they yield the CPU to it: a MobileNet trial beside one busy core
    read 8.7 samples/s at 15 and 152 at 0, where the user's loop, started as the study was, runs at 0."""
    higher = [n for r in records if r.environment is not None and (n := r.environment.niceness) is not None
              and own is not None and n > own]
    if not higher:
        return None
    levels = _names(sorted(set(higher))).replace(" and ", " or ")
    return (f"{len(higher)} of {len(records)} trials ran at niceness {levels}, above this "
            f"process's {own} (Ray's worker_niceness on nodes `ray start` started): beside other work they yield the "
            f"CPU to it and read slower than your own training would there; start each node's `ray start` with "
            f"RAY_worker_niceness={own} in its environment")
