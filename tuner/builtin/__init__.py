"""tuner's own workloads, written against the public Workload API like any user's: `gan` (DCGAN) and `cnn`."""
