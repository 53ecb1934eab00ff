"""A study's numerics parity: which knob values it checks on which device, and what its folder keeps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.helpers.userworkloads import GOOD, RAISES_AT_32, write
from tuner.errors import StudyError
from tuner.parity import numerics_candidates, plan_parity
from tuner.space import load_space
from tuner.study import Preflight, StudyParity, read_parity

H100 = {"cpus": 16, "gpus": 1, "device": "cuda (H100)", "precisions": ["fp32", "fp16", "bf16"], "tf32_available": True}
LAPTOP = {"cpus": 2, "gpus": 0, "device": "cpu", "precisions": ["fp32"], "tf32_available": False}


def test_the_default_space_checks_nothing_on_a_cpu_and_every_half_precision_and_tf32_on_an_h100():
    space = load_space("amp_loader")
    assert numerics_candidates(space, LAPTOP) == []
    assert numerics_candidates(space, H100) == [{"precision": "bf16"}, {"precision": "fp16"}, {"tf32": True}]


def test_a_cpu_with_native_bf16_has_bf16_checked_against_fp32_and_one_without_checks_nothing():
    """The default space on two x86 CPUs (planted flags): with AVX512-BF16 its bf16 goes through the parity check
    like a GPU's; without it bf16 is not offered, so nothing is checked."""
    from tuner.device import cpu_native_precisions

    space = load_space("amp_loader")
    zen4 = {**LAPTOP, "precisions": cpu_native_precisions({"avx2", "avx512f", "avx512_bf16"}, "x86_64")}
    zen3 = {**LAPTOP, "precisions": cpu_native_precisions({"avx2", "fma"}, "x86_64")}
    assert numerics_candidates(space, zen4) == [{"precision": "bf16"}]
    assert numerics_candidates(space, zen3) == []


def test_a_space_that_searches_compile_or_fixes_bf16_has_those_checked(tmp_path):
    text = """
objectives: [{metric: throughput, direction: max}]
params:
  batch_size: {type: int, low: 16, high: 64}
  precision: bf16
  compile: {type: categorical, choices: ["off", default]}
"""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    space = load_space(str(path))
    assert numerics_candidates(space, LAPTOP) == [{"precision": "bf16"}, {"compile": "default"}]


def _plan(tmp_path, resume=False, study="study", step_seconds=None, parity_seconds=None):
    """A plan as plan_parity reads it: the pre-flight's step time (None: not timed) and --parity-seconds."""
    folder = SimpleNamespace(path=tmp_path / study, write_file=lambda p, data: p.write_text(data))
    folder.path.mkdir(exist_ok=True)
    return SimpleNamespace(folder=folder, resume=resume, own={}, cache_dir=tmp_path / "cache",
                           preflight=Preflight(step_seconds=step_seconds),
                           options=SimpleNamespace(parity_seconds=parity_seconds, address=None))


def _space(tmp_path, precisions="fp32, bf16"):
    path = tmp_path / "s.yaml"
    path.write_text("objectives: [{metric: throughput, direction: max}]\n"
                    "params:\n  batch_size: {type: int, low: 16, high: 32}\n"
                    f"  precision: {{type: categorical, choices: [{precisions}]}}\n")
    return load_space(str(path))


def test_a_study_keeps_its_verdicts_and_a_resumed_study_reads_them_again(tmp_path):
    work = write(tmp_path / "w", GOOD)
    base = {"workload": f"{work}:make", "budget": {"samples": 64}, "params": {"device": "cpu"}}
    printed = []
    console = SimpleNamespace(print=lambda text, **_: printed.append(text))
    result = plan_parity(_plan(tmp_path), _space(tmp_path), LAPTOP, base, None, console, in_process=True)
    assert result is not None and result.error is None
    [v] = result.verdicts
    assert v.knobs == {"precision": "bf16"} and v.state in ("within seed noise", "drifts", "diverged")
    assert read_parity(tmp_path / "study") == result
    assert any(line.strip().startswith("precision=bf16: ") for line in printed)
    again = plan_parity(_plan(tmp_path, resume=True), _space(tmp_path), LAPTOP, base, None, None, in_process=True)
    assert again == result  # not run again
    assert result.for_params({"precision": "bf16", "batch_size": 16}) == [v]
    assert result.for_params({"precision": "fp32"}) == []


@pytest.fixture
def checks(monkeypatch):
    """The knob sets each parity check of the test trained (the study's check_parity, counted and run)."""
    import tuner.parity._arms as arms

    real, calls = arms.check_parity, []

    def counted(cfg, knob_sets, *args, **kwargs):
        calls.append(list(knob_sets))
        return real(cfg, knob_sets, *args, **kwargs)

    monkeypatch.setattr(arms, "check_parity", counted)
    return calls


def _study(tmp_path, base, name, precisions="fp32, bf16", **timing):
    """One study's check (`timing`: the pre-flight's step_seconds, --parity-seconds) and what it printed."""
    printed = []
    console = SimpleNamespace(print=lambda text, **_: printed.append(text))
    result = plan_parity(_plan(tmp_path, study=name, **timing), _space(tmp_path, precisions), LAPTOP, base, None,
                         console, in_process=True)
    assert result is not None and result.error is None, result
    return result, "\n".join(printed)


def test_a_second_study_of_the_same_workload_reuses_the_verdict_and_says_so(tmp_path, checks):
    base = {"workload": f"{write(tmp_path / 'w', GOOD)}:make", "params": {"device": "cpu"}}
    first, said = _study(tmp_path, base, "one")
    assert checks == [[{"precision": "bf16"}]] and "checking numerics" in said
    second, said = _study(tmp_path, base, "two")
    assert checks == [[{"precision": "bf16"}]]  # not trained again
    [v] = second.verdicts
    assert (v.state, v.text, v.cached, first.verdicts[0].cached) == (first.verdicts[0].state, first.verdicts[0].text,
                                                                     True, False)
    assert "checking numerics" not in said and f"{v.text} (cached from " in said
    assert f"delete {v.cache_file}" in said and (tmp_path / "cache" / "parity").is_dir()
    kept = read_parity(tmp_path / "two")  # what the report and the export read
    assert kept.verdicts[0].cached and any("(cached from " in line for line in kept.lines())


def test_a_changed_workload_source_or_a_new_knob_value_is_checked_again(tmp_path, checks):
    work = write(tmp_path / "w", GOOD)
    base = {"workload": f"{work}:make", "params": {"device": "cpu"}}
    _study(tmp_path, base, "one")
    with open(work, "a") as f:
        f.write("\n# edited: the model or its data may have changed\n")
    edited, _ = _study(tmp_path, base, "two")
    assert checks == [[{"precision": "bf16"}]] * 2 and not edited.verdicts[0].cached
    both, _ = _study(tmp_path, base, "three", precisions="fp32, bf16, fp16")
    assert checks[2:] == [[{"precision": "fp16"}]]  # the edited source's bf16 verdict was kept; fp16's is new
    assert [v.cached for v in both.verdicts] == [True, False]


@pytest.mark.parametrize("damage", ["{not json", '{"state": "fine", "text": "bf16: fine", "checked_at": "now"}'])
def test_a_damaged_cache_entry_is_checked_again_and_replaced(tmp_path, checks, damage):
    base = {"workload": f"{write(tmp_path / 'w', GOOD)}:make", "params": {"device": "cpu"}}
    _study(tmp_path, base, "one")
    [entry] = (tmp_path / "cache" / "parity").glob("*.json")
    entry.write_text(damage)
    again, _ = _study(tmp_path, base, "two")
    assert len(checks) == 2 and not again.verdicts[0].cached
    third, _ = _study(tmp_path, base, "three")
    assert len(checks) == 2 and third.verdicts[0].cached  # the entry was written afresh


def test_a_workload_that_fails_in_the_check_is_recorded_and_the_study_goes_on(tmp_path):
    base = {"workload": f"{write(tmp_path / 'w', RAISES_AT_32)}:make", "params": {"device": "cpu", "batch_size": 32}}
    result = plan_parity(_plan(tmp_path), _space(tmp_path), LAPTOP, base, None, None, in_process=True)
    assert result is not None and result.error and result.verdicts == []
    assert result.lines()[0].startswith("numerics parity could not run: ") and "shapes do not line up" in result.error


def test_a_damaged_parity_file_is_one_line_naming_it(tmp_path):
    (tmp_path / "parity.json").write_text("{not json")
    with pytest.raises(StudyError, match="parity.json is damaged"):
        read_parity(tmp_path)
    assert read_parity(tmp_path / "nowhere") is None
    assert StudyParity(steps=10).lines()[0].startswith("numerics parity against fp32 (10 steps")


def test_the_report_and_the_export_of_a_checked_value_say_its_verdict(make_study):
    from tuner.report.export import build_export
    from tuner.report.export_file import render
    from tuner.report.view import study_document, study_footer
    from tuner.analysis import open_study
    from tuner.study import KnobParity

    reports = make_study()
    drifts = KnobParity(knobs={"precision": "bf16"}, state="drifts", gap=0.25, seed_gap=0.02, from_step=41,
                        text="precision=bf16: drifts by 25% of the loss from step 41 (seed-to-seed 2%; 100 steps)")
    (reports / "gan-demo" / "parity.json").write_text(StudyParity(steps=100, verdicts=[drifts]).model_dump_json())
    study = open_study(reports, "gan-demo")
    assert drifts.text in "\n".join(study_footer(study))
    assert study_document(study)["numerics_parity"]["verdicts"][0]["state"] == "drifts"
    from tuner.report.html import render_html

    assert 'id="numerics-parity"' in render_html(study) and "drifts by 25% of the loss from step 41" in render_html(study)
    bf16 = build_export(study, trial=5)  # trial 5 trained in bf16
    assert bf16.config.provenance["numerics_parity"] == [drifts.text]
    assert f"# Numerics: {drifts.text} (tuner parity)." in render(study, bf16, "yaml", reports / "x.yaml")
    knee = build_export(study)  # fp32: nothing of bf16's verdict applies
    assert "numerics_parity" not in knee.config.provenance


def test_a_check_that_fits_its_cap_runs_every_step_and_says_how_long_it_will_take(tmp_path, checks):
    """A fast step (the built-ins' 20 ms): 100 steps x 4 runs fit 120 s, and the start says the runs' estimate."""
    base = {"workload": f"{write(tmp_path / 'w', GOOD)}:make", "params": {"device": "cpu"}}
    printed = []
    console = SimpleNamespace(print=lambda text, **_: printed.append(text))
    result = plan_parity(_plan(tmp_path, step_seconds=0.02), _space(tmp_path), LAPTOP, base, None, console,
                         in_process=True)
    assert (result.steps, result.capped_from, result.skipped) == (100, None, None) and checks
    said = "\n".join(printed)
    assert "100 steps each, beside fp32 with 2 other seeds (4 runs, about 8 s at the pre-flight's 0.02 s a step)" in said


def test_a_slow_step_gets_fewer_steps_and_the_verdict_says_it_was_capped(tmp_path, checks):
    """The ResNet-18 at 112x112 on 2 CPUs: 1.18 s a step, so 4 runs fit 25 steps of the 120 s cap (100 had taken
    about 8 minutes). The steps trained are the capped ones, and every line that shows the verdict says so."""
    base = {"workload": f"{write(tmp_path / 'w', GOOD)}:make", "params": {"device": "cpu"}}
    printed = []
    console = SimpleNamespace(print=lambda text, **_: printed.append(text))
    result = plan_parity(_plan(tmp_path, step_seconds=1.18), _space(tmp_path), LAPTOP, base, None, console,
                         in_process=True)
    assert result.error is None and (result.steps, result.capped_from) == (25, 100)
    [v] = result.verdicts
    assert v.state in ("within seed noise", "drifts", "diverged")
    said = "\n".join(printed)
    assert "25 steps each (capped from 100 by --parity-seconds" in said and "about 2 min" not in said
    assert "(4 runs, about 118 s at the pre-flight's 1.18 s a step)" in said
    kept = read_parity(tmp_path / "study")  # what the report and the export show
    assert kept.lines()[0].startswith("numerics parity against fp32 (25 steps, capped from 100 by "
                                      "--parity-seconds 120 at 1.18 s a step,")


@pytest.mark.parametrize("step_seconds, parity_seconds, why", [
    (10.0, None, "4 runs of 25 steps at the pre-flight's 10 s a step need about 17 min, over --parity-seconds 120; the "
                 "trials' quality decides precision=bf16 (give --parity-seconds 1000 to check it in the study"),
    (0.02, 0, "--parity-seconds 0: the trials' quality decides precision=bf16"),
])
def test_a_check_that_cannot_fit_or_is_turned_off_is_not_run_and_says_what_decides_instead(
        tmp_path, checks, step_seconds, parity_seconds, why):
    base = {"workload": f"{write(tmp_path / 'w', GOOD)}:make", "params": {"device": "cpu"}}
    printed = []
    console = SimpleNamespace(print=lambda text, **_: printed.append(text))
    result = plan_parity(_plan(tmp_path, step_seconds=step_seconds, parity_seconds=parity_seconds),
                         _space(tmp_path), LAPTOP, base, None, console, in_process=True)
    assert checks == [] and result.verdicts == [] and why in result.skipped
    assert printed == [f"numerics parity not run: {result.skipped}"]
    assert read_parity(tmp_path / "study") == result  # a resumed study does not try again
    from tuner.search._speed_probe import within_noise

    assert within_noise(result) == {}  # nothing passed: the trials sample precision


def test_a_skipped_check_of_gpu_trials_starts_no_ray_task_where_the_cache_is_empty(tmp_path, checks, monkeypatch):
    """GPU trials read the cache in a Ray task on the trials' device; a check too slow to run, on a machine whose
    cache holds no verdict at all, would start that task (a worker and CUDA) only to find nothing. It does not."""
    import ray

    started = []
    monkeypatch.setattr(ray, "remote", lambda *a, **k: started.append(k) or (_ for _ in ()).throw(AssertionError))
    base = {"workload": f"{write(tmp_path / 'w', GOOD)}:make", "params": {"device": "cpu"}}
    result = plan_parity(_plan(tmp_path, step_seconds=10.0), _space(tmp_path), LAPTOP, base, None, None,
                         in_process=False)
    assert started == [] and checks == [] and result.error is None
    assert "the trials' quality decides precision=bf16" in result.skipped
    assert result.unchecked == [{"precision": "bf16"}]
    assert read_parity(tmp_path / "study") == result


def test_a_negative_parity_cap_is_refused_in_one_line():
    from tuner.errors import ConfigError
    from tuner.search import SearchOptions
    from tuner.search._plan import plan_search

    with pytest.raises(ConfigError, match=r"--parity-seconds must be >= 0 \(got -5\)"):
        plan_search(SearchOptions(space="amp_loader", parity_seconds=-5))


def _allowance(seconds, left, trial_s=20.0, confirm_runs=4):
    """An allowance of `seconds` with `left` of it left now (a clock that stands still)."""
    from tuner.search._allowance import Allowance

    return Allowance(seconds, started=0.0, confirm_runs=confirm_runs, trial_s=trial_s,
                     clock=lambda: seconds - left)


def test_under_study_seconds_the_check_takes_at_most_half_what_the_trials_do_not_need(tmp_path, checks):
    """--study-seconds 300 with 208 s left, 20 s trials and 4 re-runs reserved: (208 - 10 - 20 - 80) / 2 = 49 s
    for the check, not the 120 s --parity-seconds allows, so it cannot eat the trials' and confirmation's time."""
    allowance = _allowance(300, left=208)
    assert allowance.parity_share() == 49
    base = {"workload": f"{write(tmp_path / 'w', GOOD)}:make", "params": {"device": "cpu"}}
    printed = []
    console = SimpleNamespace(print=lambda text, **_: printed.append(text))
    result = plan_parity(_plan(tmp_path, step_seconds=0.4), _space(tmp_path), LAPTOP, base, None, console,
                         in_process=True, allowance=allowance)
    assert (result.steps, result.capped_from) == (30, 100) and checks  # 49 s / (4 runs x 0.4 s)
    assert result.capped_by == "--study-seconds 300 (49 s of it) at 0.4 s a step"
    assert "30 steps each (capped from 100 by --study-seconds 300 (49 s of it) at 0.4 s a step: " in "\n".join(printed)


def test_an_allowance_with_no_room_for_the_check_skips_it_and_names_the_allowance_that_would_hold_it(
        tmp_path, checks):
    allowance = _allowance(200, left=120)  # (120 - 10 - 20 - 80) / 2 = 5 s: 25 steps x 4 runs x 0.4 s need 40 s
    base = {"workload": f"{write(tmp_path / 'w', GOOD)}:make", "params": {"device": "cpu"}}
    result = plan_parity(_plan(tmp_path, step_seconds=0.4), _space(tmp_path), LAPTOP, base, None, None,
                         in_process=True, allowance=allowance)
    assert checks == [] and result.verdicts == []
    assert "need about 40 s, over --study-seconds 200 (5 s of it); the trials' quality decides precision=bf16 " \
           "(give --study-seconds 270 to check it in the study" in result.skipped


def test_an_allowance_with_room_to_spare_leaves_the_parity_cap_in_charge(tmp_path, checks):
    base = {"workload": f"{write(tmp_path / 'w', GOOD)}:make", "params": {"device": "cpu"}}
    result = plan_parity(_plan(tmp_path, step_seconds=1.18), _space(tmp_path), LAPTOP, base, None, None,
                         in_process=True, allowance=_allowance(3600, left=3500))
    assert (result.steps, result.capped_by) == (25, "--parity-seconds 120 at 1.18 s a step")


def test_a_capped_or_too_slow_check_reuses_an_earlier_studys_verdict_of_the_full_steps(tmp_path, checks):
    """An uncapped study kept bf16's 100-step verdict; a later study of the same workload whose step read slower
    (a busy machine) or whose allowance is tighter would check 25 steps, or none: it shows the 100-step verdict
    instead, free, rather than training a weaker one or leaving bf16 to the trials."""
    base = {"workload": f"{write(tmp_path / 'w', GOOD)}:make", "params": {"device": "cpu"}}
    first, _ = _study(tmp_path, base, "one", step_seconds=0.02)
    assert checks == [[{"precision": "bf16"}]] and first.steps == 100
    for name, step in (("capped", 1.18), ("too-slow", 10.0)):
        again, said = _study(tmp_path, base, name, step_seconds=step)
        assert checks == [[{"precision": "bf16"}]], name  # nothing trained again
        [v] = again.verdicts
        assert v.cached and v.text == first.verdicts[0].text and "100 steps" in v.text
        assert (again.steps, again.capped_from, again.skipped) == (100, None, None)
        assert "checking numerics" not in said and "not run" not in said


def test_a_too_slow_check_shows_the_kept_verdicts_and_says_which_knobs_the_trials_decide(tmp_path, checks):
    base = {"workload": f"{write(tmp_path / 'w', GOOD)}:make", "params": {"device": "cpu"}}
    _study(tmp_path, base, "one", step_seconds=0.02)  # bf16 checked, fp16 not in that space
    both, said = _study(tmp_path, base, "two", precisions="fp32, bf16, fp16", step_seconds=10.0)
    assert checks == [[{"precision": "bf16"}]]
    assert [(v.knobs, v.cached) for v in both.verdicts] == [({"precision": "bf16"}, True)]
    assert "the trials' quality decides precision=fp16 " in both.skipped and "bf16" not in both.skipped
    lines = both.lines()
    assert lines[0].startswith("numerics parity against fp32 (100 steps") and "(cached from " in lines[1]
    assert lines[2] == f"  not run for the others: {both.skipped}" and lines[2] in said
    from tuner.search._speed_probe import within_noise

    assert both.unchecked == [{"precision": "fp16"}]
    assert within_noise(both) == {}  # fp16 has no verdict, so precision stays with the trials, bf16 with it


def test_parity_seconds_0_turns_the_check_off_even_where_a_verdict_is_kept(tmp_path, checks):
    base = {"workload": f"{write(tmp_path / 'w', GOOD)}:make", "params": {"device": "cpu"}}
    _study(tmp_path, base, "one", step_seconds=0.02)
    off, said = _study(tmp_path, base, "two", step_seconds=0.02, parity_seconds=0)
    assert off.verdicts == [] and off.skipped.startswith("--parity-seconds 0") and len(checks) == 1
