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
