"""`tuner report` and `tuner export`: read a study back, show it, and write its best config."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from tuner.errors import ConfigError

REPORTS_DIR_HELP = "Folder that holds the studies (as given to `tuner search`)."


class ReportFormat(str, Enum):
    table = "table"
    json = "json"
    html = "html"


class ExportFormat(str, Enum):
    yaml = "yaml"
    json = "json"


class PickRule(str, Enum):
    knee = "knee"
    throughput = "throughput"
    quality = "quality"


def _console():  # type: ignore[no-untyped-def]
    from rich.console import Console

    # Piped output gets a wide console, so tables with many params are not squeezed into 80 columns.
    return Console() if sys.stdout.isatty() else Console(width=240, soft_wrap=False)


def report(
    study: Annotated[str, typer.Argument(help="Study name (a folder under --reports-dir).")],
    reports_dir: Annotated[Path, typer.Option(help=REPORTS_DIR_HELP)] = Path("reports"),
    trial: Annotated[Optional[int], typer.Option("--trial", help="Show one trial in detail.")] = None,
    format: Annotated[ReportFormat, typer.Option("--format", help="table (terminal), json (stdout) or html "
                                                 "(writes <reports-dir>/<study>/report.html).")] = ReportFormat.table,
) -> None:
    """Show a study's trials sorted by Pareto rank (front marked with ★), one trial, or write an HTML report."""
    from tuner.report.study import open_study

    s = open_study(reports_dir, study)
    if format is ReportFormat.html:
        if trial is not None:
            raise ConfigError("--trial works with --format table or json; the HTML report holds every trial")
        from tuner.report.html import write_html

        path = write_html(s)
        print(f"wrote {path} ({len(s.records)} trials, {len(s.front())} on the Pareto front)")
        return
    if format is ReportFormat.json:
        from tuner.report.view import study_json, trial_document

        doc = trial_document(s, s.trial(trial)) if trial is not None else study_json(s)
        print(json.dumps(doc, indent=2, allow_nan=False))
        return
    from tuner.report.view import study_table, trial_panel

    console = _console()
    if trial is not None:
        for part in trial_panel(s, s.trial(trial)):
            console.print(part)
        return
    if not s.records:
        console.print(f"study {s.name} has no finished trials yet")
        return
    console.print(study_table(s))


def export(
    study: Annotated[str, typer.Argument(help="Study name (a folder under --reports-dir).")],
    pick: Annotated[PickRule, typer.Option("--pick", help="knee: most balanced trade-off on the Pareto front; "
                                           "throughput: fastest on the front; quality: best quality.")] = PickRule.knee,
    min_quality: Annotated[Optional[float], typer.Option(
        "--min-quality", help="Only trials at least this good (e.g. fid <= X for FID, loss <= X).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Output file. Default: <reports-dir>/<study>/best.yaml "
                                                "(best.json with --format json).")] = None,
    format: Annotated[Optional[ExportFormat], typer.Option(
        "--format", help="yaml or json (default: from --out's suffix, else yaml).")] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Rerun the exported config and compare its throughput "
                                         "with the recorded one.")] = False,
    reports_dir: Annotated[Path, typer.Option(help=REPORTS_DIR_HELP)] = Path("reports"),
) -> None:
    """Write the chosen trial's config, which `tuner train --config` runs, with its provenance."""
    from tuner.report.export import VerifyFailed, build_export, verify as verify_config, write_export
    from tuner.report.study import open_study

    s = open_study(reports_dir, study)
    exp = build_export(s, pick.value, min_quality)
    path = write_export(s, exp, out, format.value if format is not None else None)
    rec = exp.record
    q = s.quality
    qtext = f", {q.metric} {rec.get(q.metric):.4g}" if q is not None and rec.get(q.metric) is not None else ""
    print(f"wrote {path}: trial {rec['trial']} (--pick {pick.value}), "
          f"{rec.get('throughput') or 0.0:.1f} samples/s{qtext}")
    print(f"run it with: tuner train --config {path}")
    if not verify:
        return
    from tuner.config import load_config

    cfg = load_config(path)  # the written file itself, so the check also proves it loads back
    print("verifying: rerunning the exported config ...", file=sys.stderr)
    v = verify_config(cfg, rec.get("throughput"), reports_dir)
    if v.state != "complete" or v.measured is None:
        raise VerifyFailed(f"verify: the rerun of trial {rec['trial']}'s config ended {v.state}"
                           + (f": {v.error}" if v.error else "") + " (the recorded run completed)")
    ratio = f" ({v.ratio:.2f}x recorded)" if v.ratio is not None else ""
    print(f"verify: measured {v.measured:.1f} samples/s vs recorded {v.recorded or 0.0:.1f}{ratio}")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
    app.command("export")(export)
