"""tuner's own workloads, written against the public Workload API like any user's: `gan` (DCGAN) and `cnn`."""

__all__ = ["cnn", "gan"]  # each module's make() is a workload factory (`--workload cnn` loads it by name)
