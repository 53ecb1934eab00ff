"""run_trial with a target (issue 34): evaluations every K samples outside the timed windows, the quality curve,
time and samples to target, the trial stopping at the first evaluation that meets it, and `not reached`."""

from tuner.config import parse_config
from tuner.train import run_trial
from tests.helpers.userworkloads import PLANTED_CURVE, write


def cfg(path, value, samples=400):
    # PLANTED_CURVE's val_loss is 1000 / (1 + samples trained): it meets 10 from 99 samples on
    return parse_config({"workload": f"{path}:make", "budget": {"samples": samples},
                         "params": {"batch_size": 8, "device": "cpu"},
                         "measure": {"warmup_steps": 1, "windows": 3, "window_min_seconds": 0, "ceiling_seconds": 0},
                         "target": {"metric": "val_loss", "value": value, "eval_every_samples": 32}})


def test_a_trial_stops_at_the_first_evaluation_that_meets_the_target(tmp_path):
    path = write(tmp_path, PLANTED_CURVE)
    res = run_trial(cfg(path, 10.0), cache_dir=tmp_path / "cache")
    assert res.state == "complete"
    curve = res.quality_curve
    assert curve and all(abs(q - 1000 / (1 + s)) < 1e-9 for s, _, q in curve)  # read at the samples it says
    assert curve[-1][2] <= 10.0 and all(q > 10.0 for _, _, q in curve[:-1])  # the first one that meets it ...
    assert curve[-1][0] == res.metrics["samples"] < 400  # ... ends training, and the figure is read between the
    # two evaluations around the crossing (issue 51): 99 samples on the curve, 100 read linearly, not 128
    assert curve[-2][0] < res.metrics["samples_to_target"] <= curve[-1][0] and res.metrics["samples_to_target"] < 110
    assert curve[-2][1] < res.metrics["time_to_target"] <= curve[-1][1]
    # and the estimate from its measured speed beside it: samples to target / median samples/s of the windows
    assert res.metrics["estimated_time_to_target"] == res.metrics["samples_to_target"] / res.throughput
    assert res.metrics["target_eval_seconds"] >= 0
    assert res.metrics["val_loss"] == curve[-1][2]  # its quality is the evaluation that met the target


def test_a_trial_that_meets_the_target_before_its_fewest_windows_reads_them_before_it_stops(tmp_path):
    """Stopped at one window, its throughput was suspect, and so were its re-runs': a study ranking throughput
    passed over the config that reached the target soonest (resnet, 2026-11-28)."""
    path = write(tmp_path, PLANTED_CURVE)
    quick = cfg(path, 40.0)  # met at the first evaluation: 1000 / (1 + 32) <= 40
    quick.measure = quick.measure.model_copy(update={"windows": 5, "min_windows": 3})
    reports = _Collect(rungs=[300])  # a rung past the target: none closes there
    res = run_trial(quick, cache_dir=tmp_path / "cache", reporter=reports)
    assert res.state == "complete" and len(res.windows) == 3  # the fewest a reading has, not one
    assert len(res.quality_curve) == 1  # no evaluation after the one that met it
    assert res.metrics["samples_to_target"] == res.quality_curve[0][0] < res.metrics["samples"] < 400
    ttt = res.metrics["time_to_target"]
    assert ttt == res.quality_curve[0][1]
    # the windows after it say when it met the target, so the race (tuner.schedule.race) does not stop them
    assert [w.time_to_target for w in reports.windows] == [None, ttt, ttt] and not reports.rung_reports


class _Collect:
    def __init__(self, rungs):
        self.rungs, self.windows, self.rung_reports = rungs, [], []

    def window(self, report):
        self.windows.append(report)

    def rung(self, report):
        self.rung_reports.append(report)


def test_a_trial_whose_budget_ends_first_is_not_reached_with_its_curve_and_figures(tmp_path):
    path = write(tmp_path, PLANTED_CURVE)
    res = run_trial(cfg(path, 0.5), cache_dir=tmp_path / "cache")
    assert res.state == "not reached" and res.error is None
    assert res.metrics["time_to_target"] is None and res.metrics["samples_to_target"] is None
    assert res.throughput is not None and res.metrics["val_loss"] > 0.5  # measured in full, not a failure
    samples = [s for s, _, _ in res.quality_curve]
    assert len(samples) >= 3 and samples == sorted(samples) and samples[-1] <= res.metrics["samples"]
    seconds = [t for _, t, _ in res.quality_curve]
    assert seconds == sorted(seconds)


def test_a_trial_past_the_targets_cap_without_meeting_it_ends_not_reached_there(tmp_path):
    path = write(tmp_path, PLANTED_CURVE)
    capped = cfg(path, 0.5)  # never met; a cap shorter than any evaluation's training time: the first one ends it
    capped.target = capped.target.model_copy(update={"cap_seconds": 1e-9})
    res = run_trial(capped, cache_dir=tmp_path / "cache")
    assert res.state == "not reached" and res.error is None  # a state, never an error
    assert len(res.quality_curve) == 1 and res.metrics["samples"] < 400  # stopped there, not at its budget
    assert res.metrics["time_to_target"] is None and res.throughput is not None


def test_the_cap_counts_only_evaluations_that_miss_the_target_at_or_past_it():
    from tuner.config import Target
    from tuner.target import CurvePoint, past_cap

    target = Target(metric="q", value=1.6, eval_every_samples=100, cap_seconds=9.0)
    assert not past_cap(CurvePoint(100, 8.9, 2.0), target)  # before the cap
    assert past_cap(CurvePoint(200, 9.0, 2.0), target)  # at it, still above the target
    assert not past_cap(CurvePoint(200, 12.0, 1.5), target)  # met: reached, whatever the time
    assert not past_cap(CurvePoint(200, 99.0, 2.0), target.model_copy(update={"cap_seconds": None}))  # the budget


# Scores its validation batches; its loss is the curve's only on an 8-sample subset, 1000 higher on the whole split
# (32 samples), so only evaluations of the subset can meet a target of 10.
SUBSET = PLANTED_CURVE.replace('''def evaluate(models, val_batches):
    for _ in val_batches:
        pass
    return {"val_loss": 1000.0 / (1.0 + float(models["net"].seen))}''', '''def evaluate(models, val_batches):
    n = sum(len(b[0]) for b in val_batches)
    said = tuner.trial_context().eval_subset  # the subset's size while it scores one, None on the whole split
    return {"val_loss": 1000.0 / (1.0 + float(models["net"].seen)) + (0.0 if n == said == 8 else 1000.0),
            "scored": float(n)}''').replace(
    '''quality=("val_loss", "min"))''', '''quality=("val_loss", "min"), target_eval_samples=8)''')


def test_a_workload_can_evaluate_a_fixed_subset_while_training_and_the_whole_split_at_the_end(tmp_path):
    """Issue 2 of #51: a workload's `target_eval_samples` makes the time-to-target evaluations score a fixed,
    seeded subset of the validation split (cheap, as nanoGPT's estimate_loss), and the trial's quality at the end
    the whole split."""
    assert SUBSET.count("target_eval_samples=8") == 1 and "n == said == 8" in SUBSET
    path = write(tmp_path, SUBSET)
    res = run_trial(cfg(path, 10.0), cache_dir=tmp_path / "cache")
    assert res.state == "complete" and res.metrics["samples_to_target"] is not None  # met on the subset ...
    assert all(q < 1000 for _, _, q in res.quality_curve)  # every evaluation while training scored the 8, told so
    assert res.metrics["scored"] == 32 and res.metrics["val_loss"] > 1000  # ... the quality is the whole split's


def test_the_subset_is_the_same_for_every_trial():
    import torch
    from torch.utils.data import TensorDataset

    import tuner
    from tuner.train.trial import target_subset

    val = TensorDataset(torch.arange(100).float())
    work = tuner.Workload(models={"m": lambda: torch.nn.Linear(1, 1)}, datasets=lambda: (val, val),
                          loss=lambda m, b: b[0].sum(), target_eval_samples=10)
    a, b = target_subset(work, val), target_subset(work, val)
    assert len(a) == 10 and a.indices == b.indices and a.indices != list(range(10))
    whole = tuner.Workload(models={"m": lambda: torch.nn.Linear(1, 1)}, datasets=lambda: (val, val),
                           loss=lambda m, b: b[0].sum())
    assert target_subset(whole, val) is val


def test_the_builtin_gan_reads_the_fid_of_its_subsets_size_while_training_and_fid_samples_at_the_end(tmp_path,
                                                                                                monkeypatch):
    """The built-ins ask for a subset (issue 51: K fine enough for 10 evaluations before the target): the GAN's
    time-to-target evaluations generate target_eval_samples images for their FID, its quality at the end
    quality.fid_samples, and only that one writes the sample grid."""
    import tuner.measure.quality as quality_mod
    from tests.helpers.datafiles import write_tree

    asked, original = [], quality_mod.evaluate_gan

    def counted(generator, datasets, quality, cache_dir, device, sample_grid=None):
        asked.append((quality.fid_samples, sample_grid is not None))
        return original(generator, datasets, quality, cache_dir, device, sample_grid=sample_grid)

    monkeypatch.setattr(quality_mod, "evaluate_gan", counted)
    data = write_tree(tmp_path / "data", {"a": 12, "b": 12})  # tiny: the FID classifier trains in a blink
    config = parse_config({"workload": "gan", "dataset": f"folder:{data}", "budget": {"samples": 48},
                           "workload_options": {"image_size": 16, "target_eval_samples": 20},
                           "params": {"batch_size": 8, "device": "cpu"}, "quality": {"fid_samples": 40},
                           "measure": {"warmup_steps": 1, "windows": 3, "window_min_seconds": 0, "ceiling_seconds": 0},
                           "target": {"metric": "fid", "value": 1e-9, "eval_every_samples": 16}})
    res = run_trial(config, cache_dir=tmp_path / "cache", out_dir=tmp_path / "out")
    assert res.state == "not reached" and len(res.quality_curve) >= 2
    assert asked[-1] == (40, True) and res.metrics["fid_samples"] == 40  # the end: fid_samples, the grid
    assert asked[:-1] == [(20, False)] * len(res.quality_curve)  # every evaluation while training: the subset's
