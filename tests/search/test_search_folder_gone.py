"""A study folder deleted while its search runs: one line, exit 2, nothing recreated, and the name usable again."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.helpers.spaces_for_tests import fake_engine_space
from tuner.cli import main
from tuner.study import TrialResult

pytestmark = pytest.mark.ray


def engine_deletes_its_study(cfg, *, cache_dir, out_dir=None, **_):
    """Trial 1 deletes the whole study folder (trials/<NNNN>'s grandparent) as a user's `rm -r` would."""
    if int(Path(out_dir).name) == 1:
        shutil.rmtree(Path(out_dir).parent.parent)
    return TrialResult(state="complete", throughput=float(cfg.params.batch_size), train_seconds=0.01,
                       loss=1.0 / cfg.params.batch_size)


def test_a_study_deleted_while_it_runs_is_not_recreated(ray_session, tmp_path, capsys, trial_engine):
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    trial_engine(engine_deletes_its_study)
    reports = tmp_path / "reports"
    reports.mkdir()
    space = tmp_path / "fake.yaml"
    space.write_text(fake_engine_space(trials=4))
    argv = ["search", "--space", str(space), "--study", "gone", "--reports-dir", str(reports), "--no-probe",
            "--confirm", "0"]
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("tuner: error: the study folder") and "was deleted while the search " \
        "ran" in err[-1], err
    assert "Traceback" not in "\n".join(err) and "internal error" not in "\n".join(err)
    assert list(reports.iterdir()) == []  # no trials/0001, no ray/: nothing of the study came back
    trial_engine(engine_keeps_its_study)
    assert main(argv) == 0, capsys.readouterr().err  # the name starts a new study, without --resume
    assert (reports / "gone" / "study.json").is_file()


def engine_keeps_its_study(cfg, *, cache_dir, out_dir=None, **_):
    return TrialResult(state="complete", throughput=float(cfg.params.batch_size), train_seconds=0.01,
                       loss=1.0 / cfg.params.batch_size)
