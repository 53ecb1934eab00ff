"""Draw the docs' figures from a real study with the HTML report's own plotting code (tuner.report.plots).

    tuner search --space amp_loader --workload cnn --trials 8 --study figures --reports-dir /tmp/figs
    python docs/img/make_figures.py /tmp/figs figures

writes docs/img/pareto.svg (the report's Pareto plot: throughput against quality, the front joined, the knee
ringed, confirmed intervals as error bars) and docs/img/windows.svg (the picked trial's timed windows and its
throughput). The study itself stays out of the repository; only the two SVGs are committed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tuner.report.plots import pareto_svg, windows_svg
from tuner.analysis import decide, open_study

HERE = Path(__file__).resolve().parent
XMLNS = 'xmlns="http://www.w3.org/2000/svg" '


def standalone(svg: str) -> str:
    """The report inlines its SVGs in HTML; a file shown as an image needs the SVG namespace (and no page links)."""
    svg = svg.replace("<svg ", "<svg " + XMLNS, 1)
    return svg.replace('<a href="#', '<a data-trial="#')


def main(reports_dir: str, study_name: str) -> None:
    study = open_study(Path(reports_dir), study_name)
    pick = decide(study).pick
    (HERE / "pareto.svg").write_text(standalone(pareto_svg(study, pick.trial)) + "\n", encoding="utf-8")
    (HERE / "windows.svg").write_text(standalone(windows_svg(pick)) + "\n", encoding="utf-8")
    print(f"wrote {HERE / 'pareto.svg'} and {HERE / 'windows.svg'} from study {study_name} (pick: trial {pick.trial})")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python docs/img/make_figures.py REPORTS_DIR STUDY")
    main(sys.argv[1], sys.argv[2])
