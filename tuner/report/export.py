"""`tuner export`: the chosen trial's config, in the file format `tuner train --config` reads, with provenance.

The file is a TrialConfig (workload, workload_options, dataset, budget, params, measure, quality, gpus) plus a free
`provenance` mapping that training ignores: which study and trial it came from, by which rule, what that trial
measured, on which hardware and library versions, and the same settings spelled as plain PyTorch arguments for
users who will copy them into their own loop instead of running tuner.

Over 700 lines because the header, the provenance and --verify read one chosen record together (its figures, lr
rule, parity, target, horizon, what a busy machine changed in the choice, the baseline --verify re-measures beside
it); splitting them would pass that record's pieces between modules.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.config import Params, TrialConfig, dump_config, env_command, parse_config
from tuner.errors import ConfigError, RunFailed, StudyError
from tuner.files import atomic_write, json_safe
from tuner.knobs import PRECISION_DTYPES
from tuner.analysis import (Interval, Pick, Study, Verdict, against_baseline, decide, pool, ratio_interval,
                            record_bound)
from tuner.study import RunEnvironment, TrialRecord, read_parity

if TYPE_CHECKING:
    from tuner.analysis import LrAdvice
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
        # the environment knobs the study's probe chose (OMP_WAIT_POLICY), with the figure that chose them
        "environment_probe": _env_probe(study, cfg),
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


def _env_probe(study: Study, cfg: TrialConfig) -> dict[str, Any] | None:
    """What the study's environment probe read and chose (probes.json), where the config runs under its choice."""
    plan = study.loader_plan()
    probe = plan.environment if plan is not None else None
    if probe is None:
        return None
    value = getattr(cfg.params, probe.knob, None)
    return {"knob": probe.knob, "value": value, "chosen": probe.chosen, "why": probe.why,
            "readings": probe.readings}


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
    slowed, a pick whose threads or wait policy differ from the user's own gives way to a measured config that
    shares them (for_load), unless `keep_load_knobs`."""
    study.require_complete()
    held = None
    if trial is None:
        verdict = decide(study, pick, min_quality)
        rule, args = str(pick), f"--pick {pick}" + (f" --min-quality {min_quality:g}" if min_quality is not None
                                                    else "")
        if not keep_load_knobs:
            verdict, held = for_load(study, verdict, pick, min_quality)
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


def _load_knobs(record: TrialRecord) -> dict[str, Any]:
    """The trial's load-sensitive knobs (tuner.knobs.load_knobs: threads, the wait policy) as its config set them."""
    from tuner.knobs import load_knobs

    params = (record.config or {}).get("params") if isinstance(record.config, dict) else None
    params = params if isinstance(params, dict) else {}
    return {n: params.get(n, Params.model_fields[n].default) for n in load_knobs()}


def for_load(study: Study, verdict: Verdict, pick: Pick,
             min_quality: float | None) -> tuple[Verdict, dict[str, Any] | None]:
    """On a busy study (tuner.analysis.busy), a pick whose threads or wait policy differ from the user's own (the
    baseline's) won under that load: 1 thread and PASSIVE beside a spinning neighbour, and the rest of that pick
    (fp32 16 x 4) read 0.62x the baseline once the machine was quiet (benchmarks env-busy). Dropping just those
    knobs would hand over a combination no trial measured. So the export is the measured trial that shares the
    user's threading and beat the baseline beyond the noise (the confirmed ratio's interval where both were
    confirmed, else single readings against the study's pooled noise), chosen by the pick's rule among the
    confirmed such trials, else among all of them; with none, the baseline itself: the user's own settings.
    Returns the verdict for what is exported and what was done (provenance.held_for_load; None: nothing)."""
    from tuner.analysis import busy_runs, choose, is_confirmed, ranks_windows

    busy = busy_runs(study.records, study.folder)
    base = verdict.baseline
    if not busy or base is None or _load_knobs(verdict.pick) == (own := _load_knobs(base)):
        return verdict, None
    faster: list[tuple[TrialRecord, Interval]] = []
    for r in study.records:
        if r.trial == base.trial or not r.complete or not r.throughput or _load_knobs(r) != own:
            continue
        if ranks_windows(study.objectives) and (r.get("suspect") or (r.confirmed and r.confirmed.suspect)):
            continue
        ratio = _beside_baseline(study, r, base)
        if ratio is not None and ratio.low is not None and ratio.low > 1:
            faster.append((r, ratio))
    confirmed = [r for r, _ in faster if is_confirmed(r)]
    rule: Pick = pick if verdict.quality_ranked else "throughput"
    try:
        chosen = choose(confirmed or [r for r, _ in faster], study.objectives, rule, min_quality,
                        study=study.name, value=study.value) if faster else None
    except StudyError:  # none meets --min-quality
        chosen = None
    knobs = {n: v for n, v in _load_knobs(verdict.pick).items() if own.get(n) != v}
    share = f"other processes took up to {busy.worst:.0%} of the study's CPUs"
    held: dict[str, Any] = {"knobs": knobs, "pick": verdict.pick.trial, "worst_share": round(busy.worst, 3),
                            "why": f"chosen while {share}"}
    if chosen is None:
        out = against_baseline(study, base, f"trial {base.trial} (your own settings)")
        held.update(exported=base.trial, own=True, vs_baseline=None)
    else:
        out = against_baseline(study, chosen, f"trial {chosen.trial} ({pick}, sharing your threading)")
        ratio = next(iv for r, iv in faster if r is chosen)
        held.update(exported=chosen.trial, own=False, vs_baseline={
            "ratio": ratio.centre, "low": ratio.low, "high": ratio.high,
            "statistic": "confirmed" if is_confirmed(chosen) and is_confirmed(base) else "single"})
    out.rule = verdict.rule
    out.busy, out.notes = verdict.busy, [n for n in [verdict.busy] if n]
    out.text += "".join(f"; {n}" for n in out.notes)
    return out, held


def _beside_baseline(study: Study, record: TrialRecord, base: TrialRecord) -> Interval | None:
    """`record` over the baseline in throughput, like with like: confirmed means where both were confirmed (as the
    verdict reads them), else their single readings with an interval from the study's pooled re-run noise."""
    from tuner.analysis import is_confirmed

    if is_confirmed(record) and is_confirmed(base):
        return against_baseline(study, record).ratio
    return ratio_interval([record.throughput or 0.0], [base.throughput or 0.0], study.pooled("throughput"))


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
            f"({vs.get('ratio', 0):.2f}x the baseline, interval {vs.get('low', 0):.2f}-{vs.get('high', 0):.2f}x, "
            f"{how}), not trial {held['pick']} ({knobs}: won under that load); --keep-load-knobs exports trial "
            f"{held['pick']}")


def _complete_trial(study: Study, number: int) -> TrialRecord:
    """Trial `number` for `--trial`: only a complete trial has figures a config can be exported with."""
    record = study.trial(number)
    if record.complete:
        return record
    how = "was stopped at a lower rung by the scheduler" if record.state == "stopped" else f"ended {record.state}"
    done = [r.trial for r in study.records if r.complete]
    raise StudyError(f"study '{study.name}' trial {number} {how}: only a complete trial's config is exported "
                     f"(complete: {', '.join(map(str, done))})")


def _yaml_header(study: Study, exp: Export, path: Path) -> str:
    from tuner.study import fmt_figure

    rec = exp.record
    quality = study.quality
    qtext = f", {quality.metric} {fmt_figure(rec, quality.metric)}" if quality is not None else ""
    how = "confirmed over re-runs, 95% interval" if rec.confirmed is not None else "one reading"
    verdict = [f"# Verdict: {exp.verdict.text}."] if exp.verdict is not None else []
    one = rec.confirmed.figures.get("throughput") if rec.confirmed is not None else None
    rerun = [f"# One re-run (tuner train --config) should read {one.rerun_low:.4g}-{one.rerun_high:.4g} samples/s "
             f"(95%, from the re-runs' spread; a busier machine or another session can read outside it)."] \
        if one is not None and one.rerun_low is not None and one.rerun_high is not None else []
    return "\n".join([
        f"# tuner config exported from study '{study.name}', trial {rec.trial} "
        f"({exp.command_args}).",
        f"# Measured: {fmt_figure(rec, 'throughput')} samples/s{qtext} ({how}) on "
        f"{rec.device or 'the study machine'}.",
        *rerun,
        *([f"# T{line[1:]}.", "# tuner train --config trains it to the target again (target: below)."]
          if (line := study.target_text(rec)) is not None else []),
        *_target_lines(study, rec),
        *verdict,
        *_horizon_lines(study),
        *(f"# Numerics: {text} (tuner parity)." for text in (exp.config.provenance or {}).get("numerics_parity") or []),
        f"# Run it:      tuner train --config {shlex.quote(str(Path(path).resolve()))}",
        f"# Re-measure:  tuner export {shlex.quote(study.name)} {exp.command_args} --verify "
        f"--reports-dir {shlex.quote(str(study.dir.parent.resolve()))}{_out_args(study, path)}",
        "# Without tuner: provenance.pytorch holds the same settings as DataLoader / autocast / GradScaler /",
        "# optimizer / memory-format / cuDNN arguments, and each knob as one line of code (provenance.pytorch.lines).",
        *_lr_lines(study, exp),
        *_env_lines(exp),
        "# Training ignores the provenance block.",
        "",
    ])


def _horizon_lines(study: Study) -> list[str]:
    """The study's horizon check (tuner export --horizon), where one ran."""
    import textwrap

    from tuner.study import read_horizon

    check = read_horizon(study.dir)
    return [f"# {line}" for line in textwrap.wrap(check.line() + ".", 116)] if check is not None else []


def _out_args(study: Study, path: Path) -> str:
    """` --out PATH` where the export was written elsewhere than its default, so the re-measure hint rewrites this
    file and not best.yaml (an export written with `--trial 4 --out rival.yaml` would else overwrite the pick's)."""
    path = Path(path).resolve()
    if path == (study.dir / ("best.json" if path.suffix == ".json" else "best.yaml")).resolve():
        return ""
    return f" --out {shlex.quote(str(path))}"


def _target_lines(study: Study, rec: TrialRecord) -> list[str]:
    """The header's time to target beside the baseline's and their ratio (issue 34), where the study has a target
    and a baseline trial other than this one. With confirmation re-runs (each another seed), each side is the
    interval over its re-runs (the search's reading left out, as the confirmed figures leave it: selected for
    being good, issue 51), its not-reached runs counted; without, the trial's one reading. The one-run prediction is
    in samples to target, which do not move with the machine's load; seconds do (issue 51: two re-runs at another
    load read outside the seconds interval, inside the samples one)."""
    from tuner.analysis import time_to_target

    n = study.baseline_trial
    base = next((r for r in study.records if r.trial == n), None) if study.target is not None else None
    if base is None or base.trial == rec.trial:
        return []
    cap = study.target.cap_seconds  # type: ignore[union-attr]
    runs = study.folder.reruns(rec.trial) or [rec]
    mine = time_to_target(runs, cap=cap)
    theirs = time_to_target(study.folder.reruns(base.trial) or [base], cap=cap)
    line = f"# Time to target: this config {mine.text()}, the baseline (trial {base.trial}) {theirs.text()}"
    if mine.interval is not None and theirs.interval is not None:
        a, b = mine.interval.centre, theirs.interval.centre
        step = max((s for s in (mine.step, theirs.step) if s is not None), default=None)
        if step is not None and abs(a - b) <= step:
            line += f": within one evaluation step ({step:.3g} s), cannot tell apart at this K"
        else:
            line += f": {b / a:.2f}x sooner" if b >= a else f": {a / b:.2f}x later"
    how = ("one reading each" if mine.runs <= 1 and theirs.runs <= 1 else
           "geometric mean over the confirmation re-runs, each another seed, a not-reached run counted at "
           f"{'the cap' if cap else 'its last evaluation'}")
    lines = [line + f" (training seconds, evaluations left out; {how})."]
    samples = time_to_target(runs, "samples_to_target").prediction
    if samples is not None and samples.low is not None and samples.high is not None:
        seconds = mine.rerun_text()
        lines.append(f"# One re-run to the target (tuner train --config --until-target) should read "
                     f"{samples.low:,.0f}-{samples.high:,.0f} samples (95%, from these runs' spread)"
                     + (f"; {seconds} at the load these runs were read at (seconds move with the machine's load)"
                        if seconds is not None else "") + ".")
    return lines


def _lr_lines(study: Study, exp: Export) -> list[str]:
    """The header's lines on the lr for the trial's effective batch (provenance.pytorch.lr_rule) and what that
    batch costs in samples (its efficiency against the baseline's noise scale)."""
    import textwrap

    advice = study_lr_advice(study, exp.record)
    if advice is None:
        return []
    text = f"Learning rate: {advice.text()}."
    eff = exp.record.value("efficiency")
    if eff is not None:
        text += (f" Efficiency {eff:.3g}: {1 / eff:.2f}x the baseline's samples to the same loss; goodput "
                 f"{exp.record.value('goodput') or 0:.4g} useful samples/s.")
    return [f"# {line}" for line in textwrap.wrap(text, 116)]


def _env_lines(exp: Export) -> list[str]:
    """The header's lines on the environment the figure was read under (provenance.pytorch.environment)."""
    env = exp.config.provenance.get("pytorch", {}).get("environment") if exp.config.provenance else None
    if not env:
        return []
    threads = env.get("torch.set_num_threads")
    where = ("the environment the trial ran under (env:, which `tuner train --config` sets)" if env.get("recorded")
             else "tuner's own default (this trial's study did not record its environment)")
    from tuner.config import env_command
    from tuner.knobs import knob_env

    chosen = knob_env(exp.config.params)  # what the study's probe chose, set before torch loads
    command = env_command({**env.get("variables", {}), **chosen}) if chosen else env["command"]
    lines = [f"# Your own loop reads this figure in {where}:",
             f"#   {command}" + (f"   with torch.set_num_threads({threads}) in it" if threads else "")]
    probe = exp.config.provenance.get("environment_probe") if exp.config.provenance else None
    if probe and probe.get("why"):
        lines.append(f"# {probe['knob']}: {probe['why']}")
    held = exp.config.provenance.get("held_for_load") if exp.config.provenance else None
    if held:
        said = load_line(held)
        lines += [f"# {line}" for line in textwrap.wrap(f"{said[0].upper()}{said[1:]}.", 116)]
    return lines


def render(study: Study, exp: Export, fmt: str, path: Path) -> str:
    if fmt == "json":
        return json.dumps(exp.document, indent=2) + "\n"
    import yaml

    return _yaml_header(study, exp, path) + yaml.safe_dump(exp.document, sort_keys=False, default_flow_style=False)


def default_path(study: Study, fmt: str) -> Path:
    return study.dir / ("best.json" if fmt == "json" else "best.yaml")


def write_export(study: Study, exp: Export, out: Path | None = None, fmt: str | None = None,
                 force: bool = False) -> Path:
    """Write atomically; the format comes from `fmt`, else the file suffix (.json), else YAML. Never over a study's
    records (check_out), nor, unless `force`, over a file that is not an earlier export."""
    if fmt is None:
        fmt = "json" if out is not None and Path(out).suffix.lower() == ".json" else "yaml"
    path = Path(out) if out is not None else default_path(study, fmt)
    if path.is_dir():
        raise ConfigError(f"--out {path} is a directory; give a file path such as {path / 'best.yaml'}")
    check_out(path, study, force)
    atomic_write(path, render(study, exp, fmt, path))
    return path


def check_out(path: Path, study: Study, force: bool = False) -> None:
    """Refuse an export path that is one of a study folder's records (study.json, study.db, trials/..., any study's:
    `--resume` and the reports read them), --force or not; and, unless `force`, an existing file that is not a
    config tuner exported (re-exporting over an earlier export, e.g. the default best.yaml, needs nothing)."""
    import os

    from tuner.study import study_record

    hit = study_record(path)
    if hit is not None:
        folder, record = hit
        raise ConfigError(f"--out {path} is {record} of the study at {folder}, which the study keeps (--resume and "
                          f"the reports read it); export elsewhere, e.g. --out {study.dir / 'best.yaml'}")
    if not force and os.path.lexists(path) and not _is_export(path):
        raise ConfigError(f"--out {path} exists and is not a config tuner exported; give another --out, or add "
                          f"--force to replace it")


def _is_export(path: Path) -> bool:
    """Whether `path` holds a config `tuner export` wrote (its provenance names the study and when it was exported)."""
    from tuner.files import load_yaml_mapping

    try:
        data = load_yaml_mapping(path, "exported config")  # YAML reads the JSON exports too
    except ConfigError:
        return False
    provenance = data.get("provenance")
    return isinstance(provenance, dict) and "study" in provenance and "exported" in provenance


class VerifyFailed(RunFailed):
    """The rerun of an exported config did not complete, or re-measured away from the recorded figure: exit 3, as
    `tuner train` exits for a failed run."""


@dataclass
class Verification:
    """R re-runs of an exported config against the figure the study recorded for it; beside the baseline's config
    re-run interleaved with it, where the study has a baseline, judged as a ratio to it."""

    states: list[str]
    errors: list[str]
    values: list[float]  # throughput of each complete re-run
    recorded: float | None  # the confirmed centre if the study confirmed the trial, else its one reading
    # geometric mean of the re-runs and where a figure of the recorded one's runs should read beside it (95%,
    # two-sample: the recorded figure has noise of its own; see verify)
    measured: Interval | None
    baseline: int | None = None  # the baseline trial re-measured beside the config (None: none was)
    baseline_values: list[float] | None = None  # the baseline's re-runs, interleaved with the config's
    recorded_ratio: float | None = None  # the config over the baseline as the study read them, side by side
    # the re-runs' ratio (geometric means) and where the recorded ratio should lie beside it (95%, both sides' noise)
    measured_ratio: Interval | None = None
    baseline_recorded: float | None = None  # the baseline's figure in the study (its drift: baseline_values' mean)
    environments: list[Any] = field(default_factory=list)  # each re-run's (RunEnvironment: others' share of its CPUs)

    @property
    def ratio(self) -> float | None:
        if self.measured is None or not self.recorded:
            return None
        return self.measured.centre / self.recorded

    @property
    def drift(self) -> float | None:
        """How fast the machine reads now against the study, from the baseline: its re-runs over its figure."""
        if not self.baseline_values or not self.baseline_recorded:
            return None
        now = ratio_interval(self.baseline_values, [self.baseline_recorded], None)
        return now.centre if now is not None else None

    @property
    def complete(self) -> bool:
        ok = ("complete", "not reached")  # measured in full
        return bool(self.values) and all(s in ok for s in self.states) \
            and (self.baseline is None or bool(self.baseline_values))

    @property
    def agrees(self) -> bool | None:
        """Whether the recorded figure lies inside the re-measured interval (None: no interval to judge by): a
        two-sample test at 5%, so a config that did not change fails 1 time in 20. With the baseline re-measured
        beside it, the ratio to the baseline is judged, so the machine's drift between the study and now (which
        failed an unchanged config 11% of the time at 5% drift, 27% at 10%) moves both sides alike."""
        if self.measured_ratio is not None:
            if self.recorded_ratio is None or self.measured_ratio.low is None:
                return None
            return self.measured_ratio.contains(self.recorded_ratio)
        if self.measured is None or self.recorded is None or self.measured.low is None:
            return None
        return self.measured.contains(self.recorded)


@dataclass(frozen=True)
class Beside:
    """The baseline an exported config is verified beside: its config and what the study read of each, side by
    side (`Study.value`: each as read beside the baseline in the same phase), with the runs behind each figure."""

    trial: int
    config: TrialConfig
    recorded: float  # the baseline's figure in the study
    ratio: float  # the exported config's figure over the baseline's, as the study read them side by side
    runs: int  # the baseline's runs behind its figure


def baseline_beside(study: Study, record: TrialRecord) -> Beside | None:
    """The study's baseline, to re-measure beside `record`'s config (None: the study has none, it is `record`
    itself, or a figure is missing)."""
    number = study.baseline_trial
    if number is None or number == record.trial:
        return None
    base = next((r for r in study.records if r.trial == number and r.complete), None)
    if base is None:
        return None
    mine, theirs = study.value(record, "throughput"), study.value(base, "throughput")
    if not mine or not theirs or mine <= 0 or theirs <= 0:
        return None
    try:
        cfg = trial_config(study, base)
    except StudyError:  # its config was not recorded: verified alone, as a study without a baseline
        return None
    cfg.env = run_env(cfg, base.environment) or None
    fig = base.confirmed.figures.get("throughput") if base.confirmed is not None else None
    if fig is not None and record.confirmed is not None:
        runs = len(base.confirmed.beside(record.confirmed, "throughput")) or len(fig.values)
    else:
        runs = len(fig.values) if fig is not None and record.confirmed is not None else 1
    return Beside(number, cfg, theirs, mine / theirs, max(runs, 1))


def verify(cfg: TrialConfig, recorded: float | None, reports_dir: Path, repeats: int = 3,
           study: Study | None = None, run: Callable[..., Any] | None = None,
           recorded_runs: int = 1, beside: Beside | None = None) -> Verification:
    """Rerun the exported config `repeats` times as `tuner train` would, and put an interval around their mean
    where the recorded figure (the mean of `recorded_runs` runs: its confirmed re-runs, or its one reading) should
    lie: both figures are noisy, so the interval counts both (sd x sqrt(1/repeats + 1/recorded_runs)); an interval
    for the re-runs' mean alone failed an unchanged config 15-21% of the time instead of 5%. The spread is these
    re-runs', pooled with the study's own re-runs when it has some (more degrees of freedom).

    `beside`: the study's baseline, re-run as often, interleaved (config, baseline, baseline, config, ...: a steady
    drift moves both alike), and the ratio of the two judged against the ratio the study read
    (sd x sqrt(1/repeats + 1/repeats + 1/recorded_runs + 1/beside.runs)): the machine drifts between sessions, and
    judged alone an unchanged config failed 11% of the time at 5% drift, 27% at 10%."""
    if run is None:
        from tuner.train import preflight
        from tuner.train import run_trial as run

        preflight(cfg, Path(reports_dir) / ".cache")  # this process's one-time costs, before anything is timed
    states, errors, values, base_values, environments = [], [], [], [], []
    order = [(cfg, values)] if beside is None else [(cfg, values), (beside.config, base_values)]
    for i in range(repeats):
        for config, into in (order if i % 2 == 0 else order[::-1]):
            result = run(config, cache_dir=Path(reports_dir) / ".cache")
            states.append(result.state)
            environments.append(getattr(result, "environment", None))
            if result.error:
                errors.append(result.error)
            if result.complete and result.throughput:  # a re-run short of the study's target still measured its speed
                into.append(float(result.throughput))
    measured = measured_ratio = None
    groups = [values] + ([base_values] if beside is not None else [])
    if study is not None:
        groups += study.noise_groups("throughput")
    pooled = pool(groups) if values else None
    if values:
        measured = pooled.prediction(values, runs=recorded_runs) if pooled is not None \
            else Interval(values[0], None, None)
    if beside is not None and values and base_values:
        measured_ratio = ratio_interval(values, base_values, pooled, against=(recorded_runs, beside.runs))
    return Verification(states, errors, values, recorded, measured,
                        baseline=beside.trial if beside is not None else None,
                        baseline_values=base_values if beside is not None else None,
                        recorded_ratio=beside.ratio if beside is not None else None, measured_ratio=measured_ratio,
                        baseline_recorded=beside.recorded if beside is not None else None,
                        environments=environments)
