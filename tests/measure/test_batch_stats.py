"""Batch-statistics detection (issue 40): where the split of an effective batch changes what is learned."""

from torch import nn

from tuner.measure.batch_stats import batch_statistics_layers, split_note


class _Block(nn.Module):
    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.norm = norm


def test_a_model_without_batch_statistics_splits_exactly():
    plain = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 2))
    grouped = nn.Sequential(nn.Conv2d(3, 4, 3), nn.GroupNorm(2, 4), nn.InstanceNorm2d(4))
    assert batch_statistics_layers(plain, grouped) == []
    assert split_note([]) is None


def test_batchnorm_at_the_top_and_inside_a_submodule_is_found():
    top = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))
    assert batch_statistics_layers(top) == ["1 (BatchNorm1d)"]
    nested = nn.Sequential(nn.Linear(3, 3), nn.Sequential(_Block(nn.BatchNorm2d(4))))
    assert batch_statistics_layers(nested) == ["1.0.norm (BatchNorm2d)"]
    note = split_note(batch_statistics_layers(nested))
    assert "1.0.norm (BatchNorm2d)" in note and "learning knob" in note


def test_sync_batchnorm_and_tracked_instancenorm_count_and_several_models_are_named():
    sync = nn.Sequential(nn.Linear(4, 4), nn.SyncBatchNorm(4))
    tracked = _Block(nn.InstanceNorm2d(4, track_running_stats=True))
    found = batch_statistics_layers(None, sync, tracked)
    assert found == ["model 0: 1 (SyncBatchNorm)", "model 1: norm (InstanceNorm2d)"]


def test_the_built_in_models_have_batchnorm():
    from tuner.models.cnn import SmallCNN
    from tuner.models.dcgan import Discriminator, Generator

    assert batch_statistics_layers(SmallCNN())
    assert batch_statistics_layers(SmallCNN(batch_norm=False)) == []
    assert batch_statistics_layers(Generator(), Discriminator())
