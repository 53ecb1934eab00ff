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
