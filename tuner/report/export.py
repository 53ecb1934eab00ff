"""`tuner export`: the chosen trial's config, in the file format `tuner train --config` reads, with provenance.

The file is a TrialConfig (workload, dataset, image_size, budget, params, measure, quality, gpus) plus a free
`provenance` mapping that training ignores: which study and trial it came from, by which rule, what that trial
measured, on which hardware and library versions, and the same settings spelled as plain PyTorch arguments for
users who will copy them into their own loop instead of running tuner.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.config import Params, TrialConfig, dump_config, parse_config
from tuner.errors import ConfigError, RunFailed, StudyError
from tuner.files import atomic_write, json_safe
from tuner.report.bottleneck import bound_label
from tuner.study import Pick, Study, TrialRecord, choose
_DTYPES = {"fp16": "torch.float16", "bf16": "torch.bfloat16"}


def pytorch_settings(cfg: TrialConfig) -> dict[str, Any]:
    """The config as plain PyTorch arguments: DataLoader kwargs, autocast, GradScaler, optimizer, accumulation.

    Mirrors what the training loop does (tuner/data/loader.py, tuner/device.py, tuner/train/workloads.py).
    """
    p: Params = cfg.params
    loader: dict[str, Any] = {
        "batch_size": p.batch_size,
        "shuffle": True,
        "drop_last": True,
        "num_workers": p.num_workers,
        "pin_memory": p.pin_memory,
    }
    if p.num_workers > 0:  # DataLoader refuses these with 0 workers
        loader["persistent_workers"] = p.persistent_workers
        if p.prefetch_factor is not None:
            loader["prefetch_factor"] = p.prefetch_factor
    optimizer = {"name": "Adam", "lr": p.lr, "betas": [p.beta1, p.beta2]}
    if cfg.workload == "gan":
        optimizer["applies_to"] = "generator and discriminator, one Adam each"
    out: dict[str, Any] = {
        "dataloader": loader,
        "autocast": {"enabled": p.precision != "fp32", "dtype": _DTYPES.get(p.precision, "torch.float32")},
        "grad_scaler": p.precision == "fp16",
        "optimizer": optimizer,
        "accumulation_steps": p.accumulation_steps,
        "effective_batch_size": p.effective_batch,
    }
    if p.threads is not None:
        out["torch_set_num_threads"] = p.threads
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


def provenance(study: Study, record: TrialRecord, cfg: TrialConfig, pick: str,
               min_quality: float | None) -> dict[str, Any]:
    rule: dict[str, Any] = {"pick": pick, "rank": study.rank(record), "front_size": len(study.front())}
    if min_quality is not None and study.quality is not None:
        rule["min_quality"] = f"{study.quality.metric} {study.quality.comparison} {min_quality:g}"
    measured: dict[str, Any] = {k: v for k, v in record.metrics.items() if v is not None}
    measured.update(windows=record.windows, capped=record.capped, device=record.device)
    if record.get("data_wait") is not None:
        measured["bound"] = bound_label(record.get("data_wait"))
    meta = study.meta
    out = {
        "study": study.name,
        "trial": record.trial,
        "objectives": [{"metric": o.metric, "direction": o.direction} for o in study.objectives],
        "chosen_by": rule,
        "measured": measured,
        "params_searched": record.params,
        "space": meta.space,
        "hardware": meta.hardware,
        "resources": meta.resources,
        "versions": meta.versions,
        "study_created": meta.created,
        "trial_started": record.started,
        "trial_ended": record.ended,
        "exported": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "pytorch": pytorch_settings(cfg),
    }
    return {k: v for k, v in out.items() if v is not None}


@dataclass
class Export:
    record: TrialRecord
    config: TrialConfig  # with provenance
    document: dict[str, Any]  # what was written
    command_args: str = ""  # the --pick / --min-quality that chose it, to repeat the export


def build_export(study: Study, pick: Pick = "knee", min_quality: float | None = None) -> Export:
    study.require_complete()
    record = choose(study.records, study.objectives, pick, min_quality, study=study.name, value=study.value)
    cfg = trial_config(study, record)
    cfg.provenance = provenance(study, record, cfg, pick, min_quality)
    doc = dump_config(cfg)
    doc["provenance"] = json_safe(cfg.provenance)  # plain types for YAML
    args = f"--pick {pick}" + (f" --min-quality {min_quality:g}" if min_quality is not None else "")
    return Export(record, cfg, doc, args)


def _yaml_header(study: Study, exp: Export, path: Path) -> str:
    rec = exp.record
    quality = study.quality
    qvalue = rec.value(quality.metric) if quality is not None else None
    qtext = f", {quality.metric} {qvalue:.4g}" if quality is not None and qvalue is not None else ""
    thr = rec.throughput
    return "\n".join([
        f"# tuner config exported from study '{study.name}', trial {rec.trial} "
        f"({exp.command_args}).",
        f"# Measured: {thr:.1f} samples/s{qtext} on {rec.device or 'the study machine'}." if thr is not None
        else "# Measured: see provenance.measured.",
        f"# Run it:      tuner train --config {path}",
        f"# Re-measure:  tuner export {study.name} {exp.command_args} --verify",
        "# Without tuner: provenance.pytorch holds the same settings as DataLoader / autocast / GradScaler /",
        "# optimizer arguments. Training ignores the provenance block.",
        "",
    ])


def render(study: Study, exp: Export, fmt: str, path: Path) -> str:
    if fmt == "json":
        return json.dumps(exp.document, indent=2) + "\n"
    import yaml

    return _yaml_header(study, exp, path) + yaml.safe_dump(exp.document, sort_keys=False, default_flow_style=False)


def default_path(study: Study, fmt: str) -> Path:
    return study.dir / ("best.json" if fmt == "json" else "best.yaml")


def write_export(study: Study, exp: Export, out: Path | None = None, fmt: str | None = None) -> Path:
    """Write atomically; the format comes from `fmt`, else the file suffix (.json), else YAML."""
    if fmt is None:
        fmt = "json" if out is not None and Path(out).suffix.lower() == ".json" else "yaml"
    path = Path(out) if out is not None else default_path(study, fmt)
    if path.is_dir():
        raise ConfigError(f"--out {path} is a directory; give a file path such as {path / 'best.yaml'}")
    atomic_write(path, render(study, exp, fmt, path))
    return path


class VerifyFailed(RunFailed):
    """The rerun of an exported config did not complete: exit 3, as `tuner train` exits for a failed run."""


@dataclass
class Verification:
    state: str
    error: str | None
    measured: float | None
    recorded: float | None

    @property
    def ratio(self) -> float | None:
        if self.measured is None or not self.recorded:
            return None
        return self.measured / self.recorded


def verify(cfg: TrialConfig, recorded: float | None, reports_dir: Path,
           run: Callable[..., Any] | None = None) -> Verification:
    """Rerun the exported config as `tuner train` would and compare its throughput with the recorded one."""
    if run is None:
        from tuner.train import run_trial as run
    result = run(cfg, cache_dir=Path(reports_dir) / ".cache")
    return Verification(result.state, result.error, result.throughput, recorded)
