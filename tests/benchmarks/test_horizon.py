"""The horizon benchmark (benchmarks/horizon.py): its rows, built from planted readings, pass and fail on their
figures, and a study that picked its baseline or failed counts as the docstring says."""

from __future__ import annotations

from benchmarks.horizon import CASES, Reading, rows
from benchmarks.table import EXPECTED, Row

SIZES = CASES["full"]


def _verdicts(readings: list[Reading]) -> dict[str, str]:
    return {r["id"]: Row.from_json(r, "horizon.json").verdict() for r in rows(readings, SIZES)}


def _checked(workload: str, seed: int, ratio: float, study: tuple[float, float, float]) -> Reading:
    return Reading(workload, seed, ratio=ratio, low=ratio * 0.8, high=ratio * 1.2, word="holds",
                   study_ratio=study[0], study_low=study[1], study_high=study[2], key="time_to_target")


def test_a_speed_up_that_holds_inside_the_studies_intervals_passes():
    readings = [_checked("lm", 0, 1.5, (1.6, 1.3, 1.9)), _checked("lm", 1, 1.4, (1.5, 1.2, 1.8)),
                _checked("vae", 0, 1.8, (1.7, 1.4, 2.0)), _checked("vae", 1, 1.35, (2.0, 1.5, 2.6))]
    assert _verdicts(readings) == {"hz-lm": "pass", "hz-vae": "pass", "hz-inside": "pass"}
    inside = next(r for r in rows(readings, SIZES) if r["id"] == "hz-inside")
    assert inside["figure"] == 0.75 and inside["details"]["inside"] == 3  # vae seed 1's 1.35 lies below 1.5-2.6


def test_a_speed_up_that_shrinks_at_the_horizon_misses_both_rows():
    readings = [_checked("lm", 0, 1.1, (1.6, 1.3, 1.9)), _checked("lm", 1, 1.2, (1.5, 1.3, 1.8)),
                _checked("vae", 0, 1.0, (1.7, 1.4, 2.0)), _checked("vae", 1, 1.5, (1.7, 1.4, 2.0))]
    assert _verdicts(readings) == {"hz-lm": "MISSED", "hz-vae": "MISSED", "hz-inside": "MISSED"}  # 1 of 4 inside


def test_a_study_that_picked_its_baseline_counts_no_speed_up_and_a_failed_one_is_left_out():
    readings = [_checked("lm", 0, 1.6, (1.6, 1.3, 1.9)),
                Reading("lm", 1, skipped="the study picked its baseline"),
                Reading("lm", 2, skipped="the study picked its baseline"),
                _checked("vae", 0, 1.5, (1.6, 1.3, 1.9)),
                Reading("vae", 1, failed="search exited 2: give a longer budget")]
    found = {r["id"]: r for r in rows(readings, SIZES)}
    assert found["hz-lm"]["figure"] == 1.0  # median of 1.6, 1.0, 1.0: the user got no speed-up in two seeds
    assert found["hz-vae"]["figure"] == 1.5 and "give a longer budget" in found["hz-vae"]["note"]
    assert found["hz-inside"]["figure"] == 2 / 4  # not inside: both baseline picks; the failed study not counted
    assert Row.from_json(found["hz-inside"], "horizon.json").verdict() == "MISSED"


def test_a_workload_without_readings_is_not_measured_and_every_row_is_expected():
    verdicts = _verdicts([Reading("lm", 0, failed="search exited 2"), Reading("vae", 0, failed="search exited 2")])
    assert verdicts == {"hz-lm": "not measured", "hz-vae": "not measured", "hz-inside": "not measured"}
    expected = {e.id: e for e in EXPECTED if e.benchmark == "horizon"}
    for r in rows([_checked("lm", 0, 1.5, (1.6, 1.3, 1.9))], SIZES):
        assert expected[r["id"]].name == r["name"]


def test_a_reading_is_what_the_study_folders_horizon_json_says(tmp_path):
    from benchmarks.horizon import from_folder
    from tuner.study import HorizonCheck, write_horizon

    assert from_folder(tmp_path, "vae", 0).failed  # no check ran: no reading, and it says why
    check = HorizonCheck(horizon={"samples": 64000}, pick=3, baseline=0, metric="val_loss", direction="minimize",
                         target=37.2, target_source="baseline at the horizon", eval_every_samples=192,
                         key="time_to_target", ratio=1.21, low=1.02, high=1.43, study_ratio=1.9, study_low=1.4,
                         study_high=2.6, word="shrinks", text="shrinks: 1.21x at the horizon")
    write_horizon(tmp_path, check)
    r = from_folder(tmp_path, "vae", 0)
    assert (r.ratio, r.low, r.high, r.word, r.study_low, r.study_high) == (1.21, 1.02, 1.43, "shrinks", 1.4, 2.6)
    assert not r.inside and r.counted == 1.21
    assert _verdicts([r])["hz-vae"] == "MISSED"  # 1.21x sooner at the horizon: under the 1.3x asked


def test_the_quality_page_quotes_the_results_file():
    """docs/concepts/quality.md's horizon section states benchmarks/results/horizon.json's readings (issue 51: the
    docs quote the figures): a re-measurement that moves them must move the page too."""
    import json
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    page = " ".join((repo / "docs" / "concepts" / "quality.md").read_text().split())
    doc = json.loads((repo / "benchmarks" / "results" / "horizon.json").read_text())
    rows = {r["id"]: r for r in doc["rows"]}

    def listed(values: list[str]) -> str:  # "a, b, c and d", as the page writes a list
        return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]

    for row, name in (("hz-lm", "charlm"), ("hz-vae", "the VAE")):
        seen = rows[row]["details"]["readings"]  # a study that picked its baseline has no check: said so
        horizon = listed([f"{r['ratio']:.2f}x" if r["ratio"] is not None else "no check" for r in seen])
        study = listed([f"{r['study_ratio']:.2f}x" if r["study_ratio"] is not None else "their baseline"
                        for r in seen])
        assert f"on {name} " in page and horizon in page and f"had read {study}" in page, (row, horizon, study)
    for row in ("hz-lm", "hz-vae", "hz-inside"):  # each row's verdict, as the table reads it
        word = "passed" if Row.from_json(rows[row], "horizon.json").verdict() == "pass" else "missed"
        assert re.search(rf"row `{row}`[^)]*: {word}\)", page), (row, word)
    inside = rows["hz-inside"]["details"]
    assert f"inside the study's interval in {inside['inside']} of {inside['studies']} studies" in page
