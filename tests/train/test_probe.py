"""tuner.train.probe: a probe builds its models as a trial does (tuner.train.trial.build_models), so the
channels_last reading runs on models in channels_last and the defaults' readings on the workload's own."""

import torch

import tuner.train.probe as train_probe
from tuner.config import TrialConfig


def test_the_channels_last_reading_runs_on_nhwc_models_and_the_defaults_on_the_workloads_own(tmp_path, monkeypatch):
    read = []

    def planted(point, device, workload, train_set, models, seconds, cache, *, kinds, **_):
        convs = [p for m in models.values() for p in m.parameters() if p.dim() == 4]
        nhwc = bool(convs) and all(p.is_contiguous(memory_format=torch.channels_last) for p in convs)
        if kinds == ("compute",):
            read.append((point.params.channels_last, nhwc))
        return {kinds[0]: 1000.0}

    monkeypatch.setattr(train_probe, "ceilings", planted)
    monkeypatch.setattr(train_probe, "measure_ceiling", lambda *a, **k: None)  # the untimed warm-up
    cfg = TrialConfig(workload="cnn", dataset="synthetic", workload_options={"image_size": 16},
                      budget={"samples": 64}, params={"batch_size": 16, "device": "cpu"}, quality={"enabled": False})
    found = train_probe.probe_ceilings(cfg, [{"num_workers": 0}], 0.5, None, tmp_path,
                                       speeds=[{}, {"channels_last": True}])
    # the defaults, channels_last, the defaults again (and, channels_last read equal to them, both once more: issue
    # 52 item 5): each on models in the format its params ask for
    assert read == [(False, False), (True, True), (False, False), (True, True), (False, False)]
    assert found["image"] is True and found["computes"] == [1000.0, 1000.0]


def _cut_below(need, step, read):
    """A planted `ceilings`: a compute reading whose deadline is under `need` is cut (the note carries the step
    it timed, as compute_ceiling's CeilingSkipped does); `read` records each reading's deadline."""
    from tuner.train.ceilings import CeilingNote

    def planted(point, device, workload, train_set, models, seconds, cache, *, kinds, notes=None, **_):
        if kinds == ("compute",):
            read.append((dict(point.params.model_dump(include={"channels_last"})), seconds))
            if seconds < need:
                if notes is not None:
                    notes["compute"] = CeilingNote(f"cut at its {seconds:.3g} s deadline", step_seconds=step)
                return {"compute": None}
        return {kinds[0]: 1000.0}

    return planted


def _cfg():
    return TrialConfig(workload="cnn", dataset="synthetic", workload_options={"image_size": 16},
                       budget={"samples": 64}, params={"batch_size": 16, "device": "cpu"}, quality={"enabled": False})


def test_a_compute_reading_cut_at_its_deadline_is_read_again_with_one_fitted_to_its_step(tmp_path, monkeypatch):
    """The default study's probes at the GAN's own batch 64 (a 0.09 s step, about 0.7 s of a 0.75 s reading) were
    cut in one run of three: the batch size read nothing, and the environment probes, read there, were skipped.
    A cut reading is read again with a deadline fitted to its step, and the batch size's later readings keep it."""
    from tuner.measure.ceiling import fitted_seconds, stable_measure

    read = []
    monkeypatch.setattr(train_probe, "ceilings", _cut_below(need=1.0, step=0.1, read=read))
    monkeypatch.setattr(train_probe, "measure_ceiling", lambda *a, **k: None)
    found = train_probe.probe_ceilings(_cfg(), [{"num_workers": 0}], 0.75, None, tmp_path,
                                       speeds=[{}, {"channels_last": True}], max_seconds=3.0)
    fitted = fitted_seconds(0.1, stable_measure(0.75, _cfg().measure))
    assert 1.0 <= fitted < 3.0
    assert [s for _, s in read][:2] == [0.75, fitted]  # cut, then read again at the fitted deadline
    assert all(s == fitted for _, s in read[1:])  # every later reading here keeps it
    assert found["computes"] == [1000.0, 1000.0] and found["seconds"] == fitted


def test_a_cut_reading_is_read_again_at_most_at_the_cap_and_without_one_not_at_all(tmp_path, monkeypatch):
    read = []
    # a 0.35 s step: a warm-up step and two windows of three need 2.45 s, which the cap holds, if without the margin
    monkeypatch.setattr(train_probe, "ceilings", _cut_below(need=2.45, step=0.35, read=read))
    monkeypatch.setattr(train_probe, "measure_ceiling", lambda *a, **k: None)
    found = train_probe.probe_ceilings(_cfg(), [{"num_workers": 0}], 0.75, None, tmp_path,
                                       speeds=[{}, {"channels_last": True}], max_seconds=3.0)
    assert [s for _, s in read][:2] == [0.75, 3.0] and found["computes"] == [1000.0, 1000.0]
    read.clear()
    # a 1 s step needs 7 s, more than the cap holds: not read again (it would be cut again), nothing else read
    monkeypatch.setattr(train_probe, "ceilings", _cut_below(need=7.0, step=1.0, read=read))
    found = train_probe.probe_ceilings(_cfg(), [{"num_workers": 0}], 0.75, None, tmp_path,
                                       speeds=[{}, {"channels_last": True}], max_seconds=3.0)
    assert [s for _, s in read] == [0.75] and found["compute"] is None and found["seconds"] == 0.75
    read.clear()
    found = train_probe.probe_ceilings(_cfg(), [{"num_workers": 0}], 0.75, None, tmp_path,
                                       speeds=[{}, {"channels_last": True}])
    assert [s for _, s in read] == [0.75] and found["compute"] is None and found["seconds"] == 0.75
