"""The exported file: the comment header above the config (what it measured, the verdict, how to run and
re-measure it, the lr, the environment its figure was read under), its format, and where it may be written (never
over a study's records, nor over a file that is not an earlier export unless --force)."""

from __future__ import annotations

import json
import shlex
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.errors import ConfigError
from tuner.files import atomic_write
from tuner.analysis import Study
from tuner.report.export import Export, load_line, study_lr_advice
from tuner.study import TrialRecord

if TYPE_CHECKING:
    from tuner.analysis import TimeToTarget


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
    and a baseline trial; where this config is the baseline, its own time and what a re-run of it should read. With confirmation re-runs (each another seed), each side is the
    interval over its re-runs (the search's reading left out, as the confirmed figures leave it: selected for
    being good, issue 51), its not-reached runs counted; without, the trial's one reading. The one-run prediction is
    in samples to target, which do not move with the machine's load; seconds do (issue 51: two re-runs at another
    load read outside the seconds interval, inside the samples one). One more than UNRESOLVED times wide says so."""
    from tuner.analysis import time_to_target

    n = study.baseline_trial
    base = next((r for r in study.records if r.trial == n), None) if study.target is not None else None
    if base is None:
        return []
    cap = study.target.cap_seconds  # type: ignore[union-attr]
    runs = study.folder.reruns(rec.trial) or [rec]
    mine = time_to_target(runs, cap=cap)

    def how(*sides: "TimeToTarget") -> str:
        if all(s.runs <= 1 for s in sides):
            return "one reading each" if len(sides) > 1 else "one reading"
        return ("geometric mean over the confirmation re-runs, each another seed, a not-reached run counted at "
                f"{'the cap' if cap else 'its last evaluation'}")

    if base.trial == rec.trial:  # the baseline kept: its own time, and what a re-run of it should read (below)
        lines = [f"# Time to target: this config (the study's baseline) {mine.text()} (training seconds, "
                 f"evaluations left out; {how(mine)})."]
    else:
        theirs = time_to_target(study.folder.reruns(base.trial) or [base], cap=cap)
        line = f"# Time to target: this config {mine.text()}, the baseline (trial {base.trial}) {theirs.text()}"
        if mine.interval is not None and theirs.interval is not None:
            a, b = mine.interval.centre, theirs.interval.centre
            step = max((s for s in (mine.step, theirs.step) if s is not None), default=None)
            if step is not None and abs(a - b) <= step:
                line += f": within one evaluation step ({step:.3g} s), cannot tell apart at this K"
            else:
                line += f": {b / a:.2f}x sooner" if b >= a else f": {a / b:.2f}x later"
        lines = [line + f" (training seconds, evaluations left out; {how(mine, theirs)})."]
    samples = time_to_target(runs, "samples_to_target").prediction
    if samples is not None and samples.low is not None and samples.high is not None:
        seconds, wide = mine.rerun_text(), samples.high / samples.low if samples.low > 0 else float("inf")
        line = (f"# One re-run to the target (tuner train --config --until-target) should read "
                f"{samples.low:,.0f}-{samples.high:,.0f} samples (95%, from these runs' spread)")
        if wide > UNRESOLVED:
            line += (f": unresolved, {wide:,.0f}x wide; these {len(runs)} runs disagree too much to say where one "
                     f"more reads (--repeats 5 narrows it)")
        elif seconds is not None:
            line += f"; {seconds} at the load these runs were read at (seconds move with the machine's load)"
        lines.append(line + ".")
    return lines


# A one-run prediction of samples to target wider than this (high / low) says nothing a user can hold a re-run
# against: a CNN's two re-runs read 5-1,119,072 samples (benchmarks/results/time-to-target.json at a225f9c), and
# every re-run "lay inside". Said as unresolved instead; an order of magnitude is where the figure stops being one.
UNRESOLVED = 10.0


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
    probes = (exp.config.provenance.get("environment_probes") or []) if exp.config.provenance else []
    lines += [f"# {probe['knob']}: {probe['why']}" for probe in probes if probe.get("why")]
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
