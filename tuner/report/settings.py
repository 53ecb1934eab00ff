"""A trial's config as it ran: the config its record holds (what `tuner export` writes back and `--verify` and
`--horizon` re-run), the environment variables its figure was read under, and the same settings spelled as plain
PyTorch arguments for users who copy them into their own loop instead of running tuner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.config import Params, TrialConfig, env_command, parse_config
from tuner.errors import ConfigError, StudyError
from tuner.knobs import PRECISION_DTYPES
from tuner.analysis import Study
from tuner.study import RunEnvironment, TrialRecord

# What tuner's commands run under unless the user set a wait policy of their own (tuner.cli.app.quiet_openmp): what a
# trial recorded before trials kept their environment ran under, as far as tuner set it.
TUNER_DEFAULT_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}


def run_env(cfg: TrialConfig, environment: RunEnvironment | None) -> dict[str, str]:
    """The environment variables a trial's figure was read under, for the exported config's `env`: those its process
    had (tuner.config.SPEED_ENV), and its torch thread count as OMP_NUM_THREADS where no knob set it (a search's
    trial: the CPUs Ray gave it; `tuner train`: torch's default, every core)."""
    from tuner.knobs import knob_env

    if environment is None:
        return dict(cfg.env or {})
    # A variable a knob set (omp_wait_policy) is the knob's, in params: env keeps what the user's shell had
    env = {k: v for k, v in environment.variables.items() if k not in knob_env(cfg.params)}
    if cfg.params.threads is None and environment.torch_threads and "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(environment.torch_threads)
    return env


def apart_env(cfg: TrialConfig) -> dict[str, str | None]:
    """The environment a config's run gets in a process of its own (tuner.search.run_apart): its config's env and
    what its knobs set, before torch loads there; every other variable a knob owns unset, since this process may
    hold another config's (`export --verify` sets the pick's here)."""
    from tuner.knobs import env_vars, knob_env

    unset: dict[str, str | None] = dict.fromkeys(env_vars())
    return unset | dict(cfg.env or {}) | knob_env(cfg.params)


def run_own_process(fn: Any, cfg: TrialConfig, cache_dir: Path, servers: Any) -> tuple[dict[str, Any] | None, str]:
    """`fn(config JSON, cache dir)` for one run of `cfg` in a process of its own (tuner.search.run_apart: forked
    from the fork server `servers` keeps for its environment, `apart_env`; a fresh interpreter on a GPU host), as
    the study's trials and re-runs ran. Its JSON result, or None and why: a process that died before it reported."""
    import json

    from tuner.config import dump_config
    from tuner.search import run_apart

    code, payload = run_apart(fn, (json.dumps(dump_config(cfg)), str(cache_dir)), apart_env(cfg), servers=servers)
    if payload is not None:
        return payload, ""
    ended = f"signal {-code}" if code < 0 else f"exit status {code}"
    return None, f"its process ended with {ended} before it reported (killed, or out of host memory)"


def pytorch_settings(cfg: TrialConfig, used: dict[str, dict[str, Any]] | None = None,
                     environment: RunEnvironment | None = None) -> dict[str, Any]:
    """The config as plain PyTorch arguments: DataLoader kwargs, autocast, GradScaler, optimizer, accumulation,
    channels_last, cuDNN autotuning, the environment it ran under; and `lines`, each knob as one line of plain
    PyTorch (tuner.knobs spells them), and `environment`, the command line that runs a script under that environment.

    Mirrors what the training loop does (tuner/data/loader.py, tuner/device.py, tuner/train/step.py). `used`:
    the optimizer settings the trial recorded per phase (the workload's own, with the trial's overrides), the
    effective values; a record from before they were recorded shows the config's. `environment`: what the
    trial's process ran under (None: a record from before it was kept: tuner's own default is shown).
    """
    from tuner.knobs import KNOBS, probed

    p: Params = cfg.params
    loader: dict[str, Any] = {"batch_size": p.batch_size, "shuffle": True, "drop_last": True}
    for name in probed("input"):  # the DataLoader's own knobs (tuner.knobs)
        value = getattr(p, name)
        if value is None or ("workers" in KNOBS[name].needs and p.num_workers == 0):
            continue  # DataLoader refuses these with 0 workers
        loader[name] = value
    optimizer: dict[str, Any]
    if used:
        shown = {phase: {"name": s.get("optimizer"), **{k: v for k, v in s.items() if k != "optimizer"}}
                 for phase, s in used.items()}
        optimizer = next(iter(shown.values())) if len(shown) == 1 else {"phases": shown}
    else:
        own = "the workload's own"
        optimizer = {"name": "Adam", "lr": p.lr if p.lr is not None else own,
                     "betas": [b if b is not None else own for b in (p.beta1, p.beta2)]}
        if p.lr_scale is not None:
            optimizer["lr_scale"] = p.lr_scale
        if p.optimizer_impl != "default":
            optimizer[p.optimizer_impl] = True
    if cfg.workload == "gan":
        optimizer["applies_to"] = "generator and discriminator, one Adam each"
    out: dict[str, Any] = {
        "dataloader": loader,
        "autocast": {"enabled": p.precision != "fp32", "dtype": PRECISION_DTYPES.get(p.precision, "torch.float32")},
        "grad_scaler": p.precision == "fp16",
    }
    # TF32 for fp32 matmuls/convolutions, set explicitly either way (PyTorch's defaults differ between the two)
    out["tf32"] = {"torch.backends.cuda.matmul.allow_tf32": p.tf32, "torch.backends.cudnn.allow_tf32": p.tf32}
    out["optimizer"] = optimizer
    out["accumulation_steps"] = p.accumulation_steps
    out["effective_batch_size"] = p.effective_batch
    if p.threads is not None:
        out["torch_set_num_threads"] = p.threads
    # The speed knobs that are not DataLoader arguments (tuner.knobs), set explicitly either way
    out["channels_last"] = p.channels_last
    out["cudnn_benchmark"] = {"torch.backends.cudnn.benchmark": p.cudnn_benchmark}
    # Every knob in one line of plain PyTorch each, from the role table
    out["lines"] = {k.name: k.spell(getattr(p, k.name)) for k in KNOBS.values()
                    if k.role != "run" and getattr(p, k.name) is not None}
    if used:
        out["lines"].update(_optimizer_lines(p, used))
    if (used and len(used) > 1) or cfg.workload == "gan":  # tuner.train.step: a phase's backward(inputs=...)
        out["lines"]["phases"] = (
            "in each phase, loss.backward(inputs=[p for m in <the models it updates> for p in m.parameters()]): "
            "the trial computed only those models' gradients; a plain loss.backward() also computes the others' "
            "(about 10% of a DCGAN step on a CPU, benchmarks/results/lab-notes.md), and reads slower than this figure")
    if p.accumulation_steps > 1:  # drop_last drops a partial micro-batch; tuner's loader a partial optimizer step
        out["lines"]["batch_size"] += (
            f": skip each epoch's last (len(dataset) % {p.effective_batch}) // {p.batch_size} micro-batches, "
            f"which drop_last=True keeps (tuner does not train on a partial optimizer step)")
    # The environment the figure was read under: a loop run without it reads differently (OMP_WAIT_POLICY on a
    # shared machine: an independent DCGAN loop read 29-31 samples/s spinning, 245-373 passive, at load 4-5)
    env = run_env(cfg, environment) if environment is not None or cfg.env else dict(TUNER_DEFAULT_ENV)
    threads = p.threads or (environment.torch_threads if environment is not None else None)
    out["environment"] = {"variables": env, "command": env_command(env), "recorded": environment is not None}
    if threads:
        out["environment"]["torch.set_num_threads"] = threads
        out["lines"].setdefault("threads", f"torch.set_num_threads({threads})")  # the knob, as the trial ran it
    return out


def _optimizer_lines(p: Params, used: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The lr and optimizer_impl lines for the optimizers the trial recorded (SGD for word_language_model), not the
    role table's generic Adam: its impl as each phase took it (or the sentence saying its factory refused it)."""
    out: dict[str, str] = {}
    impl = p.optimizer_impl
    said: list[str] = []
    for s in used.values():
        name = s.get("optimizer")
        if impl == "default":
            said.append(f"{name} as the workload builds it" + (" (tuner's default Adam: fused=True on CUDA)"
                        if name == "Adam" else "; tuner passes it no foreach= or fused="))
        else:
            refused = s.get("optimizer_impl")
            said.append(refused if isinstance(refused, str) else f"{name}(params, ..., {impl}=True)")
    out["optimizer_impl"] = "; ".join(dict.fromkeys(said))
    if p.lr is not None:
        out["lr"] = "; ".join(dict.fromkeys(f"{s.get('optimizer')}(params, lr={p.lr})" for s in used.values()))
    return out


def trial_config(study: Study, record: TrialRecord) -> TrialConfig:
    """The full config the trial ran with, as recorded in its result.json."""
    raw = record.config
    source = f"study '{study.name}' trial {record.trial} config"
    if not isinstance(raw, dict):
        raise StudyError(f"{source}: missing from result.json, so it cannot be exported; rerun the trial")
    raw = {k: v for k, v in raw.items() if k != "provenance"}
    try:
        return parse_config(raw, source)
    except ConfigError as err:
        raise StudyError(str(err)) from None
