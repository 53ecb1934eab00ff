"""benchmarks/roles.py's roles-lm-pick statistic: two configs re-run in interleaved rounds are compared inside each
round, so the machine's drift between rounds cancels."""

from __future__ import annotations

import pytest

from benchmarks.roles import round_ratio


def test_one_config_both_ways_under_drift_reads_one_where_a_ratio_of_medians_would_miss():
    # the machine 20% slower in the second round and 20% faster in the third: each round reads both arms alike
    pick, fastest = [1000.0, 800.0, 1200.0], [1000.0, 800.0, 1200.0]
    assert round_ratio(pick, fastest) == 1.0
    # the thirty-third session's readings: round ratios 0.93, 0.98 and 0.82; their median 0.93 (the ratio of the two
    # medians, 2355 / 2869, read 0.82 and missed the 0.85 target)
    assert round_ratio([2789, 2298, 2355], [2991, 2357, 2869]) == pytest.approx(0.9325, abs=1e-3)


def test_a_slower_pick_in_every_round_still_reads_slower():
    assert round_ratio([700.0, 560.0, 840.0], [1000.0, 800.0, 1200.0]) == pytest.approx(0.7)
    with pytest.raises(ValueError):
        round_ratio([1.0, 2.0], [1.0])  # rounds that do not pair up are an error, not a silent truncation
