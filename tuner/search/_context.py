"""What a study's search space may depend on, and the space resolved for it once, when the study starts.

The sampling context (what `Space.sample` / `baseline_point` and `when:` conditions see):
- `cpus`: the CPUs of one training process of a trial (per rank under DDP); `gpus`: the trial's GPUs (0 on CPUs);
- `device`, `precisions`, `tf32_available`: facts about the trials' device (`tuner.device.device_facts`).

Where the device facts come from. CPU trials: this machine's CPU (fp32, and bf16 where the CPU has native bf16:
tuner.device.cpu_has_bf16; a CPU without it gets a note saying why bf16 is not offered), or on a cluster joined
with --address its nodes' CPUs, asked the same way as GPU nodes (bf16 only where every node has it). GPU trials: a probe, one
tiny Ray task per GPU node (0.01 GPU, no CPU, its worker exits after it) that asks torch on the node itself, and
the facts every node agrees on (a precision is native only if it is native on every GPU node). The driver may
have no GPU at all (`--address` from a laptop), and Ray reports GPU counts but not compute capabilities, so
asking torch where trials run is the only exact answer; it also keeps CUDA out of the driver process.

A study's stored domains (study.json `domains`, `context`, reused by `--resume`) are tuner.space's (study_space).
"""

from __future__ import annotations

from typing import Any

from tuner.knobs import PRECISION_DTYPES
from tuner.search._resources import ClusterInfo, Resources

PROBE_TIMEOUT_S = 120.0
FALLBACK_GPU_FACTS = {"device": "cuda (not probed)", "precisions": ["fp32", "fp16"], "tf32_available": False}
FALLBACK_CPU_FACTS = {"device": "cpu (not probed)", "precisions": ["fp32"], "tf32_available": False}
ALL_PRECISIONS = list(PRECISION_DTYPES)  # the precision domain: the dtype map's keys (tuner.knobs)


def trial_context(resources: Resources, facts: dict[str, Any] | None) -> dict[str, Any]:
    """The sampling context of a study's trials. `facts` None: device facts not known yet (resource bounds can be
    checked, native choices are left as listed)."""
    gpus = max(1, int(resources.gpus_per_trial)) if resources.gpus_per_trial > 0 else 0
    ctx: dict[str, Any] = {"cpus": resources.cpus_per_process, "gpus": gpus}
    ctx.update(facts if facts is not None else {"precisions": list(ALL_PRECISIONS), "tf32_available": True})
    return ctx


def cpu_facts() -> dict[str, Any]:
    from tuner.device import device_facts, resolve_device

    return device_facts(resolve_device("cpu"))


def cpu_precision_notes(space: Any, context: dict[str, Any], flags: Any = None,
                        machine: str | None = None) -> list[str]:
    """One line where a CPU study's native precision choices list bf16 but the CPU (this one, or one with these
    `flags` on this `machine`) lacks native bf16: why the study offers fp32 alone. Nothing for GPU trials, a space
    without native bf16, or a CPU that has it."""
    from tuner.device import cpu_bf16_note

    spec = space.params.get("precision")
    if context.get("gpus") or spec is None or not spec.native or "bf16" not in (spec.choices or []):
        return []
    if "bf16" in (context.get("precisions") or []):
        return []
    note = cpu_bf16_note(flags=flags, machine=machine)
    return [note] if note is not None else []


def device_facts_for(resources: Resources, cluster: ClusterInfo,
                     remote: bool = False) -> tuple[dict[str, Any], list[str]]:
    """The trials' device facts and warnings: for CPU trials this machine's CPU, or on a cluster joined with
    --address (`remote`) its nodes' CPUs (probed: the driver may be a laptop with native bf16 the nodes lack);
    for GPU trials the GPU nodes' (probed)."""
    if resources.gpus_per_trial <= 0:
        return probe_cpu_nodes(cluster) if remote else (cpu_facts(), [])
    return probe_gpu_nodes(cluster)


def probe_cpu_nodes(cluster: ClusterInfo, timeout_s: float = PROBE_TIMEOUT_S) -> tuple[dict[str, Any], list[str]]:
    """Ask torch on each node that can run a CPU trial (a Ray task there, no CPU held) what its CPU runs
    natively; what every node agrees on. Where a node does not answer: fp32 alone, and a line saying why."""
    answers, reason = _ask_nodes(cpu_facts, cluster.node_infos(), 0, timeout_s)
    if answers is None:  # a node that does not answer: offer what every CPU runs
        return dict(FALLBACK_CPU_FACTS), [f"could not ask the cluster's nodes whether their CPUs run bf16 natively "
                                          f"({reason}); the trials train in fp32"]
    return combine_facts(answers, FALLBACK_CPU_FACTS), []


def probe_gpu_nodes(cluster: ClusterInfo, timeout_s: float = PROBE_TIMEOUT_S) -> tuple[dict[str, Any], list[str]]:
    """Ask torch on each GPU node (a Ray task there) what its GPU runs natively; combine the answers."""
    from tuner.device import cuda_facts

    answers, reason = _ask_nodes(cuda_facts, cluster.gpu_nodes(), 0.01, timeout_s)
    if answers is None:  # a timeout (GPUs held by others) or a failing node: be conservative
        return dict(FALLBACK_GPU_FACTS), [f"could not ask the GPU nodes which precisions they run natively ({reason}); "
                                          f"native choices are fp32 and fp16, and TF32 is not searched"]
    return combine_facts(answers), []


def _ask_nodes(facts: Any, nodes: list[Any], gpus: float,
               timeout_s: float) -> tuple[list[dict[str, Any]] | None, str]:
    """`facts()` run once on each of `nodes` (a tiny Ray task pinned there, whose worker exits after it; no node
    listed: anywhere): the answers, or None and why not."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(num_cpus=0, num_gpus=gpus, max_calls=1)(facts)
    refs = []
    for node in nodes or [None]:
        options: dict[str, Any] = {}
        if node is not None and node.node_id:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node.node_id, soft=False)
        refs.append(probe.options(**options).remote())
    try:
        return ray.get(refs, timeout=timeout_s), ""
    except Exception as err:  # noqa: BLE001 - the caller says what it offers instead
        for ref in refs:
            ray.cancel(ref, force=True)
        return None, f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200] if str(err).strip() else ''}"


def combine_facts(answers: list[dict[str, Any]], fallback: dict[str, Any] | None = None) -> dict[str, Any]:
    """What every node agrees on: precisions native everywhere (in the first node's order), TF32 everywhere."""
    if not answers:
        return dict(fallback or FALLBACK_GPU_FACTS)
    precisions = [p for p in answers[0]["precisions"] if all(p in a["precisions"] for a in answers)]
    devices = list(dict.fromkeys(str(a["device"]) for a in answers))
    return {"device": " + ".join(devices), "precisions": precisions,
            "tf32_available": all(bool(a["tf32_available"]) for a in answers)}
