"""Figures with uncertainty (tuner.analysis.stats): geometric means, pooled run-to-run spread, ratios, noise floor."""

import math

import pytest

from tuner.study import Confirmed, Rerun
from tuner.analysis import confirmed, noise_floor, pool, ratio_interval
from tests.helpers.records import write_record, write_rerun


def test_pooled_spread_is_relative_and_shared_by_every_config():
    """Two configs, each off by the same +-5% around its own centre: one relative spread for both, whatever
    their scale, and intervals proportional to each centre."""
    a, b = [95.0, 105.0], [950.0, 1050.0]
    p = pool([a, b])
    assert p.log and p.df == 2
    ia, ib = p.interval(a), p.interval(b)
    assert ia.centre == pytest.approx(math.sqrt(95 * 105)) and ib.centre == pytest.approx(math.sqrt(950 * 1050))
    assert ia.low / ia.centre == pytest.approx(ib.low / ib.centre)
    assert ia.contains(100.0) and not ia.contains(130.0)


def test_more_repeats_narrow_the_interval():
    noisy = [[100.0, 110.0], [200.0, 220.0]]
    more = [[100.0, 110.0, 100.0, 110.0], [200.0, 220.0, 200.0, 220.0]]
    width = lambda p, g: p.interval(g).high / p.interval(g).low  # noqa: E731
    assert width(pool(more), more[0]) < width(pool(noisy), noisy[0])


def test_one_rerun_is_predicted_by_a_wider_interval_than_the_mean():
    """A re-training is one run: the interval that should hold it is the prediction interval, wider than the
    mean's by sqrt(1 + n) at the same spread (the figures of a nanoGPT-style study here: re-runs 299 and 303,
    313 and 309; `tuner train` on the export then read 315, outside the mean's 292-310, inside one run's)."""
    p = pool([[299.1, 303.4], [313.5, 309.3]])
    mean, one = p.interval([299.1, 303.4]), p.prediction([299.1, 303.4])
    assert one.centre == pytest.approx(mean.centre)
    assert math.log(one.high / one.centre) == pytest.approx(math.log(mean.high / mean.centre) * math.sqrt(3))
    assert not mean.contains(314.6) and one.contains(314.6)


def test_ratio_interval_says_faster_only_beyond_the_noise():
    pooled = pool([[100.0, 102.0, 98.0], [131.0, 133.0, 129.0]])
    clear = ratio_interval([131.0, 133.0, 129.0], [100.0, 102.0, 98.0], pooled)
    assert clear.centre == pytest.approx(1.31, abs=0.01) and clear.low > 1
    noisy = pool([[80.0, 120.0], [90.0, 130.0]])
    unclear = ratio_interval([90.0, 130.0], [80.0, 120.0], noisy)
    assert unclear.low < 1 < unclear.high
    assert ratio_interval([1.0], [2.0], None).low is None  # no spread known: no interval


def test_noise_floor_pools_only_repeated_configs():
    floor = noise_floor([[100.0, 110.0], [50.0, 55.0], [70.0]])
    assert floor.configs == 2 and floor.runs == 4
    assert 0.05 < floor.relative_sd < 0.1
    assert noise_floor([[100.0], [50.0]]) is None


def test_confirmed_figures_leave_out_failed_reruns():
    runs = [Rerun(repeat=0, state="complete", metrics={"throughput": 100.0, "fid": 30.0}),
            Rerun(repeat=1, state="oom", error="OutOfMemoryError: boom"),
            Rerun(repeat=2, state="complete", metrics={"throughput": 121.0, "fid": 32.0})]
    c = confirmed(runs)
    assert c.runs == 3 and c.states == ["complete", "oom", "complete"]
    assert c.figures["throughput"].values == [100.0, 121.0]
    assert c.figures["throughput"].centre == pytest.approx(110.0)  # geometric mean


@pytest.mark.parametrize("df, quantile", [(1, 12.706), (3, 3.182), (10, 2.228), (30, 2.042), (2.5, 3.575)])
def test_the_interval_uses_student_s_t_at_95_percent(df, quantile):
    """The t quantiles of a two-sided 95% interval, as printed tables give them (2.5 df: between 2 and 3)."""
    from tuner.analysis.stats import _t

    assert _t(df) == pytest.approx(quantile, abs=2e-3)


def test_the_noise_floor_line_counts_its_configs_in_words_a_user_reads():
    one = noise_floor([[100.0, 120.0]])
    two = noise_floor([[100.0, 120.0], [50.0, 55.0]])
    assert one is not None and one.text().endswith("(2 re-runs of 1 config)")
    assert two is not None and two.text().endswith("(4 re-runs of 2 configs)")
    assert one.text().startswith(f"one config's throughput varies by {one.relative_sd:.1%} run to run")


def test_a_config_read_in_several_rounds_gets_an_interval_that_holds_its_readings(tmp_path):
    """The baseline read 99 and 101 in round 0 and 201 in round 1 (the machine sped up 2x between them). Its
    within-round spread is ~1%, and applied to all three readings it gave an interval of a few percent around
    126 that held none of them. Across rounds the centre is the mean of the two round means (sqrt(100 x 201)),
    and both the interval of that mean (1 degree of freedom from 2 rounds) and where one more run reads hold
    every reading; trial 2, read in one round, keeps its within-round interval."""
    from tuner.study import Objective, StudyFolder, StudyMeta, TrialRecord
    from tuner.analysis import Study

    folder = StudyFolder(tmp_path / "s")
    folder.write_meta(StudyMeta(name="s", objectives=[Objective(metric="throughput", direction="max")],
                                baseline={"trial": 0}))
    for n in (0, 2):
        write_record(folder, TrialRecord(trial=n, state="complete", metrics={"throughput": 100.0 * (n + 1)}))
    for n, runs in {0: [(99.0, 0), (101.0, 0), (201.0, 1)], 2: [(150.0, 0), (152.0, 0)]}.items():
        for k, (thr, round_) in enumerate(runs):
            write_rerun(folder, n, Rerun(repeat=k, round=round_, state="complete", metrics={"throughput": thr}))
    s = Study.load(folder)
    base = s.trial(0).confirmed.figures["throughput"]
    assert base.centre == pytest.approx(math.exp((math.log(99 * 101) / 2 + math.log(201)) / 2))
    assert all(base.low <= v <= base.high for v in (99.0, 101.0, 201.0))
    assert all(base.rerun_low <= v <= base.rerun_high for v in (99.0, 101.0, 201.0))
    one = s.trial(2).confirmed.figures["throughput"]
    p = s.pooled("throughput")
    assert (one.low, one.high) == pytest.approx((p.interval([150.0, 152.0]).low, p.interval([150.0, 152.0]).high))
    assert one.high / one.low < 1.1  # one round: the within-round noise alone, as before


def test_across_rounds_is_never_narrower_than_the_within_round_noise():
    """Two rounds whose means agree closely by chance: the between-round spread would give a near-zero interval,
    but the within-round noise still bounds how well the mean is known."""
    p = pool([[95.0, 105.0], [100.0, 100.0]])
    iv = p.across([[95.0, 105.0], [99.9, 100.1]])
    within = _t_half(p, [2, 2])
    assert math.log(iv.high / iv.centre) == pytest.approx(within)


def _t_half(p, sizes):
    from tuner.analysis.stats import _t

    k = len(sizes)
    return _t(p.df) * p.sd * math.sqrt(sum(1 / n for n in sizes) / k ** 2)


def test_two_equal_configs_differ_beyond_the_noise_about_5_percent_of_the_time():
    """The quality tie's test (tuner.analysis.stats.differ) on two configs of the same quality, 2 or 3 re-runs each,
    the spread pooled with a third config's re-runs as a study pools it: 4000 simulated pairs, standard error 0.35%,
    so 3.5-6.5% holds a 5% test. Whether the two 95% intervals overlap (the rule it replaces) said 'differ' under
    2% of the time."""
    import random

    from tuner.analysis import differ

    rng = random.Random(39)
    draws = lambda n: [30.0 * rng.lognormvariate(0.0, 0.05) for _ in range(n)]  # noqa: E731
    hits = overlaps = 0
    for i in range(4000):
        a, b, c = draws(2 + i % 2), draws(2 + i % 2), draws(2)
        p = pool([a, b, c])
        hits += differ(a, b, p) is True
        overlaps += not p.interval(a).overlaps(p.interval(b))
    assert 0.035 <= hits / 4000 <= 0.065, hits / 4000
    assert overlaps / 4000 < 0.025  # the old rule: far from the 5% it was meant to be


def test_a_not_reached_rerun_keeps_time_to_target_in_the_confirmed_figures_counted():
    """Issue 34: a re-run that did not reach the target lacks time_to_target by meaning; the confirmed figures keep
    it over the trial and its re-runs (the export header's numbers), the not-reached run counted, and every other
    metric still over the complete re-runs."""
    from tuner.study import TrialResult
    from tuner.analysis import time_to_target

    trial = TrialResult(state="complete", metrics={"throughput": 99.0, "time_to_target": 4.0})
    reruns = [Rerun(repeat=k, state="complete" if t else "not reached",
                    metrics={"throughput": 100.0 + k, **({"time_to_target": t} if t else {})})
              for k, t in enumerate([5.0, 3.2, None])]
    c = confirmed(reruns)
    ttt = c.figures["time_to_target"]
    want = time_to_target(reruns)
    # the search's selected reading (4.0) is left out, as throughput's is (issue 51: it read equal configs 4-9%
    # sooner)
    assert (ttt.values, ttt.runs, ttt.not_reached) == ([5.0, 3.2], 3, 1)
    assert (ttt.centre, ttt.low, ttt.high) == (want.interval.centre, want.interval.low, want.interval.high)
    assert math.isclose(ttt.centre, 4.0) and ttt.low < 3.2 and ttt.high > 5.0
    assert c.figures["throughput"].values == [100.0, 101.0, 102.0] and c.figures["throughput"].runs is None
    none = confirmed([Rerun(repeat=0, state="not reached", metrics={"throughput": 1.0})])
    assert "time_to_target" not in none.figures and "throughput" in none.figures


def test_a_not_reached_run_counts_at_the_cap_and_one_rerun_gets_a_prediction_interval():
    """Issue 34: a run that did not reach the target took at least the cap, so it counts against the config there:
    the centre (4, 5, 3.2 and the 36 s cap: 6.93 s, not the 4 s of the three that reached it) reads `at least`;
    samples to target counts it at the samples of its last evaluation. Each to-target figure gets where ONE
    re-run (`--until-target`) should read, wider than the centre's interval. Without a cap (a given target): at
    its last evaluation; with no evaluation either: left out, said so."""
    from tuner.study import TrialResult
    from tuner.analysis import time_to_target

    trial = TrialResult(state="complete", metrics={"time_to_target": 4.0, "samples_to_target": 3200})
    reruns = [Rerun(repeat=k, state="complete" if t else "not reached",
                    quality_curve=[[1600.0, 1.0, 40.0], [9600.0, 36.5, 35.0]],
                    metrics={"throughput": 100.0, **({"time_to_target": t, "samples_to_target": 3200} if t else {})})
              for k, t in enumerate([5.0, 3.2, None])]
    to = time_to_target([trial, *reruns], cap=36.0)
    assert to.interval.centre == pytest.approx(2304 ** 0.25) and to.at_least and to.censored == 36.0
    assert to.prediction.low < to.interval.low and to.prediction.high > to.interval.high
    assert to.text().startswith("at least 6.93 s (95% 1.18-40.8 s, reached by 3 of 4 runs: 1 not reached, counted "
                                "at the 36 s cap)") and to.rerun_text() == "0.132-364 s"
    samples = time_to_target([trial, *reruns], "samples_to_target")
    assert samples.interval.centre == pytest.approx((3200 ** 3 * 9600) ** 0.25) and samples.at_least
    c = confirmed(reruns, cap=36.0).figures["time_to_target"]
    over = time_to_target(reruns, cap=36.0)  # the re-runs alone: the trial's reading was selected
    assert (c.centre, c.rerun_low, c.rerun_high, c.at_least) == (over.interval.centre, over.prediction.low,
                                                                 over.prediction.high, True)
    given = time_to_target([trial, *reruns])  # a given target has no cap: counted at its last evaluation's 36.5 s
    assert given.interval.centre == pytest.approx((4 * 5 * 3.2 * 36.5) ** 0.25) and given.at_least
    assert "1 not reached, counted at 36.5 s, its last evaluation" in given.text()
    curveless = [*reruns[:2], reruns[2].model_copy(update={"quality_curve": []})]  # nothing to count it at
    blind = time_to_target([trial, *curveless])
    assert blind.interval.centre == pytest.approx(4.0) and not blind.at_least
    assert "1 not reached, left out (no cap known to count it at)" in blind.text()
    reached = time_to_target([trial, *reruns[:2]], cap=36.0)  # all reached: no `at least`
    assert not reached.at_least and not reached.text().startswith("at least") and reached.rerun_text() is not None
