"""The report's SVG plots: scales and ticks, and what each drawing marks."""

import re
from html import unescape

import pytest

from tuner.report.plots import Scale, data_wait_svg, log_ticks, loss_svg, nice_ticks, pareto_svg, tooltip, windows_svg
from tuner.analysis import open_study
from tuner.study import state_hex


@pytest.fixture
def study(make_study):
    return open_study(make_study(), "gan-demo")


def test_nice_ticks():
    assert nice_ticks(0, 1, 5) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(18, 40, 5) == [20, 25, 30, 35, 40]
    assert nice_ticks(3, 3) == [3]


def test_log_ticks():
    assert log_ticks(30, 1000) == [50, 100, 200, 500, 1000]
    assert log_ticks(1.5, 1.8) == []


def test_linear_scale_pads_and_maps():
    s = Scale([0.0, 10.0], 100, 200, pad=0)
    assert s(0) == 100 and s(10) == 200 and s(5) == 150
    padded = Scale([0.0, 10.0], 100, 200)
    assert 100 < padded(0) < padded(10) < 200
    flipped = Scale([0.0, 10.0], 200, 100, pad=0)  # y axes: larger values higher up
    assert flipped(10) == 100


def test_scale_edge_cases():
    assert Scale([5.0, 5.0], 0, 100)(5.0) == pytest.approx(50)  # one value sits in the middle
    assert Scale([], 0, 100).ticks()  # nothing measured still draws an axis
    z = Scale([3.0, 4.0], 0, 100, zero=True)
    assert z(0) == 0 and z.ticks(3)[0] == 0
    log = Scale([10.0, 1000.0], 0, 100, log=True, pad=0)
    assert log.log and log(100.0) == pytest.approx(50)
    assert not Scale([0.0, 1000.0], 0, 100, log=True).log  # a zero cannot sit on a log axis


def test_pareto_plot(study):
    svg = pareto_svg(study, knee_trial=2)
    assert svg.startswith('<svg id="pareto-plot"')
    assert svg.count('class="pt') == 8  # 5 scored trials + 3 failure markers (legend markers are not points)
    assert sorted(int(t) for t in re.findall(r'href="#trial-(\d+)"', svg)) == list(range(8))
    assert svg.count('class="front-line"') == 1 and svg.count('class="pt front"') == 3
    assert svg.count('class="knee"') == 1 and ">knee<" in svg
    for state in ("oom", "diverged", "error"):  # failure markers in the state's colour
        assert state_hex(state) in svg
    assert "FID (lower is better)" in svg and "log scale" in svg  # 35 to 900 samples/s spans > 20x
    assert "Tried to allocate 2.00 GiB</title>" in svg


def test_pareto_plot_escapes_and_handles_no_score(make_study):
    s = open_study(make_study(kind="failed"), "gan-demo")
    s.trial(7).error = "<script>alert(1)</script>"
    svg = pareto_svg(s, knee_trial=None)
    assert "<script" not in svg and "&lt;script&gt;" in svg
    assert "no complete trial with a score yet" in svg and 'class="knee"' not in svg
    assert unescape(tooltip(s, s.trial(7))).endswith("<script>alert(1)</script>")


def test_trial_plots(study):
    assert windows_svg(study.trial(3)) == '<p class="note">no timed windows</p>'
    svg = windows_svg(study.trial(1))
    assert svg.count("<rect") == 1 + 5 and "throughput 900 samples/s" in svg
    rec = study.trial(1).model_copy(update={"metrics": {}})  # no throughput read (diverged): the windows' median
    assert "median 900 samples/s" in windows_svg(rec)
    rec = study.trial(1).model_copy(update={"loss_curve": [[640, 1.4], [1280, None], [1920, 1.2]]})
    assert loss_svg(rec).count("<circle") == 2  # the NaN window is left out
    assert loss_svg(study.trial(3)) == '<p class="note">no loss curve</p>'


def test_data_wait_plot(study):
    svg = data_wait_svg(study)
    assert 'id="data-wait-plot"' in svg
    assert "compute-bound below 10%" in svg and "input-bound above 30%" in svg
    assert svg.count("waiting for data") == 6  # trials that measured a data wait
    assert "45.0% input-bound" in svg and "20.0% mixed" in svg
