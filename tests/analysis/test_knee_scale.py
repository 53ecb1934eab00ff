"""The knee among confirmed trials is scaled over the whole study (issue 52 item 7, found by
benchmarks/stability_sim.py): over the confirmed baseline and one confirmed trial alone a two-point front is always
a tie, which throughput settled, so a trial 27% better on the loss lost to a baseline 4% faster and the confirmation
made the pick hold less often than no confirmation."""

from __future__ import annotations

from tests.helpers.records import write_record, write_rerun
from tuner.analysis import Study, choose, decide
from tuner.study import Objective, Rerun, StudyFolder, StudyMeta, TrialRecord

OBJ = [Objective(metric="throughput", direction="max"), Objective(metric="val_loss", direction="min")]
# the search's readings: throughput 800-1600, loss 0.10-0.20; trials 0 (the baseline) and 3 confirmed
SEARCH = {0: (1000.0, 0.170), 1: (1600.0, 0.200), 2: (800.0, 0.150), 3: (960.0, 0.124), 4: (900.0, 0.100),
          5: (1200.0, 0.190)}
RERUNS = {0: [(1000.0, 0.170), (1002.0, 0.169)], 3: [(960.0, 0.124), (962.0, 0.123)]}


def planted(tmp_path) -> Study:
    folder = StudyFolder(tmp_path / "s")
    folder.write_meta(StudyMeta(name="s", objectives=OBJ, baseline={"trial": 0}))
    for n, (thr, loss) in SEARCH.items():
        write_record(folder, TrialRecord(trial=n, state="complete", metrics={"throughput": thr, "val_loss": loss}))
    for n, runs in RERUNS.items():
        for k, (thr, loss) in enumerate(runs):
            write_rerun(folder, n, Rerun(repeat=k, round=0, state="complete",
                                         metrics={"throughput": thr, "val_loss": loss}))
    return Study.load(folder)


def test_the_confirmed_knee_weighs_a_27pct_better_loss_over_4pct_more_throughput(tmp_path):
    study = planted(tmp_path)
    assert decide(study, "knee").pick.trial == 3
    confirmed = [study.trial(0), study.trial(3)]
    # over the two alone both sit at a corner of their own range: a tie that the faster one takes
    assert choose(confirmed, OBJ, "knee", value=study.value).trial == 0
    assert choose(confirmed, OBJ, "knee", value=study.value, scale=study.records).trial == 3


def test_a_baseline_that_trades_little_loss_for_much_throughput_stays_the_pick(tmp_path):
    study = planted(tmp_path)
    # trial 3 now 40% slower for a 2% better loss: the knee over the study's range keeps the baseline
    for k in range(2):
        write_rerun(study.folder, 3, Rerun(repeat=k, round=0, state="complete",
                                           metrics={"throughput": 600.0 + k, "val_loss": 0.166}))
    assert decide(Study.load(study.folder), "knee").pick.trial == 0
