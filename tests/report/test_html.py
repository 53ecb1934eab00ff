"""The HTML report: one self-contained file, and it renders in a real (headless) browser."""

import json
import os
import re
import shutil
import subprocess
from html import unescape

import pytest

from tuner.report.html import render_html, write_html
from tuner.analysis import open_study
from tuner.study import STATE_COLORS, metric

# Appended to a copy of the report by the browser test, so a headless browser can read back what rendered.
MARKER_SCRIPT = """
window.addEventListener('load', function () {
  var plot = document.getElementById('pareto-plot');
  var pts = plot ? plot.querySelectorAll('.pt') : [];
  var box = plot ? plot.getBoundingClientRect() : {width: 0, height: 0};
  var drawn = 0;
  for (var i = 0; i < pts.length; i++) { var b = pts[i].getBBox(); if (b.width > 0 && b.height > 0) drawn++; }
  var imgs = Array.prototype.slice.call(document.images);
  var rows = document.querySelectorAll('#trials-table tbody tr').length;
  document.body.setAttribute('data-rendered', JSON.stringify({
    plot_width: box.width, plot_height: box.height, points: pts.length, points_drawn: drawn, rows: rows,
    images: imgs.length,
    images_decoded: imgs.filter(function (im) { return im.complete && im.naturalWidth > 0; }).length
  }));
});
"""


@pytest.fixture
def report(make_study):
    s = open_study(make_study(), "gan-demo")
    return s, write_html(s)


def test_written_next_to_the_study_and_self_contained(report):
    s, path = report
    assert path == s.dir / "report.html"
    html = path.read_text()
    assert not re.search(r"https?:|ftp:|url\(", html, re.I), "report must not load anything from the network"
    refs = re.findall(r'\b(?:src|href)="([^"]*)"', html)
    assert refs and all(r.startswith(("#", "data:image/")) for r in refs), "only in-page links and data URIs"
    for element in ('id="pareto-plot"', 'id="trials-table"', 'id="data-wait-plot"', 'id="provenance"'):
        assert element in html
    assert html.count('src="data:image/png;base64,') == 3  # the three GAN sample grids, embedded


def test_offline_safe_no_script(report):
    _, path = report
    html = path.read_text()
    assert "<script" not in html.lower(), "the report ships no script"
    assert not re.search(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I), "no network resources"


def test_content_a_reader_needs(report):
    s, path = report
    html = unescape(path.read_text())
    body = html.split('id="trials-table"')[1].split("</table>")[0]
    assert [int(t) for t in re.findall(r'<tr id="row-(\d+)"', body)] == [1, 2, 4, 0, 5, 3, 6, 7]
    assert body.count('class="front"') == 3
    assert "out of memory (infeasible" in html and "Tried to allocate 2.00 GiB" in html
    assert "input-bound" in html and "compute-bound" in html and "30%" in html
    assert "throughput windows" in html and "loss curve" in html
    assert "2.14.1" in html and "x86_64, 2 cores" in html and "2026-11-22T09:59:00" in html  # provenance
    assert "tuner export gan-demo --pick knee" in html
    assert re.search(r'id="trial-2" class="trial" open', html)  # front trials open by default


def test_table_columns_follow_the_metric_list(report):
    s, path = report
    head = unescape(path.read_text().split('id="trials-table"')[1].split("</thead>")[0])
    labels = re.findall(r"<th[^>]*>([^<]*)</th>", head)
    objectives = [f"{metric(o.metric).label} {o.arrow}" for o in s.objectives]
    measured = [m.label for m in s.table_columns() if m.key not in {o.metric for o in s.objectives}]
    assert labels == ["rank", "trial", "state", *objectives, *measured, *s.params(), "error"]
    row = unescape(path.read_text().split('<tr id="row-1"')[1].split("</tr>")[0])
    assert "<td>900.0</td>" in row and "<td>822</td>" in row  # throughput and peak MB through fmt_metric


def test_state_colours_come_from_the_one_table(report):
    _, path = report
    html = path.read_text()
    for state, (_, color) in STATE_COLORS.items():
        assert f".state-{state.replace(' ', '-')}{{color:{color}}}" in html  # a class name: "not reached" too


def test_trial_detail_shows_every_metric_and_the_traceback(make_study):
    s = open_study(make_study(), "gan-demo")
    s.trial(0).metrics["val_elbo"] = 1.25  # a user workload's own metric, unknown to the metric list
    s.trial(7).traceback = 'Traceback (most recent call last):\n  File "my_workload.py", line 3\nValueError: <bad>'
    html = render_html(s)
    detail = html.split('id="trial-0"')[1].split("</details>")[0]
    measured = unescape(detail.split("<h3>measured</h3>")[1].split("</dl>")[0])
    shown = re.findall(r"<dt[^>]*>([^<]*)</dt>", measured)
    known = ["throughput ↑", "spread", "data wait", "peak MB", "train s", "samples", "steps", "FID ↓",
             "FID features", "FID samples", "quality s"]
    assert shown[:len(known) + 1] == [*known, "val elbo"]  # the metric list's order, then unknown keys
    assert "400.0 samples/s" in measured and "812 MB" in measured and "1.25" in measured  # with their units
    error = html.split('id="trial-7"')[1].split("</details>")[0]
    assert '<pre class="traceback">Traceback (most recent call last):' in error
    assert "ValueError: &lt;bad&gt;</pre>" in error


def test_user_text_is_escaped(make_study):
    s = open_study(make_study(), "gan-demo")
    s.trial(7).error = "<script>alert(1)</script>"
    assert "<script>alert(1)" not in render_html(s)


def test_study_without_complete_trials_still_renders(make_study):
    s = open_study(make_study(kind="failed"), "gan-demo")
    html = render_html(s)
    assert "no complete trial" in html and 'id="pareto-plot"' in html


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
def test_renders_in_headless_chromium(report, tmp_path):
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; .ci/run must `apt-get install -y chromium` (Debian package)")
        pytest.skip("chromium not installed (Debian: apt-get install -y chromium); CI runs this test")
    _, path = report
    page = tmp_path / "report.html"  # a copy with the test's own script: the report itself ships none
    page.write_text(path.read_text().replace("</body>", f"<script>{MARKER_SCRIPT}</script>\n</body>"))
    args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2000"]
    url = page.resolve().as_uri()
    dom = subprocess.run([*args, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    marker = re.search(r'data-rendered="([^"]*)"', dom.stdout)
    assert marker, "the injected load script did not run"
    rendered = json.loads(unescape(marker.group(1)))
    assert rendered["rows"] == 8  # every trial in the table
    assert rendered["plot_width"] > 300 and rendered["plot_height"] > 200
    assert rendered["points"] == 8 and rendered["points_drawn"] == 8  # 5 scored + 3 failed markers, all drawn
    assert rendered["images"] == 3 and rendered["images_decoded"] == 3  # sample grids decoded

    shot = tmp_path / "report.png"
    run = subprocess.run([*args, f"--screenshot={shot}", url], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as img:
        colors = img.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50  # not a blank page


def test_cnn_study_plots_validation_loss(make_study):
    s = open_study(make_study("cnn-demo", kind="cnn"), "cnn-demo")
    html = render_html(s)
    assert "loss (lower is better)" in html
    assert [r.trial for r in s.front()] == [0, 1]  # trial 2 is slower and worse than trial 0
    assert "data:image" not in html  # a classifier has no sample grid


def test_the_knobs_of_a_trial_are_listed_with_their_role(make_study):
    """Each trial's params name their role from the knob table (what is learned, speed only), a user workload's
    own hyperparameter says so, and the trials table's param headers carry the role too."""
    s = open_study(make_study(), "gan-demo")
    s.trial(0).params["width_mult"] = 2  # a user workload's own hyperparameter, unknown to the knob table
    html = render_html(s)
    detail = unescape(html.split('id="trial-0"')[1].split("</details>")[0])
    knobs = detail.split("<h3>params</h3>")[1].split("</table>")[0]
    rows = dict((name, role) for name, _, role in re.findall(
        r'<tr><td class="l">([^<]*)</td><td class="l">([^<]*)</td><td class="l">([^<]*)</td></tr>', knobs))
    assert rows["batch_size"] == "what is learned, and speed" and rows["num_workers"] == "speed only"
    assert rows["beta1"] == "what is learned" and rows["width_mult"] == "the workload's own"
    assert 'title="searched param: speed only">num_workers<' in html


def test_knob_roles_follow_the_split_and_the_models_batch_statistics():
    """Issue 40: the report shows the split of a kept effective batch as a speed knob without batch statistics,
    a learning knob with them, and says nothing new for a study that changed the effective batch or predates it."""
    from types import SimpleNamespace

    from tuner.report.html import split_batch_statistics

    def study(space_def, preflight):
        from tuner.study import Preflight

        return SimpleNamespace(meta=SimpleNamespace(space_def=space_def, preflight=Preflight.model_validate(preflight)))

    split = {"params": {"batch_size": {"type": "int", "low": 16, "high": 256}}}
    assert split_batch_statistics(study(split, {"batch_statistics": []})) is False
    assert split_batch_statistics(study(split, {"batch_statistics": ["0 (BatchNorm2d)"]})) is True
    assert split_batch_statistics(study(split, {})) is None  # a study from before the pre-flight looked
    explicit = {**split, "effective_batch": {"type": "int", "low": 64, "high": 512}}
    assert split_batch_statistics(study(explicit, {"batch_statistics": []})) is None
    fixed = {"params": {"batch_size": {"value": 64}}}
    assert split_batch_statistics(study(fixed, {"batch_statistics": []})) is None


def test_the_html_report_shows_confirmed_time_to_target_and_not_reached(make_study):
    """Issue 34: the HTML trials table and trial details show a confirmed trial's time to target as the interval
    over its re-runs (the search's reading left out, issue 51) with its not-reached runs counted, and `not reached`
    for a trial that never reached the target."""
    from tests.helpers.studies import target_study

    html = unescape(render_html(open_study(target_study(make_study()).parent, "gan-demo")))
    assert "at least 8.32 (" in html and "1 of 3 runs not reached)" in html
    assert "not reached (0 of 4 runs)" in html
