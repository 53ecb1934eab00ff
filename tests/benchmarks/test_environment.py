"""benchmarks/environment.py's row text: what a reader of the table sees of the busy study's verdict."""

from __future__ import annotations

from benchmarks.environment import _clauses


def test_a_long_verdict_is_cut_at_whole_clauses_and_says_what_was_left_out():
    verdict = ("the machine was busy: other processes took up to 51% of the CPUs of trials 0, 1 and 5; "
               + "trial 3 (knee): 1.20x faster than the baseline; " * 8 + "run again on a quiet machine, or with "
               "--busy wait")
    cut = _clauses(verdict, 400)
    assert len(cut) < len(verdict) and cut.startswith("the machine was busy")
    kept = cut.split(" (and ")[0]
    assert len(kept) <= 400 and verdict.startswith(kept) and verdict[len(kept):].startswith("; ")
    assert cut.endswith("more clauses: details.verdict)")
    assert _clauses("short; verdict", 400) == "short; verdict"


def test_only_fidelity_reads_again_the_pick_the_full_run_last_recorded(tmp_path):
    """--only-fidelity once read a fixed bf16 pick: on a CPU without native bf16 its step took 1.2 s, and every one
    of its 9 rounds was refused as too short for its budget. It now reads the pick env-fidelity last recorded."""
    import json

    from benchmarks.environment import LAST_PICK, last_pick

    assert last_pick(tmp_path) == LAST_PICK  # no results yet
    pick = {"batch_size": 32, "precision": "fp32", "channels_last": True}
    (tmp_path / "environment.json").write_text(json.dumps({"rows": [
        {"id": "env-policy", "details": {}},
        {"id": "env-fidelity", "details": {"params": {"baseline": {"batch_size": 64}, "pick": pick}}}]}))
    assert last_pick(tmp_path) == pick
