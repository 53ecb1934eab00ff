"""Terminal table and JSON views of a study."""

import html
import io
import json

from rich.console import Console

from tuner.analysis import open_study
from tests.helpers.records import write_record
from tuner.report.view import sparkline, study_json, study_table, trial_panel


def render(*renderables):
    buf = io.StringIO()
    console = Console(file=buf, width=250, color_system=None)
    for r in renderables:
        console.print(r)
    return buf.getvalue()


def test_table_sorted_by_rank_with_front_marked(make_study):
    s = open_study(make_study(), "gan-demo")
    text = render(study_table(s))
    lines = [l for l in text.splitlines() if "│" in l and any(s in l for s in ("complete", "oom", "diverged", "error "))]
    cells = [[c.strip() for c in l.split("│")[1:-1]] for l in lines]
    assert [c[1] for c in cells] == ["1", "2", "4", "0", "5", "3", "6", "7"]
    assert [c[0] for c in cells[:3]] == ["★ 0"] * 3 and cells[3][0] == "1" and cells[5][0] == "-"
    assert "input-bound" in lines[0] and "OutOfMemoryError" in text
    for header in ("throughput", "fid", "batch_size", "num_workers", "precision", "beta1", "peak MB"):
        assert header in text


def test_trial_detail_shows_params_metrics_windows_grid_and_error(make_study):
    s = open_study(make_study(), "gan-demo")
    text = render(*trial_panel(s, s.trial(2)))
    assert "trial 2" in text and "Pareto front" in text
    assert "batch_size" in text and "128" in text and "fid" in text and "22" in text
    assert "679 700 714 693 707" in text  # the throughput windows
    assert str(s.dir / "trials/0002/samples.png") in text
    oom = render(*trial_panel(s, s.trial(3)))
    assert "out of memory" in oom and "Tried to allocate 2.00 GiB" in oom


def test_json_is_strict_and_carries_rank(make_study):
    s = open_study(make_study(), "gan-demo")
    s.records[0].metrics["fid"] = float("inf")  # a non-finite metric must not produce bare Infinity
    doc = json.loads(json.dumps(study_json(s), allow_nan=False))
    by_trial = {d["trial"]: d for d in doc}
    assert by_trial[2]["rank"] == 0 and by_trial[2]["front"] is True
    assert by_trial[3]["rank"] is None and by_trial[3]["state"] == "oom"
    assert by_trial[0]["fid"] is None
    assert by_trial[1]["bound"] == "input-bound"


def test_sparkline():
    assert sparkline([1, 2, 3]) == "▁▄█"
    assert sparkline([]) == ""


def test_fp32_on_tf32_tensor_cores_is_labelled_wherever_params_are_shown(make_study):
    """TF32 changes fp32's numerics, so a trial that ran with it says `fp32 + TF32` (sampled or fixed by the space),
    in the table, the trial detail, the live line of a search and the HTML report."""
    from tuner.report.html import render_html
    from tuner.cli.progress import trial_line

    s = open_study(make_study(), "gan-demo")
    sampled, fixed, plain = s.trial(2), s.trial(4), s.trial(0)
    sampled.params["tf32"] = True
    fixed.config["params"]["tf32"] = True  # a space with `tf32: true` records it in the config only
    table = render(study_table(s))
    row = {l.split("│")[2].strip(): l for l in table.splitlines() if l.count("│") > 3}
    assert "fp32 + TF32" in row["2"] and "fp32 + TF32" in row["4"] and "TF32" not in row["0"]
    assert "fp32 + TF32" in render(*trial_panel(s, sampled)) and "TF32" not in render(*trial_panel(s, plain))
    assert "precision=fp32 + TF32" in trial_line(sampled, s.objectives, s.params()).plain
    assert render_html(s).count("fp32 + TF32") >= 2


def test_a_trials_ceilings_and_headroom_show_in_every_view(make_study):
    """The verdict is stored with the trial and shown by the table, --trial, JSON, HTML, the live line and the
    export."""
    from tuner.report.export import build_export
    from tuner.report.html import render_html
    from tuner.cli.progress import trial_line
    from tuner.analysis import assess

    s = open_study(make_study(), "gan-demo")
    for r in s.records:
        if r.complete:
            verdict = assess(r.throughput, 4 * r.throughput, 10 * r.throughput, params={"num_workers": 1},
                             device="cpu")
            r.metrics.update(compute_ceiling=4 * r.throughput, input_ceiling=10 * r.throughput, **verdict.metrics())
    r = s.trial(2)
    sentence = r.get("headroom")
    assert r.get("bound") == "overhead-bound" and "shares the CPU cores" in sentence
    table = render(study_table(s))
    assert "% compute" in table and "% input" in table and "25.0%" in table and "10.0%" in table
    assert "overhead-bound" in table
    panel = " ".join(render(*trial_panel(s, r)).split())
    assert "headroom: " + " ".join(sentence.split()) in panel
    doc = {d["trial"]: d for d in study_json(s)}
    assert doc[2]["bound"] == "overhead-bound" and doc[2]["headroom"] == sentence
    assert doc[2]["of_compute_ceiling"] == 0.25 and doc[2]["compute_ceiling"] == 4 * r.throughput
    assert sentence in html.unescape(render_html(s))
    assert "overhead-bound, 25% of compute ceiling" in trial_line(r, s.objectives, s.params()).plain
    assert "of peak" not in trial_line(r, s.objectives, s.params()).plain  # not measured: not shown
    r.metrics["of_peak"] = 0.062
    assert "overhead-bound, 25% of compute ceiling  6% of peak" in trial_line(r, s.objectives, s.params()).plain
    exp = build_export(s)
    measured = exp.config.provenance["measured"]
    assert measured["headroom"] == exp.record.get("headroom") and measured["bound"] == "overhead-bound"


def test_a_compiled_trial_shows_its_payback_against_the_studys_eager_trials(make_study):
    from tests.helpers.studies import _params, _record

    from tuner.study import StudyFolder
    from tuner.study import TrialRecord

    reports = make_study()
    compiled = _record(reports / "gan-demo", 8, "complete", {**_params(64, 0), "compile": "default"},
                       throughput=800.0, fid=31.0)
    compiled.update(compile_seconds=60.0, compile_steps=2, graph_breaks=0, recompiles=0)
    write_record(StudyFolder(reports / "gan-demo"), TrialRecord.model_validate(compiled))
    s = open_study(reports, "gan-demo")
    # Eager at batch 64, fp32: trial 0 alone (400 samples/s); compiled at 2x pays its 60 s back after 120 s.
    text = render(*trial_panel(s, s.trial(8)))
    assert "pays back its 60 s of compiling after 2 min" in " ".join(text.split())
    doc = next(d for d in study_json(s) if d["trial"] == 8)
    assert doc["compile_payback"].startswith("pays back") and "1 eager trial " in doc["compile_payback"]
    assert doc["compile_seconds"] == 60.0
    assert next(d for d in study_json(s) if d["trial"] == 0)["compile_payback"] is None


def test_goodput_and_efficiency_show_in_every_view_with_the_noise_scale_behind_them(tmp_path):
    """Batch 256 at 2600 samples/s against the baseline's batch 64 with noise scale 900: efficiency 964 / 1156,
    goodput 2168 useful samples/s (tuner.analysis.goodput); the table, --trial, JSON and HTML all say so."""
    from tuner.report.html import render_html
    from tests.helpers.studies import goodput_study

    goodput_study(tmp_path / "reports")
    s = open_study(tmp_path / "reports", "cnn-goodput")
    table = render(study_table(s))
    assert "goodput" in table and "2168.2 (x0.8339)" in table and "1500.0 (x1)" in table
    panel = " ".join(render(*trial_panel(s, s.trial(1))).split())
    assert "goodput: 2168.2 useful samples/s = throughput 2600.0 x efficiency 0.8339" in panel
    assert "effective batch 256 against the baseline's noise scale 900: 1.20x the baseline's samples" in panel
    doc = {d["trial"]: d for d in study_json(s)}
    assert doc[1]["efficiency"] == 964 / 1156 and doc[1]["goodput"] == 2600 * 964 / 1156
    assert doc[0]["noise_scale"] == 900 and doc[1]["baseline_noise_scale"] == 900
    page = html.unescape(render_html(s))
    assert "goodput" in page and "2168.2" in page and "0.8339" in page

    goodput_study(tmp_path / "other", noise_scale=None)
    unmeasured = render(study_table(open_study(tmp_path / "other", "cnn-goodput")))
    row = next(line for line in unmeasured.splitlines() if "│" in line and " 2600" in line)
    assert "goodput" in unmeasured and "(x" not in row and "nan" not in unmeasured.lower()


def test_the_table_leaves_out_columns_empty_for_every_trial_and_the_csv_keeps_them(make_study):
    """On a CPU study the ceilings, peak share, compile time and goodput are '-' for every trial: those columns are
    left out so the rest fit a terminal; rank, trial, state, the objectives and the searched knobs always stay."""
    s = open_study(make_study(), "gan-demo")
    header = next(l for l in render(study_table(s)).splitlines() if "rank" in l)
    for gone in ("% compute", "% input", "% peak", "compile s", "goodput", "units/s", "suspect"):
        assert gone not in header
    for kept in ("rank", "trial", "state", "throughput", "fid", "data wait", "peak MB", "batch_size", "num_workers",
                 "precision", "beta1", "error"):
        assert kept in header
    csv_header = s.folder.csv_path.read_text().splitlines()[0].split(",")  # trials.csv keeps every figure
    assert {"of_compute_ceiling", "of_peak", "compile_seconds", "goodput"} <= set(csv_header)


def test_the_table_trial_panel_and_json_show_confirmed_time_to_target_with_not_reached_runs(make_study):
    """Issue 34: a confirmed trial's time to target in the table, --trial and JSON is the interval over its re-runs
    (the export header's; the search's selected reading left out, issue 51), its not-reached run counted at the
    target's cap (so `at least`); a trial none of whose runs reached the target says `not reached`, with how many
    runs."""
    from tests.helpers.studies import target_study

    s = open_study(target_study(make_study()).parent, "gan-demo")
    buf = io.StringIO()
    Console(file=buf, width=600, color_system=None).print(study_table(s))  # the cells unwrapped
    table = buf.getvalue()
    row = {l.split("│")[2].strip().rstrip(" ✓"): l for l in table.splitlines() if l.count("│") > 3}
    assert "at least 8.32 (" in row["2"] and "re-runs: 5, 3.2; no interval; 1 of 3 runs not reached)" in row["2"]
    assert "not reached (0 of 4 runs)" in row["1"]  # none of its 4 runs, the trial with them
    panel = render(*trial_panel(s, s.trial(2)))
    assert "time_to_target confirmed" in panel and "at least 8.32 (" in panel
    assert "samples_to_target confirmed" in panel
    assert "not reached (0 of 4 runs)" in render(*trial_panel(s, s.trial(1)))
    docs = {d["trial"]: d for d in study_json(s)}
    two = docs[2]["to_target"]["time_to_target"]  # (5 x 3.2 x 36)^(1/3)
    assert (two["runs"], two["reached"]) == (3, 2) and 8.32 < two["centre"] < 8.33 and two["low"] < 3.2
    assert docs[2]["confirmed"]["figures"]["time_to_target"]["runs"] == 3
    one = docs[1]["to_target"]["time_to_target"]
    assert (one["runs"], one["reached"], one["centre"], one["text"]) == (4, 0, None, "not reached (0 of 4 runs)")


def test_trial_and_json_show_the_estimated_time_to_target_beside_the_measured_one(make_study):
    """Issue 34: a planted trial that reached the target in 4 s of wall clock at 3,200 samples and 700 samples/s:
    --trial shows the estimate (3200 / 700 = 4.57 s) right after the measured time and samples to target, and
    confirmed over the trial and its re-runs like them; the JSON carries both."""
    from tests.helpers.studies import target_study

    s = open_study(target_study(make_study()).parent, "gan-demo")
    panel = render(*trial_panel(s, s.trial(2)))
    rows = {c[1].strip(): c[2].strip() for l in panel.splitlines() if (c := l.split("│")) and len(c) > 3}
    keys = [k for k in rows if k]  # a long figure wraps onto a row with no key
    at = keys.index("time_to_target")
    assert keys[at:at + 6] == ["time_to_target", "time_to_target confirmed", "samples_to_target",
                               "samples_to_target confirmed", "estimated_time_to_target",
                               "estimated_time_to_target confirmed"]
    assert rows["estimated_time_to_target"] == "4.57" and rows["time_to_target"] == "4"
    assert rows["estimated_time_to_target confirmed"].endswith("; 1 of 3 runs not reached)")
    doc = {d["trial"]: d for d in study_json(s)}[2]
    assert doc["estimated_time_to_target"] == 3200 / 700 and doc["time_to_target"] == 4.0
    est = doc["to_target"]["estimated_time_to_target"]
    assert (est["runs"], est["reached"]) == (3, 2) and est["low"] < est["centre"] < est["high"]


def test_a_trial_shows_the_share_of_its_cpus_other_processes_took(make_study):
    """Issue 58: what other work took of a trial's CPUs while it trained is shown beside its figures."""
    from tuner.study import RunEnvironment

    s = open_study(make_study(), "gan-demo")
    record = s.trial(2)
    record.environment = RunEnvironment(others_share=0.48, others_cpus=0.96, load1=3.2)
    text = render(*trial_panel(s, record))
    assert "other processes" in text and "48% of its CPUs (1.0 CPUs, load average 3.2)" in text
    assert "busy: its throughput moves with that load" in text
    record.environment = RunEnvironment(others_share=0.02, others_cpus=0.04)
    assert "what others took while it trained" in render(*trial_panel(s, record))
