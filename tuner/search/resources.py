"""How many trials run at once and on what: never two timed trials on one device unless the user insists.

On a CPU-only machine one trial at a time takes every core; on a GPU machine one trial per whole GPU, with the
CPUs of its node shared out per GPU. `--concurrency`, `--cpus-per-trial` and `--gpus-per-trial` override this,
with a warning where trials then distort each other's timings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from tuner.errors import DeviceError
from tuner.search.options import SearchOptions


@dataclass
class ClusterInfo:
    cpus: float
    gpus: float
    nodes: int
    node_cpus: float  # CPUs of the smallest node (a trial runs on one node)
    node_gpus: float  # GPUs of the largest node


@dataclass
class Resources:
    cpus_per_trial: float
    gpus_per_trial: float
    concurrency: int
    ddp_workers: int = 0
    warnings: list[str] = field(default_factory=list)

    def describe(self) -> str:
        where = f"{self.gpus_per_trial:g} GPU + {self.cpus_per_trial:g} CPUs" if self.gpus_per_trial else \
            f"{self.cpus_per_trial:g} CPUs"
        ddp = f" (DDP, {self.ddp_workers} workers)" if self.ddp_workers > 1 else ""
        return f"{self.concurrency} at a time, each on {where}{ddp}"


def local_cluster() -> ClusterInfo:
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    cpus = os.cpu_count() or 1
    return ClusterInfo(cpus=cpus, gpus=gpus, nodes=1, node_cpus=cpus, node_gpus=gpus)


def ray_cluster() -> ClusterInfo:
    """Resources of the connected Ray cluster (alive nodes)."""
    import ray

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    node_cpus = [float(n.get("Resources", {}).get("CPU", 0)) for n in nodes] or [0.0]
    node_gpus = [float(n.get("Resources", {}).get("GPU", 0)) for n in nodes] or [0.0]
    total = ray.cluster_resources()
    return ClusterInfo(cpus=float(total.get("CPU", 0)), gpus=float(total.get("GPU", 0)), nodes=max(1, len(nodes)),
                       node_cpus=min(c for c in node_cpus if c > 0) if any(node_cpus) else 0.0,
                       node_gpus=max(node_gpus))


def resolve_resources(opts: SearchOptions, cluster: ClusterInfo) -> Resources:
    """Per-trial resources and concurrency so that trials do not distort each other's timings by default:
    one trial per whole GPU on a GPU machine, one trial per node on all its cores on a CPU-only one."""
    g = opts.gpus_per_trial
    if g is not None and g > 0 and cluster.gpus <= 0:
        raise DeviceError(f"--gpus-per-trial {g:g} asked for, but this machine has no GPU; drop it to run on CPUs")
    if g is not None and g > max(cluster.node_gpus, 0):
        raise DeviceError(f"--gpus-per-trial {g:g} is more than the {cluster.node_gpus:g} GPU(s) of any node; "
                          f"ask for at most {cluster.node_gpus:g}")
    if opts.cpus_per_trial is not None and opts.cpus_per_trial > cluster.node_cpus:
        raise DeviceError(f"--cpus-per-trial {opts.cpus_per_trial:g} is more than the {cluster.node_cpus:g} CPUs "
                          f"of any node; ask for at most {cluster.node_cpus:g}")
    notes: list[str] = []
    gpus = float(g) if g is not None else (1.0 if cluster.gpus >= 1 else 0.0)
    if gpus > 0:
        per_gpu = max(1.0, float(int(cluster.node_cpus // max(cluster.node_gpus, 1))))
        cpus = opts.cpus_per_trial or max(1.0, per_gpu * max(gpus, 1.0))
        cpus = min(cpus, cluster.node_cpus)
        slots = max(1, int(cluster.gpus // gpus))
        concurrency = opts.concurrency or slots
        if gpus < 1:
            notes.append(f"--gpus-per-trial {gpus:g} puts {int(round(1 / gpus))} trials on one GPU: they share its "
                         f"compute and memory, so their throughput figures distort each other")
    else:
        slots = cluster.nodes
        concurrency = opts.concurrency or slots
        cpus = opts.cpus_per_trial or (cluster.node_cpus if concurrency <= slots else
                                       max(1.0, float(int(cluster.node_cpus * slots // concurrency))))
        if concurrency > slots:
            notes.append(f"--concurrency {concurrency} runs timed trials side by side on the same CPUs "
                         f"({cluster.node_cpus:g} per node): they slow each other down, so throughput is distorted; "
                         f"leave --concurrency unset to run one at a time")
    ddp = int(gpus) if gpus > 1 else 0
    return Resources(cpus_per_trial=cpus, gpus_per_trial=gpus, concurrency=int(concurrency), ddp_workers=ddp,
                     warnings=notes)


