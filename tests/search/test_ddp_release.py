"""A DDP trial's workers' placement group is given back on every way the trial ends (tuner.search._ddp): here a
real placement group stands for the workers (Ray Train's own needs a DDP trial: tests/search/test_search_ddp.py)
and a planted Tune trial carries its id in its last report, as a DDP trial's reports do."""

from __future__ import annotations

import pytest

from tuner.search._recorder import RerunRecorder, StudyRecorder
from tuner.search._protocol import TrialOrder, with_workers

pytestmark = pytest.mark.ray


class Trial:
    """What the recorders read of a Tune trial that ended: no record yet (interrupted before its last report)."""

    def __init__(self, group, config):
        self.trial_id, self.config, self.error_file = "t0", config, None
        self.last_result = with_workers({}, group.id.hex() if group is not None else None)

    def get_error(self):
        return "RuntimeError: the trial process died"


@pytest.fixture
def workers(ray_session):
    """A placement group holding a sliver of CPU, as a DDP trial's workers' does; removed if a test left it."""
    from ray.util import placement_group_table
    from ray.util.placement_group import placement_group, remove_placement_group

    group = placement_group([{"CPU": 0.01}])
    group.wait(30)
    yield group, lambda: placement_group_table(group).get("state")
    if placement_group_table(group).get("state") != "REMOVED":
        remove_placement_group(group)


@pytest.mark.parametrize("end", ["error", "complete", "interrupted"])
@pytest.mark.parametrize("recorder", ["search", "confirm"])
def test_every_way_a_ddp_trial_ends_gives_its_workers_back(tmp_path, workers, end, recorder):
    from tests.helpers.searchers import tiny_searcher

    group, state = workers
    searcher, _, _ = tiny_searcher(tmp_path / "study")  # the study's folder and the run's searcher
    if recorder == "search":
        rec = StudyRecorder(tmp_path / "study", searcher=searcher)
        trial = Trial(group, TrialOrder(trial=3).to_config())
    else:
        rec = RerunRecorder(tmp_path / "study", "sqlite:///" + str(tmp_path / "none.db"), "none")
        trial = Trial(group, TrialOrder(trial=3, repeat=0).to_config())
    assert state() == "CREATED"
    if end == "error":  # the trial raised or its process died
        rec.on_trial_error(0, [trial], trial)
    elif end == "complete":
        rec.on_trial_complete(0, [trial], trial)
    else:  # Ctrl-C, SIGTERM or the allowance: Tune stops the running trials, then ends the run
        rec.on_experiment_end([trial, Trial(None, TrialOrder(trial=4).to_config())])
    assert state() == "REMOVED"
