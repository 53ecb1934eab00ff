"""`tuner export`: the chosen trial's config, in the file format `tuner train --config` reads, with provenance.

The file is a TrialConfig (workload, workload_options, dataset, budget, params, measure, quality, gpus) plus a free
`provenance` mapping that training ignores: which study and trial it came from, by which rule, what that trial
measured, on which hardware and library versions, and the same settings spelled as plain PyTorch arguments
(tuner.report.settings). The file itself, its header and where it may be written: tuner.report.export_file;
re-measuring it: tuner.report.verify.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tuner.config import TrialConfig, dump_config
from tuner.errors import StudyError
from tuner.files import json_safe
from tuner.analysis import Pick, Study, Verdict, against_baseline, decide, ratio_words, record_bound
from tuner.report.settings import pytorch_settings, run_env, trial_config
from tuner.study import TrialRecord, read_parity

if TYPE_CHECKING:
    from tuner.analysis import LrAdvice


def provenance(study: Study, record: TrialRecord, cfg: TrialConfig, pick: str,
               min_quality: float | None, verdict: Verdict | None = None) -> dict[str, Any]:
    """Where the config came from and what it read."""
    rule: dict[str, Any] = {"pick": pick, "rank": study.rank(record), "front_size": len(study.front())}
    if verdict is not None:
        rule["verdict"] = verdict.text
        if verdict.ratio is not None:
            rule["vs_baseline"] = {"ratio": verdict.ratio.centre, "low": verdict.ratio.low,
                                   "high": verdict.ratio.high, "method": verdict.method}
    if min_quality is not None and study.quality is not None:
        rule["min_quality"] = f"{study.quality.metric} {study.quality.comparison} {min_quality:g}"
    measured: dict[str, Any] = {k: v for k, v in record.metrics.items() if v is not None}
    measured.update(windows=record.windows, capped=record.capped, device=record.device)
    if bound := record_bound(record):
        measured["bound"] = bound
    meta = study.meta
    confirmed = None
    if record.confirmed is not None:
        # intervals for the objectives only (what the verdict compares): pooled on a log scale, a cost such as
        # ceiling_seconds (0.3 s measured, then ~0 from the cache) got one from 1e-09 to 1e+06; the other
        # metrics' re-run values as read
        objectives = {o.metric for o in study.objectives}
        figures = record.confirmed.figures
        others = {k: f.values for k, f in figures.items() if k not in objectives}
        confirmed = {"method": record.confirmed.method, "runs": record.confirmed.runs,
                     **{k: f.model_dump() for k, f in figures.items() if k in objectives},
                     **({"rerun_values": others} if others else {})}
        if record.get("suspect") or record.confirmed.suspect:  # whether the re-runs cleared a suspect reading
            confirmed["suspect"] = record.confirmed.suspect
    noise = study.noise()
    parity = read_parity(study.dir)
    checked = parity.for_params({**cfg.params.model_dump(), **record.params}) if parity is not None else []
    out = {
        "study": study.name,
        "trial": record.trial,
        "confirmed": confirmed,
        "noise_floor": noise.to_json() if noise is not None else None,
        # its numerics knob values against fp32 (tuner.parity), as the study checked them
        "numerics_parity": [v.text for v in checked] or None,
        # the environment knobs the study's probes chose (OMP_WAIT_POLICY, malloc), with the figures that chose them
        "environment_probes": _env_probes(study, cfg),
        "objectives": [{"metric": o.metric, "direction": o.direction} for o in study.objectives],
        "target": ({**t.model_dump(), **{k: record.get(k) for k in ("time_to_target", "samples_to_target")}}
                   if (t := study.target) is not None else None),
        "chosen_by": rule,
        "measured": measured,
        # under a rung scheduler: the budget its figures were taken at (the top rung: only complete trials export)
        "measured_at": ({"rung": record.rung, "budget": record.measured_at, "unit": study.budget_unit or None}
                        if study.scheduled else None),
        "params_searched": record.params,
        "space": meta.space,
        "hardware": meta.hardware,
        "resources": meta.resources,
        "versions": meta.versions,
        "study_created": meta.created,
        "trial_started": record.started,
        "trial_ended": record.ended,
        "exported": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "pytorch": pytorch_settings(cfg, record.optimizer, record.environment),
    }
    advice = study_lr_advice(study, record)
    if advice is not None:  # the lr that goes with its effective batch, by a named rule (tuner.analysis.goodput)
        out["pytorch"]["lr_rule"] = advice.to_json()
    return {k: v for k, v in out.items() if v is not None}


def _env_probes(study: Study, cfg: TrialConfig) -> list[dict[str, Any]] | None:
    """What each of the study's environment probes read and chose (probes.json), with the value the config runs
    under (None: no environment knob was probed)."""
    plan = study.loader_plan()
    probes = plan.environments if plan is not None else []
    return [{"knob": p.knob, "value": getattr(cfg.params, p.knob, None), "chosen": p.chosen, "why": p.why,
             "readings": p.readings} for p in probes] or None


def study_lr_advice(study: Study, record: TrialRecord) -> "LrAdvice | None":
    """The trial's lr against the study's baseline's, where its effective batch differs from the baseline's."""
    from tuner.analysis import lr_advice

    n = study.baseline_trial
    base = next((r for r in study.records if r.trial == n), None) if n is not None else None
    return lr_advice(record, base)


@dataclass
class Export:
    record: TrialRecord
    config: TrialConfig  # with provenance
    document: dict[str, Any]  # what was written
    command_args: str = ""  # the --pick / --min-quality that chose it, to repeat the export
    verdict: Verdict | None = None


def build_export(study: Study, pick: Pick = "knee", min_quality: float | None = None,
                 trial: int | None = None, keep_load_knobs: bool = False) -> Export:
    """The chosen trial's config (tuner.analysis.verdict: the pick, ties within the noise broken by quality and
    cost), or trial `trial`'s (which must be complete), with its provenance. On a study the machine's other work
    slowed, the verdict's pick is held to the user's threading (tuner.analysis.held), as report and summary name
    it; `keep_load_knobs` exports the load's own pick, as measured."""
    study.require_complete()
    held = None
    if trial is None:
        verdict = decide(study, pick, min_quality, for_load=not keep_load_knobs)
        rule, args = str(pick), f"--pick {pick}" + (f" --min-quality {min_quality:g}" if min_quality is not None
                                                    else "")
        held = verdict.held.to_json() if verdict.held is not None else None
    else:
        verdict = against_baseline(study, _complete_trial(study, trial))
        rule, args = "trial", f"--trial {trial}"
    record = verdict.pick
    cfg = trial_config(study, record)
    cfg.env = run_env(cfg, record.environment) or None  # `tuner train --config` sets them before torch loads
    cfg.provenance = provenance(study, record, cfg, rule, min_quality, verdict)
    if held is not None:
        cfg.provenance["held_for_load"] = held
    doc = dump_config(cfg)
    if record.get("fid") is None and (study.quality is None or study.quality.metric != "fid"):
        # the FID settings are the GAN's: a workload scored by its own metric (a language model's loss) never
        # reads them
        doc["quality"] = {k: v for k, v in doc.get("quality", {}).items() if not k.startswith("fid_")}
    doc["provenance"] = json_safe(cfg.provenance)  # plain types for YAML
    return Export(record, cfg, doc, args, verdict)


def load_line(held: dict[str, Any]) -> str:
    """What a busy study's export did with its pick (provenance.held_for_load), in one line: stderr and header."""
    knobs = ", ".join(f"{n} {v}" for n, v in held["knobs"].items())
    busy = f"the machine was busy ({held['why'].removeprefix('chosen while ')})"
    if held.get("own"):
        return (f"{busy}; no config that shares your threading beat your own settings beyond the noise: exported "
                f"your own (trial {held['exported']}); run again on a quiet machine or with `--busy wait`")
    vs = held.get("vs_baseline") or {}
    how = "confirmed means" if vs.get("statistic") == "confirmed" else "single readings"
    return (f"{busy}: exported trial {held['exported']}, the pick among configs that share your threading "
            f"({vs.get('ratio', 0):.2f}x{ratio_words(vs.get('metric'))} the baseline, interval "
            f"{vs.get('low', 0):.2f}-{vs.get('high', 0):.2f}x, "
            f"{how}), not trial {held['pick']} ({f'{knobs}: won under that load' if knobs else 'not beyond the noise'}"
            f"); --keep-load-knobs exports trial {held['pick']}")


def _complete_trial(study: Study, number: int) -> TrialRecord:
    """Trial `number` for `--trial`: only a complete trial has figures a config can be exported with."""
    record = study.trial(number)
    if record.complete:
        return record
    how = "was stopped at a lower rung by the scheduler" if record.state == "stopped" else f"ended {record.state}"
    done = [r.trial for r in study.records if r.complete]
    raise StudyError(f"study '{study.name}' trial {number} {how}: only a complete trial's config is exported "
                     f"(complete: {', '.join(map(str, done))})")
