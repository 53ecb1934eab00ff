"""`tuner export --horizon` end to end on a tiny real run (issue 51, item 6): the built-in CNN on digits at 8x8,
trials of 384 samples, a horizon of 1,024, 2 seeds each: the runs train through tuner.train.run_trial (what
`tuner train` runs), each in a process of its own as a study's trials and re-runs do (never the CLI's, so no state
is shared between runs), evaluate every K samples, and the check lands in the study folder."""

import json
import os

from tests.cli.test_cli_report import run
from tuner.config import Budget, Measure, Params, Target, TrialConfig, dump_config
from tuner.study import HORIZON_FILE, StudyFolder


def test_a_tiny_real_horizon_check(make_study, capsys):
    from tuner.analysis import read_records
    from tests.helpers.records import write_record

    reports = make_study(kind="cnn")
    folder = StudyFolder(reports / "gan-demo")  # make_study's default name, whatever its kind
    target = Target(metric="loss", direction="minimize", value=2.0, eval_every_samples=256, source="--target")
    folder.write_meta(folder.read_meta().model_copy(update={"target": target.model_dump(),
                                                            "baseline": {"trial": 0, "params": {}}}))
    for rec in read_records(folder):
        cfg = TrialConfig(workload="cnn", dataset="digits", workload_options={"image_size": 8, "width": 4},
                          budget=Budget(samples=384), params=Params(batch_size=rec.params["batch_size"], device="cpu",
                                                                    num_workers=0),
                          measure=Measure(warmup_steps=1, windows=2), target=target)
        rec.config = dump_config(cfg)
        rec.metrics.update(time_to_target=2.0 if rec.trial == 0 else 1.0, samples_to_target=256)
        write_record(folder, rec)
    code, out, err = run(capsys, "export", folder.path.name, "--reports-dir", reports, "--trial", "1",
                         "--horizon", "1024samples", "--horizon-seeds", "2")
    assert code == 0, err
    assert "horizon: will run 4 runs" in err and "horizon: run 4/4: the baseline (trial 0)" in err
    assert all(f"horizon: run {i}/4 trained to the horizon" in err for i in range(1, 5))  # as each run ends
    check = json.loads((folder.path / HORIZON_FILE).read_text())
    # each run in a process of its own: none in this (the CLI's) process, no two in one
    pids = [r["pid"] for r in check["runs"]]
    assert len(pids) == 4 and all(isinstance(p, int) for p in pids)
    assert os.getpid() not in pids and len(set(pids)) == 4
    assert [r["side"] for r in check["runs"]] == ["pick", "baseline"] * 2
    assert check["word"] in ("holds", "shrinks", "reverses") and check["study_ratio"] == 2.0
    assert all(r["state"] in ("complete", "not reached") for r in check["runs"])
    assert all(r["trained_samples"] >= 768 for r in check["runs"])  # trained past the trials' 384 samples
    assert "horizon check: the speed-up " in out
