"""`tuner search` end to end on one shared Ray: results on disk, failures as data, refusals before Ray starts."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import optuna
import pytest

from tests.helpers.spaces_for_tests import tiny_space
from tests.helpers.studies import load_trials, read_meta
from tuner.config import Budget
from tuner.device import cpu_native_precisions
from tuner.search import SearchOptions, run_search
from tuner.search._resources import ClusterInfo, resolve_resources
from tuner.search.toolkit import wall_limit
from tuner.study import TrialResult

pytestmark = pytest.mark.ray

TINY_SPACE = tiny_space(trials=3)

MODES_SPACE = """
description: fake modes
defaults: {workload: cnn, dataset: synthetic, budget: {samples: 64}, trials: 6}
objectives: {cnn: [{metric: throughput, direction: max}, {metric: loss, direction: min}]}
params:
  batch_size: {type: int, low: 16, high: 64}
"""


# --- fake engines (shipped to Ray workers by value, see below) ------------------------------------------------


def engine_bf16_diverges(cfg, *, cache_dir, out_dir=None, device=None, wall_limit_s=None, on_window=None, setup=None,
                         **_):
    """Throughput grows with batch, loss falls with beta1; precision bf16 always diverges."""
    p = cfg.params
    if p.precision == "bf16":
        return TrialResult(state="diverged", error="non-finite training loss", train_seconds=0.01,
                           loss_curve=[[64, float("nan")]])
    thr = 100.0 * math.log(p.batch_size) / math.sqrt(p.accumulation_steps)
    return TrialResult(state="complete", throughput=thr, windows=[thr], train_seconds=0.01,
                       fid=10.0 + 100.0 / p.batch_size + p.beta1, quality_seconds=0.0)


def engine_modes(cfg, *, cache_dir, out_dir=None, device=None, wall_limit_s=None, on_window=None, setup=None, **_):
    """By trial number (the name of out_dir, trials/<NNNN>): n % 3 == 1 raises, n % 3 == 2 kills its process."""
    mode = int(Path(out_dir).name) % 3
    if mode == 1:
        raise RuntimeError("fake engine bug")
    if mode == 2:
        os._exit(3)  # the trial's process dies: Ray reports an actor error
    return TrialResult(state="complete", throughput=float(cfg.params.batch_size), train_seconds=0.01,
                       loss=1.0 / cfg.params.batch_size)


def _ship_fakes_by_value() -> None:
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


# --- helpers ----------------------------------------------------------------------------------------------------


def optuna_trials(study_dir: Path, name: str):
    storage = f"sqlite:///{study_dir / 'study.db'}"
    return optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)


# --- end to end -------------------------------------------------------------------------------------------------


def amp_loader_with_half_precision(tmp_path: Path) -> str:
    """The default space, but listing fp16/bf16 without `native`: half precision searched even on a CPU."""
    from tuner.space import resolve_space_path

    text = resolve_space_path("amp_loader").read_text()
    assert ", native: true}" in text
    path = tmp_path / "amp_loader.yaml"
    path.write_text(text.replace(", native: true}", "}"))
    return str(path)


def amp_loader_in_fp32(tmp_path: Path) -> str:
    """The default space with precision pinned to fp32, for tests not about precision: the same study on a CPU
    with and without native bf16 (which the default space would offer beside fp32, tuner.device.cpu_has_bf16)."""
    from tuner.space import resolve_space_path

    text = resolve_space_path("amp_loader").read_text()
    pinned = "  precision: {type: categorical, choices: [fp32, bf16, fp16], native: true}"
    assert pinned in text
    path = tmp_path / "amp_loader.yaml"
    path.write_text(text.replace(pinned, "  precision: fp32"))
    return str(path)


def few_parity_steps(monkeypatch) -> None:
    """The study's numerics parity check trains the real GAN 100 steps per arm (four arms, or more with fp16 and
    TF32: 60-150 s of these tests on 2 cores); tests of the search itself need its verdicts, not their precision."""
    import tuner.parity._study as parity

    monkeypatch.setattr(parity, "STUDY_STEPS", 8)


def test_failing_region_is_recorded_and_proposed_less_than_random(ray_session, tmp_path, trial_engine):
    """precision=bf16 always diverges (1 in 3 under random sampling). After the random start-up trials, the
    sampler has learned the region and proposes it far less; every failure is recorded with its reason and
    told to Optuna with finite values and a violated constraint (never NaN). No numerics parity check: the fake
    engine's divergence is the subject, and the study of the test below runs the check."""
    _ship_fakes_by_value()
    trial_engine(engine_bf16_diverges)
    summary = run_search(SearchOptions(space=amp_loader_with_half_precision(tmp_path), study="fails", trials=24,
                                       startup_trials=8, seed=0, reports_dir=tmp_path, probe=False, confirm=0,
                                       parity_seconds=0))
    assert summary.finished == 24 and not summary.interrupted
    records = load_trials(tmp_path / "fails")
    diverged = [r for r in records if r["state"] == "diverged"]
    assert diverged and all(r["params"]["precision"] == "bf16" and r["error"] for r in diverged)
    assert all(r["params"]["precision"] != "bf16" for r in records if r["state"] == "complete")
    later = [r for r in records if r["trial"] >= 8]
    share = sum(r["params"]["precision"] == "bf16" for r in later) / len(later)
    assert share <= 0.2, f"bf16 proposed in {share:.0%} of the guided trials (random: 33%)"

    trials = optuna_trials(tmp_path / "fails", "fails")
    assert all(t.state.name == "COMPLETE" and all(math.isfinite(v) for v in t.values) for t in trials)
    assert all((t.constraints["failed"] > 0) == (t.params["precision"] == "bf16") for t in trials)
    assert summary.front and all(r.state == "complete" for r in summary.front)


def test_raising_and_dying_trials_are_recorded_and_the_study_goes_on(ray_session, tmp_path, trial_engine):
    _ship_fakes_by_value()
    trial_engine(engine_modes)
    space = tmp_path / "modes.yaml"
    space.write_text(MODES_SPACE)
    summary = run_search(SearchOptions(space=str(space), trials=6, reports_dir=tmp_path, probe=False, confirm=0))
    records = {r["trial"]: r for r in load_trials(tmp_path / "modes")}
    assert sorted(records) == list(range(6)) and summary.finished == 6
    # --confirm 0: no confirmation phase, no noise floor
    assert all(r.confirmed is None for r in summary.study.records) and summary.study.meta.noise is None
    for n, rec in records.items():
        if n % 3 == 0:
            assert rec["state"] == "complete"
        elif n % 3 == 1:
            assert rec["state"] == "error" and rec["error"] == "RuntimeError: fake engine bug"
        else:
            assert rec["state"] == "error" and rec["error"].startswith("the trial process died"), rec["error"]
            assert "batch_size" in rec["params"]
    trials = optuna_trials(tmp_path / "modes", "modes")
    assert all(t.state.name == "COMPLETE" for t in trials)


def test_resume_of_a_finished_study_adds_trials_up_to_the_new_total(ray_session, tmp_path, trial_engine):
    _ship_fakes_by_value()
    trial_engine(engine_bf16_diverges)
    first = run_search(SearchOptions(space=amp_loader_in_fp32(tmp_path), study="more", trials=2, reports_dir=tmp_path,
                                     probe=False, confirm=0))
    kept = {r["trial"]: r for r in load_trials(tmp_path / "more")}
    again = run_search(SearchOptions(study="more", resume=True, reports_dir=tmp_path, probe=False, confirm=0))
    assert again.ran == 0 and again.finished == 2  # nothing to do at the same total
    more = run_search(SearchOptions(study="more", resume=True, trials=4, reports_dir=tmp_path,
                                    probe=False, confirm=0))
    records = {r["trial"]: r for r in load_trials(tmp_path / "more")}
    assert first.finished == 2 and more.ran == 2 and sorted(records) == [0, 1, 2, 3]
    assert all(records[n] == kept[n] for n in kept)
    assert read_meta(tmp_path / "more")["trials"] == 4


def test_the_default_space_fits_the_trials_hardware_and_a_resume_elsewhere_keeps_it(ray_session, tmp_path,
                                                                                     monkeypatch, capsys,
                                                                                     trial_engine):
    """A study started where trials have an Ampere-class GPU (device facts faked; the session's Ray has 2 CPUs)
    searches workers up to 2, every native precision and TF32 for fp32, and stores those domains. Resumed on this
    CPU, it keeps them (Optuna refuses a categorical whose choices change) and says so."""
    from rich.console import Console

    import tuner.search._setup as setup

    _ship_fakes_by_value()
    trial_engine(engine_bf16_diverges)
    few_parity_steps(monkeypatch)
    gpu = {"device": "cuda (fake A100)", "precisions": ["fp32", "fp16", "bf16"], "tf32_available": True}
    monkeypatch.setattr(setup, "device_facts_for", lambda resources, cluster, remote=False: (dict(gpu), []))
    first = run_search(SearchOptions(space="amp_loader", study="fit", trials=8, startup_trials=8, seed=1,
                                     reports_dir=tmp_path, probe=False, confirm=0))
    meta = read_meta(tmp_path / "fit")
    checked = json.loads((tmp_path / "fit" / "parity.json").read_text())  # the numerics check ran inside the study
    assert checked["steps"] == 8 and checked["verdicts"] and not checked.get("error"), checked
    assert meta["context"] == {"cpus": 2, "gpus": 0, **gpu}
    assert meta["domains"]["num_workers"] == {"type": "int", "low": 0, "high": 2}
    assert meta["domains"]["precision"]["choices"] == ["fp32", "bf16", "fp16"]
    assert meta["space_def"]["params"]["num_workers"]["high"] == "cpus"  # the space as written, beside it
    assert "tf32" in meta["params"]
    records = load_trials(tmp_path / "fit")
    assert first.finished == 8 and all(r["params"]["num_workers"] <= 2 for r in records)
    assert {r["params"]["precision"] for r in records} > {"fp32"}
    assert all(("tf32" in r["params"]) == (r["params"]["precision"] == "fp32") for r in records)

    monkeypatch.undo()  # this machine again: a CPU, where fp32 is native, and bf16 where the CPU has it
    trial_engine(engine_bf16_diverges)
    console = Console(file=__import__("io").StringIO(), width=400)
    again = run_search(SearchOptions(study="fit", resume=True, trials=12, reports_dir=tmp_path,
                                     probe=False, confirm=0), console=console)
    assert again.ran == 4 and again.finished == 12
    here = "one of " + ", ".join(cpu_native_precisions())
    assert any("resuming with the domains this study started with" in w and "precision: one of fp32, bf16, fp16 "
               f"(here: {here})" in w for w in again.warnings), again.warnings
    assert "warning:" in console.file.getvalue() and "fitted to these trials" in console.file.getvalue()
    assert read_meta(tmp_path / "fit")["domains"] == meta["domains"]
    trials = optuna_trials(tmp_path / "fit", "fit")
    assert all(t.state.name == "COMPLETE" for t in trials)
    assert {tuple(t.distributions["precision"].choices) for t in trials} == {("fp32", "bf16", "fp16")}


# --- refusals before Ray starts ---------------------------------------------------------------------------------


# --- resources and caps -----------------------------------------------------------------------------------------


def test_default_resources_never_share_a_device():
    cpu = resolve_resources(SearchOptions(), ClusterInfo(cpus=2, gpus=0, nodes=1, node_cpus=2, node_gpus=0))
    assert (cpu.concurrency, cpu.cpus_per_trial, cpu.gpus_per_trial, cpu.warnings) == (1, 2, 0, [])
    gpu = resolve_resources(SearchOptions(), ClusterInfo(cpus=32, gpus=4, nodes=1, node_cpus=32, node_gpus=4))
    assert (gpu.concurrency, gpu.cpus_per_trial, gpu.gpus_per_trial, gpu.warnings) == (4, 8, 1, [])
    ddp = resolve_resources(SearchOptions(gpus_per_trial=2), ClusterInfo(32, 4, 1, 32, 4))
    assert (ddp.concurrency, ddp.ddp_workers) == (2, 2)


def test_sharing_a_device_is_allowed_with_a_warning():
    shared = resolve_resources(SearchOptions(concurrency=2), ClusterInfo(2, 0, 1, 2, 0))
    assert shared.concurrency == 2 and shared.cpus_per_trial == 1 and "distort" in shared.warnings[0]
    half = resolve_resources(SearchOptions(gpus_per_trial=0.5), ClusterInfo(16, 1, 1, 16, 1))
    assert half.concurrency == 2 and "share" in half.warnings[0]


def test_wall_cap_follows_the_budget_and_the_trials_so_far():
    assert wall_limit(Budget(seconds=20), []) == 40
    assert wall_limit(Budget(samples=512), [1.0]) == 600
    assert wall_limit(Budget(samples=512), [10.0, 12.0, 100.0]) == 60
