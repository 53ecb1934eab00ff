"""How many trials run at once and on what: never two timed trials on one device unless the user insists.

On a CPU-only machine one trial at a time takes every core; on a GPU machine one trial per whole GPU, with the
CPUs of its node shared out per GPU. `--concurrency`, `--cpus-per-trial` and `--gpus-per-trial` override this,
with a warning where trials then distort each other's timings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from tuner.errors import DeviceError
from tuner.search._options import SearchOptions


@dataclass(frozen=True)
class NodeInfo:
    """One node as Ray reports it: its CPUs and GPUs (a trial runs on one node)."""

    cpus: float
    gpus: float = 0.0
    node_id: str = ""  # Ray's NodeID (where the GPU probe is sent); empty for the local machine


@dataclass
class ClusterInfo:
    cpus: float
    gpus: float
    nodes: int
    node_cpus: float  # CPUs of the smallest node
    node_gpus: float  # GPUs of the largest node
    node_list: list[NodeInfo] = field(default_factory=list)  # every node; empty: `nodes` nodes like the smallest

    @classmethod
    def of(cls, nodes: list[NodeInfo]) -> "ClusterInfo":
        nodes = [n for n in nodes if n.cpus > 0 or n.gpus > 0] or [NodeInfo(0.0, 0.0)]
        with_cpus = [n.cpus for n in nodes if n.cpus > 0]
        return cls(cpus=sum(n.cpus for n in nodes), gpus=sum(n.gpus for n in nodes), nodes=len(nodes),
                   node_cpus=min(with_cpus) if with_cpus else 0.0, node_gpus=max(n.gpus for n in nodes),
                   node_list=list(nodes))

    def node_infos(self) -> list[NodeInfo]:
        """The nodes that can run a trial (at least one CPU)."""
        nodes = self.node_list or [NodeInfo(self.node_cpus, self.node_gpus)] * max(1, self.nodes)
        return [n for n in nodes if n.cpus > 0]

    def gpu_nodes(self) -> list[NodeInfo]:
        return [n for n in self.node_infos() if n.gpus > 0]


@dataclass
class Resources:
    cpus_per_trial: float
    gpus_per_trial: float
    concurrency: int
    ddp_workers: int = 0
    warnings: list[str] = field(default_factory=list)
    fits: int | None = None  # how many trials of this size the cluster holds at once (None: not known)

    @property
    def cpus_per_process(self) -> int:
        """CPUs of one training process: the trial's, or under DDP each rank's (one CPU stays with the trial's own
        process, which only drives the workers). What a space's `cpus` means."""
        if self.ddp_workers > 1:
            return max(1, int((self.cpus_per_trial - 1) // self.ddp_workers))
        return max(1, int(self.cpus_per_trial))

    @property
    def gpus_per_process(self) -> int:
        """GPUs one training process sees: 1 for any GPU trial (a fraction is still one device), else 0."""
        return 1 if self.gpus_per_trial > 0 else 0

    def at_once(self, trials: int | None = None) -> int:
        """How many trials really run at once: --concurrency, but no more than the cluster holds or the study has."""
        return max(1, min(self.concurrency, self.fits or self.concurrency, trials or self.concurrency))

    def describe(self, trials: int | None = None) -> str:
        where = f"{self.gpus_per_trial:g} GPU + {self.cpus_per_trial:g} CPUs" if self.gpus_per_trial else \
            f"{self.cpus_per_trial:g} CPUs"
        ddp = f" (DDP, {self.ddp_workers} workers)" if self.ddp_workers > 1 else ""
        n = self.at_once(trials)
        if n < self.concurrency:  # say what runs, not what was asked (--concurrency 1000 on 2 CPUs: 2)
            held = "the study has" if trials is not None and n == trials and n < (self.fits or n + 1) else \
                f"the {'GPUs and CPUs' if self.gpus_per_trial else 'CPUs'} hold"
            return f"{n} at a time (--concurrency {self.concurrency}, but {held} {n}), each on {where}{ddp}"
        return f"{n} at a time, each on {where}{ddp}"


def local_cluster() -> ClusterInfo:
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    cpus = os.cpu_count() or 1
    return ClusterInfo.of([NodeInfo(float(cpus), float(gpus))])


def ray_cluster() -> ClusterInfo:
    """Resources of the connected Ray cluster, node by node (alive nodes)."""
    import ray

    nodes = []
    for n in ray.nodes():
        if n.get("Alive"):
            res = n.get("Resources", {})
            nodes.append(NodeInfo(cpus=float(res.get("CPU", 0)), gpus=float(res.get("GPU", 0)),
                                  node_id=str(n.get("NodeID") or "")))
    return ClusterInfo.of(nodes)


_EPS = 1e-9


def resolve_resources(opts: SearchOptions, cluster: ClusterInfo) -> Resources:
    """Per-trial resources and concurrency so that trials do not distort each other's timings by default:
    one trial per whole GPU on a GPU machine, one trial per node on all its cores on a CPU-only one.

    GPU trials take their CPUs from the GPU nodes (a CPU-only head node does not shrink them): one GPU's share of
    its node's CPUs, on the GPU node where that share is smallest. `--gpus-per-trial` below 1 puts several trials
    on one GPU as asked, each with its share of that GPU's CPUs so that they all fit, with a warning that their
    timings distort each other. `--cpus-per-trial` is checked against the nodes that can run the trial."""
    g = opts.gpus_per_trial
    nodes = cluster.node_infos()
    if g is not None and g > 0 and cluster.gpus <= 0:
        raise DeviceError(f"--gpus-per-trial {g:g} asked for, but this machine has no GPU; drop it to run on CPUs")
    notes: list[str] = []
    gpus = float(g) if g is not None else (1.0 if cluster.gpus >= 1 else 0.0)
    c = opts.cpus_per_trial
    if gpus > 0:
        hosts = [n for n in nodes if n.gpus + _EPS >= gpus]
        if not hosts:
            most = max((n.gpus for n in nodes), default=0.0)
            raise DeviceError(f"--gpus-per-trial {gpus:g} is more than the {most:g} GPU(s) of any node; ask for at "
                              f"most {most:g}")
        per_gpu = min(int(n.cpus // n.gpus) for n in hosts)  # one GPU's share of its node's CPUs
        if c is not None:
            fits = [n for n in hosts if n.cpus + _EPS >= c]
            if not fits:
                most = max(n.cpus for n in hosts)
                raise DeviceError(f"--cpus-per-trial {c:g} is more than the {most:g} CPUs of any node with "
                                  f"{max(gpus, 1):g} GPU(s); ask for at most {most:g}")
            hosts, cpus = fits, float(c)
        else:
            cpus = float(max(1, int(per_gpu * gpus + _EPS)))
        slots = sum(min(int(n.gpus / gpus + _EPS), int(n.cpus / cpus + _EPS)) for n in hosts)
        concurrency = opts.concurrency or max(1, slots)
        if gpus < 1:
            notes.append(f"--gpus-per-trial {gpus:g} puts {int(1 / gpus + _EPS)} trials on one GPU, each with "
                         f"{cpus:g} CPUs: they share its compute and memory, so their throughput figures distort "
                         f"each other and compare only roughly")
    else:
        smallest = min((n.cpus for n in nodes), default=0.0)
        if c is not None:
            fits = [n for n in nodes if n.cpus + _EPS >= c]
            if not fits:
                most = max((n.cpus for n in nodes), default=0.0)
                raise DeviceError(f"--cpus-per-trial {c:g} is more than the {most:g} CPUs of any node; ask for at "
                                  f"most {most:g}")
            nodes = fits
        slots = max(1, len(nodes))
        concurrency = opts.concurrency or slots
        cpus = c or (smallest if concurrency <= slots else max(1.0, float(int(smallest * slots // concurrency))))
        if concurrency > slots:
            notes.append(f"--concurrency {concurrency} runs timed trials side by side on the same CPUs "
                         f"({smallest:g} per node): they slow each other down, so throughput is distorted; "
                         f"leave --concurrency unset to run one at a time")
    ddp = int(gpus) if gpus > 1 else 0
    return Resources(cpus_per_trial=cpus, gpus_per_trial=gpus, concurrency=int(concurrency), ddp_workers=ddp,
                     warnings=notes, fits=_fits(nodes, cpus, gpus))


def _fits(nodes: list[NodeInfo], cpus: float, gpus: float) -> int | None:
    """How many trials of `cpus` CPUs and `gpus` GPUs the nodes hold at once (Ray queues the rest)."""
    if cpus <= 0:
        return None
    held = [min(int(n.cpus / cpus + _EPS), int(n.gpus / gpus + _EPS)) if gpus > 0 else int(n.cpus / cpus + _EPS)
            for n in nodes]
    return sum(held) or None
