"""tuner's own workloads, written against the public Workload API like any user's: `gan` (DCGAN) and `cnn`. The
names `--workload gan|cnn` stand for are kept here, with the workloads, not in tuner.workload (a layer below)."""

from __future__ import annotations

from pathlib import Path

from tuner.workload import WorkloadRef, parse_ref

# Each module's make() is a workload factory (`--workload cnn` loads it by name).
WORKLOADS = {"gan": "tuner.builtin.gan:make", "cnn": "tuner.builtin.cnn:make"}


def resolve_workload(text: str, base: Path | None = None) -> WorkloadRef:
    """A `--workload` reference resolved with tuner's own workloads' names (tuner.workload.parse_ref)."""
    return parse_ref(text, base, named=WORKLOADS)


__all__ = ["WORKLOADS", "cnn", "gan", "resolve_workload"]
