"""What the pages say the code prints, compared with what it prints now, where a test can produce it."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from tests.helpers.docpages import REPO
from tuner.cli import app


def test_getting_started_lists_the_report_json_keys(make_study):
    from tuner.report.view import study_document
    from tuner.analysis import open_study

    text = (REPO / "docs" / "getting-started.md").read_text()
    said = re.search(r"`--format json` prints the same as one JSON\s+object on stdout \(([^)]*)\)", text)
    assert said, "getting-started.md no longer lists the report's JSON keys"
    listed = re.findall(r"`([a-z_]+)`", said.group(1))
    assert listed == list(study_document(open_study(make_study(), "gan-demo")))


def test_search_help_says_where_the_evaluation_interval_comes_from():
    """`--eval-every-samples` defaulted to a measured pace while its help still said 25 optimizer steps."""
    out = " ".join(CliRunner().invoke(app, ["search", "--help"], terminal_width=400).output.split())
    out = re.sub(r"[│╭╮╰╯─]", "", out)
    assert "measured pace" in " ".join(out.split())
    assert "(default: 25 optimizer steps of the baseline's effective batch)" not in out


def test_verdict_page_quotes_the_notes_the_code_writes():
    """verdict.md's table of notes quotes each note as the code words it (a reworded note left the page stale)."""
    import inspect

    import tuner.analysis.eligible as eligible
    import tuner.analysis.held as held
    import tuner.analysis.resolution as resolution
    import tuner.analysis.verdict as verdict

    code = re.sub(r"\"\s*\n\s*f?\"", "", "".join(inspect.getsource(m) for m in (verdict, eligible, resolution, held)))
    page = (REPO / "docs" / "how-to" / "verdict.md").read_text()
    notes = page.split("## Notes", 1)[1].split("\n## ", 1)[0]
    quoted = {  # the page's words -> the code's words they come from
        "passed over (see the suspect column of `tuner report": ("passed over ({_see(study)})",
                                                                 "see the suspect column of `tuner report {"),
        "re-runs are suspect too (see the suspect column of `tuner report": ("re-runs are suspect too ({_see",),
        "quality does not rank them on this busy machine, so the pick goes by throughput alone":
            ("quality does not rank them on this busy machine, so the pick goes by throughput alone",),
        "too little training to rank quality, so the pick goes by throughput alone; raise the budget":
            ("too little training to rank quality, so the pick goes by throughput alone; raise the budget",),
        "the trials differ more than their re-runs did, but the re-runs' spread has":
            ("the trials differ more than their re-runs did, but the re-runs' spread has",),
        "ranks higher on a single, unconfirmed reading, within what one more run of the pick reads":
            ("ranks higher on a single, unconfirmed reading, within what one more run of the pick reads",),
        "as ratios to the baseline read beside each (its search reading":
            ("as ratios to the baseline read beside each (its search reading ",),
        "the pick ranks only configs that share your threading and beat your own settings beyond the noise":
            ("the pick ranks only configs that share your threading and beat your own settings beyond the ",),
        "no config that shares your threading beat your own settings beyond the noise, so the pick is your own":
            ("no config that shares your threading beat your own settings beyond the noise, so the pick is ",),
        "one comparison (the test above is over all the trials), so not picked on throughput alone":
            ("one comparison (the test above is over all the trials), so not picked on throughput alone",),
        "no confirmed trial meets --min-quality: the pick stands on a single, unconfirmed reading":
            ("no confirmed trial meets --min-quality: the pick stands on a single, unconfirmed reading",),
    }
    for phrase, sources in quoted.items():
        assert phrase in notes, f"verdict.md's notes lack {phrase!r}"
        for source in sources:
            assert source in code, f"the code no longer writes {source!r}, which verdict.md quotes"
