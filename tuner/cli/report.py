"""`tuner report` and `tuner export`: read a study back, show it, and write its best config; the horizon check
`tuner export --horizon` runs, which `tuner search --horizon` runs after its confirmation too."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from tuner.cli.app import Debug, Format, app, busy_line, note, print_json, print_table, stdout_console
from tuner.errors import ConfigError

REPORTS_DIR_HELP = "Folder that holds the studies (as given to `tuner search`)."


class ReportFormat(str, Enum):
    table = "table"
    json = "json"
    html = "html"


class FileFormat(str, Enum):
    yaml = "yaml"
    json = "json"


class PickRule(str, Enum):
    knee = "knee"
    throughput = "throughput"
    quality = "quality"


@app.command()
def report(
    study: Annotated[str, typer.Argument(help="Study name (a folder under --reports-dir).")],
    reports_dir: Annotated[Path, typer.Option(help=REPORTS_DIR_HELP)] = Path("reports"),
    trial: Annotated[Optional[int], typer.Option("--trial", help="Show one trial in detail.")] = None,
    format: Annotated[ReportFormat, typer.Option("--format", help="table (terminal), json (stdout) or html "
                                                 "(writes <reports-dir>/<study>/report.html).")] = ReportFormat.table,
    debug: Debug = False,
) -> None:
    """Show a study's trials sorted by Pareto rank (front marked with ★), one trial, or write an HTML report."""
    from tuner.analysis import open_study

    s = open_study(reports_dir, study)
    if (stray := s.strays_note()) is not None:
        note(f"tuner: note: {stray}")
    if format is ReportFormat.html:
        if trial is not None:
            raise ConfigError("--trial works with --format table or json; the HTML report holds every trial")
        from tuner.report.html import write_html

        path = write_html(s)
        from tuner.report.view import counted

        print(f"wrote {path} ({counted(len(s.records), 'trial')}, {len(s.front())} on the Pareto front)")
        return
    if format is ReportFormat.json:
        from tuner.report.view import study_document, trial_document

        print_json(trial_document(s, s.trial(trial)) if trial is not None else study_document(s))
        return
    from tuner.report.view import study_footer, study_table, trial_panel

    console = stdout_console()
    if trial is not None:
        for part in trial_panel(s, s.trial(trial)):
            console.print(part)
        return
    if not s.records:
        console.print(f"study {s.name} has no finished trials yet")
        return
    print_table(console, study_table(s))
    for line in study_footer(s):
        console.print(line, soft_wrap=True, markup=False)  # plain text with the user's values in it


# export --help's panels (as tuner search's): what is exported, the file, the checks it can run
PICK, FILE, CHECK = "What to export", "The file", "Checks"


@app.command()
def export(
    study: Annotated[str, typer.Argument(help="Study name (a folder under --reports-dir).")],
    pick: Annotated[Optional[PickRule], typer.Option(
        "--pick", metavar="RULE", help="knee (the default): most balanced trade-off on the Pareto front; throughput: fastest on the "
        "front; quality: best quality.", rich_help_panel=PICK)] = None,
    trial: Annotated[Optional[int], typer.Option("--trial", help="Export this trial's config instead of a pick (a "
                                                 "complete trial, numbered as in `tuner report`).", rich_help_panel=PICK)] = None,
    min_quality: Annotated[Optional[float], typer.Option(
        "--min-quality", help="Only trials at least this good (e.g. fid <= X for FID, loss <= X).", rich_help_panel=PICK)] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Output file. Default: <reports-dir>/<study>/best.yaml "
                                                "(best.json with --as json).", rich_help_panel=FILE)] = None,
    as_: Annotated[Optional[FileFormat], typer.Option(
        "--as", help="File format: yaml or json (default: from --out's suffix, else yaml).", rich_help_panel=FILE)] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Rerun the exported config --repeats times and check the "
                                         "recorded throughput lies in the re-measured interval.", rich_help_panel=CHECK)] = False,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Re-runs for --verify.", rich_help_panel=CHECK)] = 3,
    keep_load_knobs: Annotated[bool, typer.Option(
        "--keep-load-knobs", help="On a study other work slowed (the verdict says the machine was busy): export "
        "the pick with the threads and wait policy it won with under that load. By default the export is the best "
        "measured config that shares your own threading, or your own settings where none beat them, since what "
        "wins beside other work can lose on a quiet machine.", rich_help_panel=PICK)] = False,
    horizon: Annotated[Optional[str], typer.Option(
        "--horizon", metavar="DURATION", help="Re-train the exported config and the study's baseline to this "
        "horizon, interleaved, --horizon-seeds seeds each, and say whether the speed-up holds there (holds, shrinks "
        "or reverses), at the quality the baseline reaches at the horizon (or --target). Training seconds (120s, "
        "2m, 1.5h) or samples (50000samples); longer than the study's trials. Recorded in the study folder "
        "(horizon.json); report and export show it.", rich_help_panel=CHECK)] = None,
    horizon_seeds: Annotated[int, typer.Option("--horizon-seeds", min=1, help="Seeds of each side for "
                                               "--horizon.", rich_help_panel=CHECK)] = 3,
    target: Annotated[Optional[float], typer.Option("--target", help="The quality --horizon reads time to (in the "
                                                    "study's target metric); default: the baseline's at the "
                                                    "horizon.", rich_help_panel=CHECK)] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out file that is not a config tuner "
                                        "exported (a study's own files are never replaced).", rich_help_panel=FILE)] = False,
    reports_dir: Annotated[Path, typer.Option(help=REPORTS_DIR_HELP)] = Path("reports"),
    format: Annotated[str, typer.Option("--format", metavar="<table|json>", help="What to print: table (for people) "
                                        "or json. The file's format is --as.")] = "table",
    debug: Debug = False,
) -> None:
    """Write the chosen trial's config, which `tuner train --config` runs, with its provenance."""
    from tuner.report.export import build_export
    from tuner.report.export_file import write_export
    from tuner.analysis import open_study
    from tuner.study import fmt_figure

    printed, as_ = _export_format(format, as_)
    if trial is not None and (pick is not None or min_quality is not None):
        given = "--pick" if pick is not None else "--min-quality"
        raise ConfigError(f"--trial {trial} exports that trial, {given} chooses one for you: give one of them")
    if target is not None and horizon is None:
        raise ConfigError("--target sets the quality --horizon reads time to: give --horizon too")
    from tuner.report.horizon import parse_horizon, plan_horizon

    budget = parse_horizon(horizon) if horizon is not None else None
    rule = pick or PickRule.knee
    s = open_study(reports_dir, study)
    if (stray := s.strays_note()) is not None:
        note(f"tuner: note: {stray}")
    exp = build_export(s, rule.value, min_quality, trial=trial, keep_load_knobs=keep_load_knobs)
    plan = plan_horizon(s, exp.record, budget, horizon_seeds, target) if budget is not None else None
    path = write_export(s, exp, out, as_.value if as_ is not None else None, force=force)
    rec = exp.record
    q = s.quality
    doc: dict = {"path": str(path), "study": s.name, "trial": rec.trial,
                 "pick": rule.value if trial is None else None,
                 "throughput": rec.throughput, "quality": {q.metric: rec.value(q.metric)} if q else None}
    if printed is Format.table:
        qtext = f", {q.metric} {fmt_figure(rec, q.metric)}" if q is not None else ""
        how = "confirmed over re-runs, 95% interval" if rec.confirmed is not None else "one reading"
        print(f"wrote {path}: trial {rec.trial} ({exp.command_args}), "
              f"{fmt_figure(rec, 'throughput')} samples/s{qtext} ({how})")
        print(f"run it with: tuner train --config {path}")
    held = (exp.config.provenance or {}).get("held_for_load")
    if held:
        from tuner.report.export import load_line

        doc["held_for_load"] = held
        note(f"note: {load_line(held)}")
    if exp.verdict is not None:
        doc["verdict"] = exp.verdict.to_json()
        if printed is Format.table:
            print(f"verdict: {exp.verdict.text}")
    if verify:
        _verify(s, exp, path, repeats, reports_dir, doc, printed)
    if plan is not None:
        run_horizon_check(s, exp, plan, reports_dir)
        write_export(s, exp, path, as_.value if as_ is not None else None, force=True)  # its header shows the check
    _show_horizon(s, doc, printed)
    if printed is Format.json:
        print_json(doc)


def run_horizon_check(s, exp, plan, reports_dir: Path):  # noqa: ANN001, ANN201
    """Run the horizon check (tuner.report.horizon), its cost said first and each run on stderr; record it.
    `tuner export --horizon` and `tuner search --horizon` (after the confirmation) both run it here."""
    from tuner.report.horizon import run_horizon
    from tuner.study import write_horizon

    note(f"horizon: will run {plan.cost()}")  # each run in a process of its own, under its side's environment
    check = run_horizon(plan, reports_dir, s, progress=note)
    write_horizon(s.dir, check)
    return check


@dataclass
class StudyHorizon:
    """What `tuner search --horizon` made of its horizon check: the summary's line, the JSON document's entry, and
    the error a failed run raised (None: it ran, or was skipped with its reason)."""

    line: str
    doc: dict[str, Any]
    failed: Any = None


def study_horizon(summary: Any, reports_dir: Path) -> StudyHorizon | None:
    """The study's horizon check (study.json's `horizon`: --horizon, kept by --resume), after its confirmation: on
    the pick the export takes (the knee), run as `tuner export --horizon` runs it (run_horizon_check), its cost said
    first and recorded in horizon.json. A study with no pick, no target or no other baseline skips it, in one line
    that says why; None where no check was asked."""
    from tuner.config import HORIZON_SEEDS, Budget
    from tuner.errors import Interrupted, TunerError, UserError

    asked = summary.study.meta.horizon
    if not asked:
        return None
    from tuner.analysis import Study
    from tuner.report.export import build_export
    from tuner.report.horizon import plan_horizon

    study = Study.load(summary.study.folder)  # as the confirmation left it
    try:
        exp = build_export(study, "knee")
    except UserError as err:
        return StudyHorizon(f"horizon check skipped: no pick ({err})", {"skipped": f"no pick ({err})"})
    try:
        plan = plan_horizon(study, exp.record, Budget.model_validate(asked["budget"]),
                            int(asked.get("seeds") or HORIZON_SEEDS))
    except UserError as err:
        return StudyHorizon(f"horizon check skipped: {err}", {"skipped": str(err)})
    try:
        check = run_horizon_check(study, exp, plan, reports_dir)
    except Interrupted:
        raise
    except TunerError as err:  # a run failed: nothing recorded; the study's own summary still stands
        return StudyHorizon(f"horizon check failed: {err}", {"failed": str(err)}, failed=err)
    return StudyHorizon(check.line(), check.model_dump())


def _show_horizon(s, doc: dict, printed: Format) -> None:  # noqa: ANN001
    """The study's recorded horizon check, where one ran (horizon.json)."""
    from tuner.study import read_horizon

    check = read_horizon(s.dir)
    if check is None:
        return
    doc["horizon"] = check.model_dump()
    if printed is Format.table:
        print(check.line())


def _export_format(given: str, as_: FileFormat | None) -> tuple[Format, FileFormat | None]:
    """What export prints and the file's format. --format means what is printed, as on every command; the file's
    format is --as. `--format yaml` (an older README's spelling) can only mean the file: taken as --as yaml."""
    if given in {f.value for f in Format}:
        return Format(given), as_
    if given == FileFormat.yaml.value:
        if as_ is not None and as_ is not FileFormat.yaml:
            raise ConfigError(f"--format yaml and --as {as_.value} disagree: the file's format is --as; --format is "
                              f"what is printed (table or json)")
        note("tuner: note: --format is what tuner export prints (table or json); the file's format is spelled "
             "--as yaml (taken as that)")
        return Format.table, FileFormat.yaml
    raise ConfigError(f"--format {given!r}: choose table or json (what is printed); the file's format is --as yaml "
                      f"or --as json")


def _verify(s, exp, path: Path, repeats: int, reports_dir: Path, doc: dict, format: Format) -> None:  # noqa: ANN001
    from tuner.config import load_config
    from tuner.report.verify import VerifyFailed, baseline_beside, verify as verify_config

    rec = exp.record
    cfg = load_config(path)  # the written file itself, so the check also proves it loads back
    fig = rec.confirmed.figures.get("throughput") if rec.confirmed is not None else None
    recorded = fig.centre if fig is not None else rec.throughput  # as read (the table's `read` figure)
    beside = baseline_beside(s, rec)
    runs = f"{repeats} times" if beside is None else \
        f"{repeats} times beside the baseline's (trial {beside.trial}), interleaved"
    note(f"verifying: rerunning the exported config {runs} ...")
    v = verify_config(cfg, recorded, reports_dir, repeats=repeats, study=s,
                      recorded_runs=len(fig.values) if fig is not None else 1, beside=beside)
    for said in {busy_line(e) for e in v.environments} - {None}:  # beside its figures: they move with the load
        note(str(said))
    if not v.complete:
        bad = next((st for st in v.states if st != "complete"), "without a throughput")
        raise VerifyFailed(f"verify: a rerun of trial {rec.trial}'s config or its baseline's ended {bad}"
                           + (f": {v.errors[0]}" if v.errors else "") + " (the recorded runs completed)")
    m = v.measured
    assert m is not None
    interval = f", interval {m.low:.1f}-{m.high:.1f}" if m.low is not None and m.high is not None else ""
    source = "confirmed" if rec.confirmed is not None else "one reading"
    doc["verify"] = {"runs": v.values, "measured": m.centre, "low": m.low, "high": m.high,
                     "recorded": v.recorded, "recorded_from": source, "ratio": v.ratio, "agrees": v.agrees,
                     "judged": "ratio to the baseline" if v.measured_ratio is not None else "throughput"}
    line = (f"verify: measured {m.centre:.1f} samples/s over {len(v.values)} runs{interval} vs recorded "
            f"{v.recorded or 0.0:.1f} ({source})")
    r = v.measured_ratio
    if r is not None:
        doc["verify"].update(baseline=v.baseline, baseline_runs=v.baseline_values, drift=v.drift,
                             measured_ratio=r.centre, ratio_low=r.low, ratio_high=r.high,
                             recorded_ratio=v.recorded_ratio)
        ratio_iv = f", interval {r.low:.2f}-{r.high:.2f}x" if r.low is not None and r.high is not None else ""
        line = (f"verify: {r.centre:.2f}x the baseline (trial {v.baseline}) re-measured beside it, interleaved, "
                f"{len(v.values)} runs each{ratio_iv}, vs {v.recorded_ratio or 0.0:.2f}x recorded ({source}); "
                f"{m.centre:.1f} samples/s against {v.recorded or 0.0:.1f} recorded, the machine reading "
                f"{v.drift or 0.0:.2f}x what it did in the study (the baseline), which the ratio leaves out")
    else:
        line += "; no baseline re-measured beside it: the machine's drift since the study is in this comparison"
    if v.agrees is False:
        what = "ratio" if r is not None else "figure"
        raise VerifyFailed(line + f": the recorded {what} lies outside the re-measured interval")
    if format is Format.table:
        verdict = "within the interval" if v.agrees else "no interval with a single run"
        print(f"{line}: {verdict}")
