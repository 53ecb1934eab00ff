"""`tuner search` end to end on one shared Ray: results on disk, failures as data, refusals before Ray starts."""

from __future__ import annotations

import hashlib
import math
import os
import sys
import time
from pathlib import Path

import optuna
import pytest

from spaces_for_tests import tiny_space
from tuner.cli import main
from tuner.config import Budget, TrialConfig
from tuner.report.trials import load_trials, read_study_meta
from tuner.search import SearchOptions, run_search
from tuner.search.runner import ClusterInfo, resolve_resources
from tuner.search.searcher import wall_limit
from tuner.train.result import TrialResult

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


def engine_bf16_diverges(cfg, *, cache_dir, out_dir=None, device=None, wall_limit_s=None, on_window=None):
    """Throughput grows with batch, loss falls with beta1; precision bf16 always diverges."""
    p = cfg.params
    if p.precision == "bf16":
        return TrialResult(state="diverged", error="non-finite training loss", train_seconds=0.01,
                           loss_curve=[[64, float("nan")]])
    thr = 100.0 * math.log(p.batch_size) / math.sqrt(p.accumulation_steps)
    return TrialResult(state="complete", throughput=thr, windows=[thr], train_seconds=0.01,
                       quality={"fid": 10.0 + 100.0 / p.batch_size + p.beta1, "quality_seconds": 0.0})


def engine_modes(cfg, *, cache_dir, out_dir=None, device=None, wall_limit_s=None, on_window=None):
    """By trial number (the name of out_dir, trials/<NNNN>): n % 3 == 1 raises, n % 3 == 2 kills its process."""
    mode = int(Path(out_dir).name) % 3
    if mode == 1:
        raise RuntimeError("fake engine bug")
    if mode == 2:
        os._exit(3)  # the trial's process dies: Ray reports an actor error
    return TrialResult(state="complete", throughput=float(cfg.params.batch_size), train_seconds=0.01,
                       quality={"loss": 1.0 / cfg.params.batch_size})


def _ship_fakes_by_value() -> None:
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


# --- helpers ----------------------------------------------------------------------------------------------------


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def optuna_trials(study_dir: Path, name: str):
    storage = f"sqlite:///{study_dir / 'study.db'}"
    return optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)


# --- end to end -------------------------------------------------------------------------------------------------


def test_end_to_end_search_through_the_cli(ray_session, tmp_path, capsys):
    """Real engine, a user's space file by path, cnn on synthetic data, 3 trials: every trial persisted with its
    config and metrics, the Optuna study complete, the front printed with the report's path."""
    space = tmp_path / "tiny.yaml"
    space.write_text(TINY_SPACE)
    reports = tmp_path / "reports"
    rc = main(["search", "--space", str(space), "--trials", "3", "--reports-dir", str(reports), "--seed", "3"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    study_dir = reports / "tiny"
    assert "Pareto front" in out and str(study_dir / "trials.csv") in out
    assert "#0000" in err and "#0002" in err  # the live view, one line per finished trial

    meta = read_study_meta(study_dir)
    for key in ("name", "space", "space_source", "space_def", "params", "objectives", "workload", "dataset",
                "budget", "trials", "sampler", "seed", "storage", "created", "hardware", "versions"):
        assert key in meta, key
    assert meta["params"] == ["batch_size", "beta1"] and meta["workload"] == "cnn" and meta["trials"] == 3
    assert meta["objectives"] == [{"metric": "throughput", "direction": "maximize"},
                                  {"metric": "loss", "direction": "minimize"}]
    assert meta["space_source"] == str(space.resolve())

    records = load_trials(study_dir)
    assert [r["trial"] for r in records] == [0, 1, 2]
    for rec in records:
        assert rec["state"] == "complete", rec.get("error")
        cfg = TrialConfig.model_validate(rec["config"])
        assert cfg.workload == "cnn" and cfg.dataset == "synthetic" and cfg.budget.samples == 128
        assert cfg.params.batch_size == rec["params"]["batch_size"] and cfg.params.num_workers == 0
        assert rec["throughput"] > 0 and math.isfinite(rec["loss"]) and rec["train_seconds"] > 0
    assert (study_dir / "trials.csv").read_text().count("\n") == 4
    trials = optuna_trials(study_dir, "tiny")
    assert [t.state.name for t in trials] == ["COMPLETE"] * 3
    assert all(t.constraints == {"failed": 0.0} for t in trials)
    assert [t.params["batch_size"] for t in trials] == [r["params"]["batch_size"] for r in records]


def test_failing_region_is_recorded_and_proposed_less_than_random(ray_session, tmp_path):
    """precision=bf16 always diverges (1 in 3 under random sampling). After the random start-up trials, the
    sampler has learned the region and proposes it far less; every failure is recorded with its reason and
    told to Optuna with finite values and a violated constraint (never NaN)."""
    _ship_fakes_by_value()
    summary = run_search(SearchOptions(space="amp_loader", study="fails", trials=24, startup_trials=8, seed=0,
                                       reports_dir=tmp_path, engine=engine_bf16_diverges))
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
    assert summary.front and all(r["state"] == "complete" for r in summary.front)


def test_raising_and_dying_trials_are_recorded_and_the_study_goes_on(ray_session, tmp_path):
    _ship_fakes_by_value()
    space = tmp_path / "modes.yaml"
    space.write_text(MODES_SPACE)
    summary = run_search(SearchOptions(space=str(space), trials=6, reports_dir=tmp_path, engine=engine_modes))
    records = {r["trial"]: r for r in load_trials(tmp_path / "modes")}
    assert sorted(records) == list(range(6)) and summary.finished == 6
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


def test_existing_study_is_refused_and_left_untouched(ray_session, tmp_path, capsys):
    _ship_fakes_by_value()
    run_search(SearchOptions(space="amp_loader", study="taken", trials=2, reports_dir=tmp_path,
                             engine=engine_bf16_diverges))
    before = snapshot(tmp_path)
    time.sleep(0.01)
    rc = main(["search", "--space", "amp_loader", "--study", "taken", "--reports-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "study 'taken' already exists" in err[0] and "--resume" in err[0] and "--study NEW_NAME" in err[0]
    assert snapshot(tmp_path) == before


def test_resume_of_a_finished_study_adds_trials_up_to_the_new_total(ray_session, tmp_path):
    _ship_fakes_by_value()
    first = run_search(SearchOptions(space="amp_loader", study="more", trials=2, reports_dir=tmp_path,
                                     engine=engine_bf16_diverges))
    kept = {r["trial"]: r for r in load_trials(tmp_path / "more")}
    again = run_search(SearchOptions(study="more", resume=True, reports_dir=tmp_path, engine=engine_bf16_diverges))
    assert again.ran == 0 and again.finished == 2  # nothing to do at the same total
    more = run_search(SearchOptions(study="more", resume=True, trials=4, reports_dir=tmp_path,
                                    engine=engine_bf16_diverges))
    records = {r["trial"]: r for r in load_trials(tmp_path / "more")}
    assert first.finished == 2 and more.ran == 2 and sorted(records) == [0, 1, 2, 3]
    assert all(records[n] == kept[n] for n in kept)
    assert read_study_meta(tmp_path / "more")["trials"] == 4


# --- refusals before Ray starts ---------------------------------------------------------------------------------


BAD_SPACE = """
objectives: [{metric: throughput, direction: max}]
params:
  batch_size: {type: int, low: 64, high: 16}
"""


@pytest.mark.parametrize("args, expected", [
    (["--space", "no_such_space"], "unknown space 'no_such_space'"),
    (["--space", "{bad_yaml}"], "not valid YAML"),
    (["--space", "{bad_domain}"], "params.batch_size: low (64) is greater than high (16)"),
    (["--space", "{bad_type}"], "params.batch_size.type"),
    (["--space", "amp_loader", "--trials", "0"], "--trials must be > 0"),
    (["--space", "amp_loader", "--budget-seconds", "-1"], "--budget-seconds must be > 0"),
    (["--space", "amp_loader", "--budget-samples", "0"], "--budget-samples must be > 0"),
    (["--space", "amp_loader", "--budget-seconds", "5", "--budget-samples", "9"], "at most one of"),
    (["--space", "amp_loader", "--sampler", "annealing"], "unknown sampler 'annealing'"),
    (["--space", "amp_loader", "--workload", "rnn"], "unknown workload 'rnn'"),
    (["--space", "amp_loader", "--dataset", "mnist:{missing}"], "does not exist"),
    (["--space", "amp_loader", "--gpus-per-trial", "1"], "no GPU"),
    (["--space", "amp_loader", "--cpus-per-trial", "4096"], "--cpus-per-trial 4096 is more than"),
    (["--space", "amp_loader", "--concurrency", "0"], "--concurrency must be > 0"),
    (["--study", "ghost", "--resume"], "no study 'ghost' to resume"),
    (["--trials", "3"], "give --space"),
    (["--space", "amp_loader", "--storage", "not-a-url"], "not a database URL"),
])
def test_bad_input_exits_2_with_one_line_before_ray_starts(tmp_path, capsys, monkeypatch, args, expected):
    import tuner.search.runner as runner

    if "--gpus-per-trial" in args:  # a machine without GPUs, whatever this one has
        monkeypatch.setattr(runner, "local_cluster", lambda: ClusterInfo(2, 0, 1, 2, 0))

    def no_ray(*a, **k):
        raise AssertionError("Ray was started for bad input")

    monkeypatch.setattr(runner, "_start_ray", no_ray)
    (tmp_path / "bad.yaml").write_text("params: [unclosed\n")
    (tmp_path / "domain.yaml").write_text(BAD_SPACE)
    (tmp_path / "type.yaml").write_text(BAD_SPACE.replace("type: int, low: 64, high: 16", "type: integer"))
    subs = {"{bad_yaml}": str(tmp_path / "bad.yaml"), "{bad_domain}": str(tmp_path / "domain.yaml"),
            "{bad_type}": str(tmp_path / "type.yaml"), "{missing}": str(tmp_path / "nope")}
    args = [next((a.replace(k, v) for k, v in subs.items() if k in a), a) for a in args]
    reports = tmp_path / "reports"
    rc = main(["search", *args, "--reports-dir", str(reports)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("tuner: error: ") and expected in err[0], err[0]
    assert not reports.exists()


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
