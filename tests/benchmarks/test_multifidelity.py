"""The multi-fidelity benchmark's published rows from planted replay summaries (no training, no replay): ASHA's
time to 90% of the top-rung hypervolume against FIFO's, and the seeds where its hypervolume at equal wall time is
at least FIFO's, judged by the rows' own targets."""

from __future__ import annotations

import json

from benchmarks.multifidelity import rows, write_rows
from benchmarks.table import Row


def _summary(asha: str, rungs: list[int], t90: float, wins: int, ties: int = 0) -> dict:
    return {"workload": "cnn", "rungs": rungs, "asha": asha, "t90_asha_s": t90, "t90_fifo_s": 200.0,
            "t90_ratio": t90 / 200.0, "never_asha": 0, "never_fifo": 0, "hv_asha": 0.9, "hv_fifo": 0.8,
            "hv_wins": wins, "hv_ties": ties, "seeds": 10, "stopped_share": 0.4}


def _verdicts(found: list[dict]) -> dict[str, str]:
    return {r["id"]: Row.from_json(r, "planted").verdict() for r in found}


GRIDS = {"cnn": {"started": "2026-11-23T22:49:44Z", "ended": "2026-11-23T23:26:19Z", "configs": 24}}


def test_asha_in_half_fifos_time_and_as_good_in_8_of_10_seeds_passes():
    found = rows([_summary("asha-pruned", [128, 384, 1152], 90.0, 9),
                  _summary("asha-values", [128, 384, 1152], 300.0, 2),  # the other variant: in the notes only
                  _summary("asha-pruned", [384, 1152], 300.0, 2)], GRIDS)
    assert [r["id"] for r in found] == ["mf-t90-cnn", "mf-hv-cnn"]
    assert found[0]["ratio"] == 0.45 and found[1]["figure"] == 9.0 and found[1]["baseline"] == 10.0
    assert _verdicts(found) == {"mf-t90-cnn": "pass", "mf-hv-cnn": "pass"}
    assert "2026-11-23T22:49:44Z" in found[0]["note"] and "asha-values on rungs 128/384/1152" in found[0]["note"]


def test_asha_slower_than_half_or_worse_in_3_seeds_is_missed():
    found = rows([_summary("asha-pruned", [128, 384, 1152], 110.0, 7, ties=5)], GRIDS)
    assert _verdicts(found) == {"mf-t90-cnn": "MISSED", "mf-hv-cnn": "MISSED"}
    assert "equal in 5 of the 7 seeds" in found[1]["note"]


def test_the_rows_file_carries_the_commit_and_keeps_another_grids_rows(tmp_path):
    path = tmp_path / "multifidelity-rows.json"
    gan = {**_summary("asha-pruned", [64, 192, 576], 90.0, 9), "workload": "gan"}
    write_rows(rows([gan], {}), path)
    write_rows(rows([_summary("asha-pruned", [128, 384, 1152], 90.0, 9)], GRIDS), path)
    doc = json.loads(path.read_text())
    assert doc["schema"] == "tuner-benchmark-rows/1"
    assert sorted(r["id"] for r in doc["rows"]) == ["mf-hv-cnn", "mf-hv-gan", "mf-t90-cnn", "mf-t90-gan"]
    assert all(r["commit"] and len(r["commit"]) == 40 for r in doc["rows"])


def test_a_missed_time_to_90_says_why_from_the_trials_it_took_and_what_each_cost():
    why = {"trials_to_t90": 6, "stopped_to_t90": 1, "front_stopped": 0, "front_configs": 5, "fifo_trial_s": 51.7,
           "survivor_s": 68.5, "stopped_first_s": 15.7}
    found = rows([{**_summary("asha-pruned", [128, 384, 1152], 236.0, 10), **why}], GRIDS)
    assert _verdicts(found)["mf-t90-cnn"] == "MISSED"
    note = found[0]["note"]
    assert "after a median of 6 trials, 1 of them stopped" in note
    assert "(5 configs) 0 times" in note and "15.7 s at the first rung against FIFO's 51.7 s" in note
    assert "68.5 s" in note
