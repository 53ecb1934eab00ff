"""A study folder deleted while its search runs: one line, exit 2, nothing recreated, and the name usable again."""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

import pytest

from tests.helpers.spaces_for_tests import fake_engine_space
from tuner.study import TrialResult



def engine_deletes_its_study(cfg, *, cache_dir, out_dir=None, **_):
    """Trial 1 deletes the whole study folder (trials/<NNNN>'s grandparent) as a user's `rm -r` would."""
    if int(Path(out_dir).name) == 1:
        shutil.rmtree(Path(out_dir).parent.parent)
    return TrialResult(state="complete", throughput=float(cfg.params.batch_size), train_seconds=0.01,
                       loss=1.0 / cfg.params.batch_size)


@pytest.mark.ray
def test_a_study_deleted_while_it_runs_is_not_recreated(ray_session, tmp_path, trial_engine, space_search):
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    trial_engine(engine_deletes_its_study)
    reports = tmp_path / "reports"
    reports.mkdir()
    search = lambda: space_search.run(fake_engine_space(trials=4), "--study", "gone", "--no-probe",  # noqa: E731
                                      "--confirm", "0", name="fake.yaml")
    code, _, err, _, _ = search()
    err = err.strip().splitlines()
    assert code == 2 and err[-1].startswith("tuner: error: the study folder") and "was deleted while the search " \
        "ran" in err[-1], err
    assert "Traceback" not in "\n".join(err) and "internal error" not in "\n".join(err)
    assert list(reports.iterdir()) == []  # no trials/0001, no ray/: nothing of the study came back
    trial_engine(engine_keeps_its_study)
    again = search()
    assert again.code == 0, again.err  # the name starts a new study, without --resume
    assert (reports / "gone" / "study.json").is_file()


def engine_keeps_its_study(cfg, *, cache_dir, out_dir=None, **_):
    return TrialResult(state="complete", throughput=float(cfg.params.batch_size), train_seconds=0.01,
                       loss=1.0 / cfg.params.batch_size)


@pytest.mark.parametrize("where", ["driver, study deleted", "driver, study there", "another node"])
def test_a_trial_makes_its_folder_but_never_a_deleted_study_folder_where_the_driver_is(tmp_path, where):
    """On the driver's host a trial's folder is made only inside the study folder as it is (deleted, it stays
    deleted: the trial keeps no artifacts); on another node, its own disk, the folders are made as before."""
    from tuner.search._protocol import TrialOrder, record_of
    from tuner.search._trial import TrialSetup, run_one
    from tuner.space import parse_space
    from tuner.study import Objective

    study = tmp_path / "reports" / "gone"
    study.mkdir(parents=True)
    if where == "driver, study deleted":
        study.rmdir()
    seen = {}

    def engine(cfg, *, cache_dir, out_dir=None, **_):
        seen["out_dir"] = out_dir
        return TrialResult(state="complete", throughput=100.0, train_seconds=0.1)

    space = parse_space({"objectives": [{"metric": "throughput", "direction": "max"}],
                         "params": {"batch_size": {"type": "categorical", "choices": [16, 32]}}},
                        source="test", name="test")
    setup = TrialSetup(space=space, base={"workload": "cnn", "dataset": "synthetic", "budget": {"samples": 64},
                                          "gpus": 0, "params": {"device": "cpu"}},
                       objectives=[Objective(metric="throughput", direction="max")], study_dir=str(study),
                       cache_dir=str(tmp_path / "cache"),
                       driver_host=socket.gethostname() if where.startswith("driver") else "elsewhere.invalid")
    assert record_of(run_one(TrialOrder(trial=3, params={"batch_size": 16}).to_config(), setup, engine=engine)).complete
    if where == "driver, study deleted":
        assert seen["out_dir"] is None and list((tmp_path / "reports").iterdir()) == []
    else:
        assert seen["out_dir"] == study / "trials" / "0003" and seen["out_dir"].is_dir()


@pytest.mark.parametrize("where", ["driver", "another node"])
def test_a_trials_ceilings_and_flops_never_make_a_deleted_study_folder_again_where_the_driver_is(tmp_path, where):
    """A running trial wrote flops.json (beside ceilings.json) into a new folder of the deleted study's name, and
    the name was stuck: 'not empty, add --resume', then 'no study to resume' (issue 57). On the driver's host the
    study's caches keep nothing once the folder is gone; on another node, its own disk, they are made as before."""
    from tuner.measure.flops import FLOPS_FILE
    from tuner.search._trial import TrialSetup, study_ceilings
    from tuner.space import parse_space

    study = tmp_path / "reports" / "gone"
    space = parse_space({"objectives": [{"metric": "throughput", "direction": "max"}],
                         "params": {"batch_size": {"type": "categorical", "choices": [16, 32]}}}, source="test",
                        name="test")
    setup = TrialSetup(space=space, base={}, objectives=[], study_dir=str(study), cache_dir=str(tmp_path / "cache"),
                       driver_host=socket.gethostname() if where == "driver" else "elsewhere.invalid")
    study.mkdir(parents=True)
    cache = study_ceilings(setup)  # what the trial holds, made before the folder was deleted
    shutil.rmtree(study)
    cache.put("compute", 100.0, {"kind": "compute"})
    cache.sibling(FLOPS_FILE).put("flops", 1e6, {"kind": "flops"})
    if where == "driver":
        assert list((tmp_path / "reports").iterdir()) == []
    else:
        assert (study / FLOPS_FILE).is_file() and (study / "ceilings.json").is_file()


def test_what_a_lost_study_left_behind_its_flops_json_included_is_cleared_so_the_name_is_free(tmp_path):
    """Whatever a trial still wrote where the deleted study was (a flops.json among them) is the study's own and is
    removed when the search ends, so the name starts a new study."""
    from tuner.study import lock_study

    study = tmp_path / "reports" / "gone"
    lock = lock_study(study, "gone", new=True)
    shutil.rmtree(study)
    study.mkdir()
    (study / "flops.json").write_text("{}")  # a trial's, after the deletion
    assert lock.lost()
    assert lock.clear_lost() == [] and not study.exists()
