"""A multi-GPU trial's path (Tune trial -> Ray Train TorchTrainer -> engine under DDP), smoke-tested on the CPU
with two gloo workers, in the default run (issue 57: they ran only with TUNER_SLOW_TESTS=1, and one of them failed
unseen). Each test is one Ray Train run, whose start (a controller and two workers, their process group) dominates:
about 35-60 s each on 2 cores, so the tests are as few as what they check allows, three: a trial that goes on at
its rungs (rank 0's metrics to Tune, every rank closing each rung alike, the top rung's record), one a rung stops
on every rank, and one Tune stops at the run's end. What only real GPUs can confirm: NCCL, one GPU per worker, and
the DDP throughput scaling."""

from __future__ import annotations

import time

import pytest

from tuner.space import parse_space
from tuner.search._protocol import final_record
from tuner.search._trial import TrialSetup
from tuner.search._trainable import trainable
from tuner.search._scheduler import TuneScheduler
from tuner.analysis import read_records

pytestmark = pytest.mark.ray

CONTEXT = {"cpus": 2, "gpus": 0, "device": "cpu", "precisions": ["fp32"], "tf32_available": False}


def ddp_setup(tmp_path, samples: int, **measure):
    """One batch-16 CNN trial on synthetic data, run by two gloo workers of half a CPU each (1 CPU for the Tune
    trial + 2 x 0.5: fits in the test session's 2). Its effective batch is 16 too: without effective_batch the
    space would keep the CNN's own 64 as 16 x 4 accumulation, and a step of 128 samples over both ranks runs past
    the rungs' 128 and 384 within its first window."""
    space = parse_space({
        "objectives": {"cnn": [{"metric": "throughput", "direction": "max"}, {"metric": "loss", "direction": "min"}]},
        "params": {"batch_size": {"type": "categorical", "choices": [16]}, "num_workers": 0},
        "effective_batch": {"type": "int", "low": 16, "high": 16},
    }, source="ddp.yaml", name="ddp")
    base = {"workload": "cnn", "dataset": "synthetic", "budget": {"samples": samples}, "gpus": 2,
            "params": {"device": "cpu"}}
    if measure:
        base["measure"] = measure
    return TrialSetup(space=space, objectives=space.objectives_for("cnn"), study_dir=str(tmp_path / "study"),
                      cache_dir=str(tmp_path / ".cache"), base=base, ddp_workers=2, ddp_use_gpu=False,
                      ddp_cpus_per_worker=0.5)


def fit(setup, tmp_path, **tune_config):
    """Run the trainable under Tune (one sample) and return its ResultGrid."""
    from ray import tune

    fn = tune.with_resources(tune.with_parameters(trainable, setup=setup), {"cpu": 1})
    return tune.Tuner(fn, tune_config=tune.TuneConfig(num_samples=1, **tune_config),
                      run_config=tune.RunConfig(storage_path=str(tmp_path / "ray"), verbose=0)).fit()


# --- a DDP trial in a study under --scheduler asha: the searcher records, the scheduler decides -------------------


def ddp_study(tmp_path, setup, samples: int, rungs: list[float] | None = None):
    """The study folder and the run's searcher (it records every trial) for `setup`'s one-point space."""
    import optuna

    from tuner.config import Budget
    from tuner.search._searcher import StudySearcher
    from tuner.search._storage import open_storage
    from tuner.study import StudyFolder, StudyMeta

    folder = StudyFolder(tmp_path / "study")
    folder.path.mkdir(parents=True)
    folder.write_meta(StudyMeta(name="ddp", objectives=setup.objectives, params=["batch_size"]))
    searcher = StudySearcher(setup.space.resolve(CONTEXT), setup.objectives, context=CONTEXT,
                             budget=Budget(samples=samples), sampler=optuna.samplers.RandomSampler(seed=0),
                             storage=open_storage(f"sqlite:///{folder.path / 'study.db'}"), study_name="ddp",
                             study_dir=folder.path, rungs=rungs)
    return folder, searcher


def asha_study(tmp_path, planted: tuple[float, float]):
    """A study folder, its searcher (rungs at 128 and 384 samples) and a ParetoASHA holding two trials planted at
    rung 0 with (throughput, loss) `planted`: ones that beat every real trial stop it there, ones every real trial
    beats let it go on."""
    from tuner.schedule import ParetoASHA, RungEntry

    # Windows of 3 steps whatever their seconds (a 0.25 s minimum holds more steps on a fast machine), so the
    # first window ends at 160 samples (2 warm-up steps and 3 timed ones of 2 x 16), between the rungs.
    setup = ddp_setup(tmp_path, 384, warmup_max_steps=2, window_min_seconds=0)
    folder, searcher = ddp_study(tmp_path, setup, 384, rungs=[128.0, 384.0])
    scheduler = ParetoASHA(setup.objectives, [128.0, 384.0], 3.0,
                           entries=[RungEntry(f"p{i}", 0, planted, True) for i in range(2)])
    return setup, folder, searcher, scheduler


def cpus_back(ray, expected: float) -> bool:
    """Every CPU free again (the trial's and both workers'), within a minute: no rank outlived its trial."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if ray.available_resources().get("CPU", 0) >= expected:
            return True
        time.sleep(0.5)
    return False


def test_ddp_trial_stopped_at_a_rung_stops_every_rank_and_is_recorded_stopped_and_pruned(ray_session, tmp_path):
    """Two planted trials beat it at rung 0 (eta 3: one of three goes on): the scheduler stops it when rank 0's
    rung report arrives. Every rank ends with the trial (no hang, the CPUs come back), the record is `stopped` at
    rung 0 with what it measured, and Optuna has it PRUNED."""
    setup, folder, searcher, scheduler = asha_study(tmp_path, planted=(1e9, 0.0))
    total = ray_session.cluster_resources()["CPU"]
    grid = fit(setup, tmp_path, search_alg=searcher, scheduler=TuneScheduler(scheduler, setup.objectives))
    assert grid[0].error is None, grid[0].error
    assert scheduler.decisions[-1][1:] == (0, False)
    [record] = read_records(folder)
    assert record.state == "stopped" and record.rung == 0 and record.error is None
    assert 128 <= record.measured_at < 384 and record.throughput > 0 and record.get("loss") is not None
    [trial] = searcher.study.trials
    assert trial.state.name == "PRUNED" and trial.user_attrs["record"]["state"] == "stopped"
    assert cpus_back(ray_session, total), ray_session.available_resources()


def test_ddp_trial_that_goes_on_at_its_rungs_reports_rank_zero_and_completes_at_the_top_rung(ray_session, tmp_path):
    """Under a rung scheduler every rank reports each window and each rung alike (Train V2 reports are
    collective) and agrees on when a rung closes; rank 0 evaluates and its metrics reach Tune (a deadlock here
    would time the trial out). Trials the real one beats at rung 0 let it go on to complete at the top rung."""
    setup, folder, searcher, scheduler = asha_study(tmp_path, planted=(1e-9, 1e9))
    total = ray_session.cluster_resources()["CPU"]
    grid = fit(setup, tmp_path, search_alg=searcher, scheduler=TuneScheduler(scheduler, setup.objectives))
    result = grid[0]
    assert result.error is None, result.error
    trial_key = str(searcher.study.trials[0].number)
    assert [(t, r, on) for t, r, on in scheduler.decisions if t == trial_key] == [(trial_key, 0, True)]
    reported = final_record(result.metrics).to_json()  # what rank 0 reported to Tune
    assert reported["trial"] == searcher.study.trials[0].number and reported["state"] == "complete"
    assert reported["samples"] >= 384  # both ranks' samples
    assert reported["throughput"] > 0 and result.metrics["objective_throughput"] == reported["throughput"]
    [record] = read_records(folder)
    assert record.state == "complete" and record.rung == 1 and record.measured_at >= 384, record.error
    assert record.get("loss") is not None  # rank 0's evaluation at the top rung
    [trial] = searcher.study.trials
    assert trial.state.name == "COMPLETE" and trial.values[0] == record.throughput
    assert cpus_back(ray_session, total), ray_session.available_resources()


def test_ddp_trial_that_tune_stops_at_the_run_s_end_gives_its_workers_back(ray_session, tmp_path):
    """Ctrl-C, SIGTERM and --study-seconds end the Tune run with the trial still training: Tune kills the trial's
    actor, its workers die with it, and their placement group is released when the run ends (here a stopper ends
    the run at the trial's first report, which names the group before the workload is built)."""
    from ray import tune
    from ray.tune.stopper import Stopper

    from tuner.search._protocol import workers_of
    from tuner.search._recorder import StudyRecorder

    class EndRun(Stopper):
        def __init__(self):
            self.seen = False

        def __call__(self, trial_id, result):
            self.seen = self.seen or workers_of(result) is not None
            return False

        def stop_all(self):
            return self.seen

    setup = ddp_setup(tmp_path, 100_000)
    folder, searcher = ddp_study(tmp_path, setup, 100_000)
    total = ray_session.cluster_resources()["CPU"]
    fn = tune.with_resources(tune.with_parameters(trainable, setup=setup), {"cpu": 1})
    tune.Tuner(fn, tune_config=tune.TuneConfig(num_samples=1, search_alg=searcher),
               run_config=tune.RunConfig(storage_path=str(tmp_path / "ray"), verbose=0, stop=EndRun(),
                                         callbacks=[StudyRecorder(folder.path, searcher=searcher)])).fit()
    assert cpus_back(ray_session, total), ray_session.available_resources()
    assert read_records(folder) == []  # stopped before its last report: nothing measured, nothing recorded
