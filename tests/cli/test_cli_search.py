"""`tuner search` through the real entry point: a study on disk, refusals with one line and exit 2 before Ray
starts, and an existing study left untouched."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import optuna
import pytest

from tests.helpers.spaces_for_tests import tiny_space
from tests.helpers.studies import load_trials, read_meta, disk_state
from tuner.cli import main
from tuner.config import TrialConfig
from tuner.search._resources import ClusterInfo

TINY_SPACE = tiny_space(trials=3)


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    return disk_state(folder)


def optuna_trials(study_dir: Path, name: str):
    storage = f"sqlite:///{study_dir / 'study.db'}"
    return optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)



def test_end_to_end_search_through_the_cli(ray_session, space_search):
    """Real engine, a user's space file by path, cnn on synthetic data, 3 trials: every trial persisted with its
    config and metrics, the Optuna study complete, the front printed with the report's path."""
    rc, out, err, space, reports = space_search.run(TINY_SPACE, "--trials", "3", "--seed", "3", "--confirm", "0",
                                                    name="tiny.yaml")
    assert rc == 0, err
    study_dir = reports / "tiny"
    assert "Pareto front" in out and str(study_dir / "trials.csv") in out
    assert "#0000" in err and "#0002" in err  # the live view, one line per finished trial

    meta = read_meta(study_dir)
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


def test_existing_study_is_refused_and_left_untouched(make_study, capsys):
    reports = make_study("taken")
    before = snapshot(reports)
    time.sleep(0.01)
    rc = main(["search", "--space", "amp_loader", "--study", "taken", "--reports-dir", str(reports)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "study 'taken' already exists" in err[0] and "--resume" in err[0] and "--study NEW_NAME" in err[0]
    assert snapshot(reports) == before


def test_search_json_prints_one_document_with_the_front(ray_session, tmp_path, space_search):
    """--format json: stdout is exactly one JSON document (the live view stays on stderr)."""
    rc, out, err, _, _ = space_search.run(TINY_SPACE.replace("trials: 3", "trials: 2"), "--format", "json",
                                          "--confirm", "0", name="tiny.yaml", reports=tmp_path / "r")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["study"] == "tiny" and doc["finished"] == 2 and doc["states"] == {"complete": 2}
    assert doc["front"] and all(t["front"] and t["state"] == "complete" for t in doc["front"])
    assert [o["metric"] for o in doc["objectives"]] == ["throughput", "loss"]
    assert "#0000" in err
    # the study's notes, printed as `note:` on stderr, are the summary's `notes` (the effective batch kept, ...)
    printed = [line.removeprefix("note: ") for line in err.splitlines() if line.startswith("note: ")]
    assert doc["notes"] == printed and any(n.startswith("effective batch kept at") for n in doc["notes"])


def test_search_json_lists_the_studys_notes_apart_from_its_warnings(make_study, tmp_path, capsys, monkeypatch):
    """The study's `note:` lines (the effective batch kept, bf16 not offered here) reach --format json as `notes`:
    the summary had `warnings` only, so a JSON reader lost them."""
    import tuner.search
    from tuner.analysis import Study
    from tuner.search._runner import SearchSummary
    from tuner.study import StudyFolder

    study = Study.load(StudyFolder(make_study("done") / "done"))
    notes = ["effective batch kept at the workload's own 64: ...", "bf16 is not offered on this CPU: ..."]
    summary = SearchSummary(study, ran=0, total=len(study.records), seconds=1.0, notes=notes,
                            warnings=["resuming with the domains this study started with: ..."])
    monkeypatch.setattr(tuner.search, "run_search", lambda opts, console=None, view=None: summary)
    rc = main(["search", "--space", "amp_loader", "--reports-dir", str(tmp_path / "r"), "--format", "json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["notes"] == notes
    assert doc["warnings"] == ["resuming with the domains this study started with: ..."]


@pytest.mark.parametrize("in_confirmation, said", [
    (True, "search stopped after 8 of 8 trials, before its confirmation finished (--resume runs the re-runs left)"),
    (False, "search stopped after 8 of 8 trials; continue with")])
def test_a_stop_in_the_confirmation_says_it_was_the_confirmation_that_stopped(make_study, tmp_path, capsys,
                                                                              monkeypatch, in_confirmation, said):
    """Ctrl-C during the confirmation said "after 3 of 3 trials", as if the trials were what stopped (the study
    here holds 8)."""
    import tuner.search
    from tuner.analysis import Study
    from tuner.search._runner import SearchSummary
    from tuner.study import StudyFolder

    study = Study.load(StudyFolder(make_study("done") / "done"))
    summary = SearchSummary(study, ran=8, total=len(study.records), seconds=1.0, interrupted=True,
                            in_confirmation=in_confirmation)
    monkeypatch.setattr(tuner.search, "run_search", lambda opts, console=None, view=None: summary)
    rc = main(["search", "--space", "amp_loader", "--reports-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 130 and said in err and "--resume" in err
    assert ("confirmation" in err.split("search stopped after")[1]) is in_confirmation


# --- refusals before Ray starts --------------------------------------------------------------------------------


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
    (["--space", "amp_loader", "--budget-seconds", "inf"], "--budget-seconds must be a finite number > 0 and at most 1e+08 (got inf)"),
    (["--space", "amp_loader", "--budget-seconds", "nan"], "--budget-seconds must be > 0 (got nan)"),
    (["--space", "{inf_budget}"], "defaults.budget.seconds: Input should be a finite number"),
    (["--space", "{overflow}"], "params.lr.high: cpus * 1e308 * 10 is too large"),
    (["--space", "amp_loader", "--study", "mine\n"], "study name 'mine\\n' must be"),
    (["--space", "amp_loader", "-o", "x={a: 1, a: 2}"], "--option 'x={a: 1, a: 2}': duplicate key 'a' at line 1"),
    (["--space", "amp_loader", "--race-margin", "2"], "--race-margin sets the margin of --scheduler race"),
    (["--space", "amp_loader", "--scheduler", "asha", "--race-margin", "2"], "add --scheduler race or drop"),
    (["--space", "amp_loader", "--scheduler", "race", "--target", "20", "--race-margin", "1"],
     "--race-margin must be > 1 (got 1)"),
    (["--space", "amp_loader", "--scheduler", "race", "--target", "20", "--race-margin", "0.5"],
     "--race-margin must be > 1 (got 0.5)"),
    (["--space", "amp_loader", "--objective", "wall_time"], "--objective 'wall_time' is not a metric to optimize"),
    (["--space", "amp_loader", "--objective", "throughput,throughput"], "--objective throughput is given twice"),
    (["--space", "amp_loader", "--target", "20", "--target-seeds", "2"], "--target-seeds sets the seeds a target"),
    (["--space", "amp_loader", "--target", "baseline", "--target-seeds", "0"], "--target-seeds must be >= 1 (got 0)"),
])
def test_bad_input_exits_2_with_one_line_before_ray_starts(tmp_path, capsys, monkeypatch, args, expected):
    import tuner.search._ray_env as ray_env
    import tuner.search._runner as runner

    if "--gpus-per-trial" in args:  # a machine without GPUs, whatever this one has
        monkeypatch.setattr(runner, "local_cluster", lambda: ClusterInfo(2, 0, 1, 2, 0))

    def no_ray(*a, **k):
        raise AssertionError("Ray was started for bad input")

    monkeypatch.setattr(ray_env, "start_local_ray", no_ray)
    monkeypatch.setattr(ray_env, "join_ray", no_ray)
    (tmp_path / "bad.yaml").write_text("params: [unclosed\n")
    (tmp_path / "domain.yaml").write_text(BAD_SPACE)
    (tmp_path / "type.yaml").write_text(BAD_SPACE.replace("type: int, low: 64, high: 16", "type: integer"))
    (tmp_path / "inf.yaml").write_text(BAD_SPACE.replace("low: 64, high: 16", "low: 16, high: 64")
                                       + "defaults: {budget: {seconds: .inf}}\n")
    (tmp_path / "overflow.yaml").write_text(BAD_SPACE.replace("batch_size: {type: int, low: 64, high: 16}",
                                                              "lr: {type: float, low: 0.001, high: cpus * 1e308 * 10}"))
    subs = {"{bad_yaml}": str(tmp_path / "bad.yaml"), "{bad_domain}": str(tmp_path / "domain.yaml"),
            "{bad_type}": str(tmp_path / "type.yaml"), "{missing}": str(tmp_path / "nope"),
            "{inf_budget}": str(tmp_path / "inf.yaml"), "{overflow}": str(tmp_path / "overflow.yaml")}
    args = [next((a.replace(k, v) for k, v in subs.items() if k in a), a) for a in args]
    reports = tmp_path / "reports"
    rc = main(["search", *args, "--reports-dir", str(reports)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("tuner: error: ") and expected in err[0], err[0]
    assert not reports.exists()




EMPTY_HERE = """
objectives: [{metric: throughput, direction: max}]
params:
  batch_size: {type: int, low: 16, high: 64}
  num_workers: {type: int, low: 4, high: cpus - 1}
"""


@pytest.mark.parametrize("space, args, expected", [
    (EMPTY_HERE, [], "params.num_workers: low (4) is greater than high (cpus - 1 = 1) for trials with cpus = 2"),
    (EMPTY_HERE, ["--cpus-per-trial", "1"], "high (cpus - 1 = 0) for trials with cpus = 1"),
    (EMPTY_HERE.replace("cpus - 1", "cpus - memory"), [], "params.num_workers.high: 'cpus - memory': unknown name"),
    ("objectives: [{metric: throughput, direction: max}]\nparams:\n  precision: {type: categorical, "
     "choices: [fp16], native: true}\n", [], "params.precision: none of fp16 runs natively on cpu"),  # any CPU
])
def test_a_space_that_does_not_fit_this_machine_exits_2_before_ray_starts(monkeypatch, space_search, space,
                                                                          args, expected):
    """On a 2-core CPU machine (pinned, whatever this host has), a domain that comes out empty for the trials'
    resources, or native choices the CPU does not have, are one line and exit 2; Ray is never started."""
    import tuner.search._ray_env as ray_env
    import tuner.search._runner as runner

    monkeypatch.setattr(runner, "local_cluster", lambda: ClusterInfo(2, 0, 1, 2, 0))
    monkeypatch.setattr(ray_env, "start_local_ray", lambda *a, **k: pytest.fail("Ray was started"))
    rc, _, err, path, reports = space_search.run(space, *args)
    err = err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert str(path) in err[0] and expected in err[0], err[0]
    assert not reports.exists()


def test_spaces_show_says_what_the_space_becomes_on_this_machine(capsys, monkeypatch):
    import tuner.search

    monkeypatch.setattr(tuner.search, "local_cluster", lambda: ClusterInfo(6, 0, 1, 6, 0))  # as the CLI asks for it
    assert main(["spaces", "show", "amp_loader"]) == 0
    out = capsys.readouterr().out
    assert "# on this machine (6 CPUs per trial, cpu" in out
    from tuner.device import cpu_native_precisions

    native = ", ".join(cpu_native_precisions())  # fp32, and bf16 where this CPU computes it natively
    assert "#   num_workers          int [0, 6]" in out and f"#   precision            one of {native}\n" in out


@pytest.mark.parametrize("fault, needle, resume", [
    ("file", "is a file, not a folder", False),
    ("full", "No space left on device; free some space", False),
    ("full", "No space left on device; free some space", True),
    ("read-only", "Read-only file system; pass a folder you can write to", False),
    ("read-only", "Read-only file system; pass a folder you can write to", True),
])
def test_a_study_folder_that_cannot_be_written_is_one_line_before_ray_starts(make_study, tmp_path, capsys,
                                                                             monkeypatch, fault, needle, resume):
    """A --reports-dir that is a file, a full disk, a read-only folder (planted: the probe's write fails as the
    file system would): exit 2, one line naming the folder, Ray never started, nothing on disk changed."""
    import errno
    import os

    import tuner.search._ray_env as ray_env

    monkeypatch.setattr(ray_env, "start_local_ray", lambda *a, **k: pytest.fail("Ray was started"))
    monkeypatch.setattr(ray_env, "join_ray", lambda *a, **k: pytest.fail("Ray was started"))
    reports = make_study("taken") if resume else tmp_path / "reports"
    if resume:  # a study a search could resume: its stored space is one tuner reads
        from tuner.space import load_space
        from tuner.search._storage import default_storage, open_optuna_study, open_storage

        meta_path = reports / "taken" / "study.json"
        meta = json.loads(meta_path.read_text())
        meta["space_def"] = load_space("amp_loader").definition()
        meta["storage"] = default_storage(reports / "taken")
        meta["id"] = "0" * 32  # and its own database, holding that study (a lost one is refused before this check)
        open_optuna_study(open_storage(meta["storage"]), "taken", meta["id"], ["maximize", "minimize"])
        meta_path.write_text(json.dumps(meta))
    if fault == "file":
        reports.write_text("not a folder")
    else:
        code = errno.ENOSPC if fault == "full" else errno.EROFS

        def refused(fd, data):
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(os, "write", refused)
    before = snapshot(tmp_path)
    argv = ["--study", "taken", "--resume"] if resume else ["--space", "amp_loader"]
    rc = main(["search", *argv, "--reports-dir", str(reports)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("tuner: error: the study folder ") and needle in err[0], err[0]
    assert snapshot(tmp_path) == before


def test_race_margin_and_objective_reach_the_plan_and_study_json_and_the_cli_says_it_overrides_the_space(
        tmp_path, monkeypatch, capsys):
    """#34: --race-margin is the race's margin (study.json's scheduler keeps it; 1.5 when not given), and
    --objective time_to_target is the CLI twin of the space's objectives: [time_to_target], over the space's, said
    in a note; without a target it is one line, exit 2, as the space's is."""
    import tuner.search
    from tests.helpers.userworkloads import PLANTED_STEPS, write
    from tuner.search._objectives import objective_note
    from tuner.search._plan import plan_search

    seen = []

    def parsed(opts, **kw):  # the options the CLI made; the search itself is not what is tested here
        seen.append(opts)
        raise SystemExit(0)

    monkeypatch.setattr(tuner.search, "run_search", parsed)
    work = write(tmp_path / "proj", PLANTED_STEPS)
    space = tmp_path / "bs.yaml"
    space.write_text("objectives: [{metric: throughput, direction: max}, {metric: quality}]\n"
                     "defaults: {budget: {samples: 256}, trials: 3}\n"
                     "params: {batch_size: {type: categorical, choices: [8, 32]}, precision: fp32, num_workers: 0}\n")
    base = ["search", "--space", str(space), "--workload", f"{work}:make", "--reports-dir", str(tmp_path / "r")]
    for extra in (["--scheduler", "race", "--target", "10", "--race-margin", "2.5", "--objective", "time_to_target"],
                  ["--scheduler", "race", "--target", "10", "--objective", "throughput,quality"]):
        with pytest.raises(SystemExit):
            main([*base, *extra])
    race, pair = (plan_search(o) for o in seen)
    assert race.scheduler.to_json()["margin"] == 2.5 and pair.scheduler.to_json()["margin"] == 1.5
    assert [(o.metric, o.direction) for o in race.objectives] == [("time_to_target", "minimize")]
    assert objective_note(race) == ("--objective time_to_target overrides the space's objectives (throughput, "
                                    "quality)")
    assert [o.metric for o in pair.objectives] == ["throughput", "quality"] and objective_note(pair) is None
    monkeypatch.undo()
    capsys.readouterr()
    rc = main([*base, "--objective", "time_to_target"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--objective time_to_target needs a target: give --target" in err[0], err
    assert not (tmp_path / "r" / "bs").exists()


def test_a_study_whose_objective_no_trial_read_says_so_not_no_complete_trial_yet(make_study, tmp_path, capsys,
                                                                                  monkeypatch):
    """Issue 51: 8 complete trials, none with a time to target, ended "Pareto front: empty (no complete trial
    yet)" and "target: val_loss <= (the baseline's, not set yet)". The summary says which objective none read, and
    that the target was never set."""
    import tuner.search
    from tuner.analysis import Study
    from tuner.search._runner import SearchSummary
    from tuner.study import StudyFolder

    folder = StudyFolder(make_study("tt") / "tt")
    from tuner.study import StudyMeta

    meta = folder.read_meta()
    folder.write_meta(StudyMeta.model_validate({**meta.model_dump(), **{
        "objectives": [{"metric": "throughput", "direction": "maximize"},
                       {"metric": "time_to_target", "direction": "minimize"}],
        "target": {"metric": "fid", "direction": "minimize", "value": None, "eval_every_samples": 1600,
                   "source": "baseline"}}}))
    study = Study.load(folder)
    done = sum(1 for r in study.records if r.complete)
    assert done > 0
    summary = SearchSummary(study, ran=len(study.records), total=len(study.records), seconds=1.0)
    monkeypatch.setattr(tuner.search, "run_search", lambda opts, console=None, view=None: summary)
    rc = main(["search", "--space", "amp_loader", "--reports-dir", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"Pareto front: empty ({done} complete trials, none with a finite time_to_target)" in out
    assert "no complete trial yet" not in out and "not set yet" not in out
    assert "target: not set (the baseline's reference run read no fid)" in out
