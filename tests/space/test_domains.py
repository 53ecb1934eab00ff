"""A study's stored domains (tuner.space._domains): a study whose trials drew the effective batch's split otherwise
than this tuner does (begun before the space kept the effective batch) is refused on --resume in one line."""

from __future__ import annotations

import pytest

from tuner.errors import StudyError
from tuner.space import load_space

OLD_BATCH = {"type": "int", "low": 16, "high": 256, "log": True}  # how amp_loader's batch_size was drawn before


def _study(tmp_path, batch_draw):
    """A study folder whose Optuna database holds one trial that drew batch_size (and beta1) as given."""
    import optuna

    from tuner.search._storage import ID_ATTR, default_storage
    from tuner.study import StudyFolder, StudyMeta

    space = load_space("amp_loader")
    folder = StudyFolder(tmp_path / "old")
    folder.path.mkdir()
    url = default_storage(folder.path)
    study = optuna.create_study(study_name="old", storage=url, directions=["maximize"])
    study.set_user_attr(ID_ATTR, "id-1")
    study.add_trial(optuna.trial.create_trial(
        params={"batch_size": 64, "beta1": 0.5}, values=[1.0],
        distributions={"batch_size": batch_draw, "beta1": optuna.distributions.FloatDistribution(0.1, 0.9)}))
    domains = space.definition()["params"]
    meta = StudyMeta(name="old", id="id-1", space="amp_loader", space_def=space.definition(), domains=domains)
    return folder, meta, url


def test_resuming_a_study_that_drew_batch_size_from_an_int_range_is_one_line_naming_the_fix(tmp_path):
    """Optuna keeps one distribution per name for a study's life: a study begun when batch_size was an int range
    failed in every new trial (ValueError: different distribution kind) once the space keeps the effective batch
    and draws the micro-batch among its divisors."""
    import optuna

    from tuner.search._storage import check_study_database

    folder, meta, url = _study(tmp_path, optuna.distributions.IntDistribution(16, 256, log=True))
    before = sorted((str(p), p.read_bytes()) for p in folder.path.rglob("*") if p.is_file())
    with pytest.raises(StudyError) as caught:
        check_study_database(folder, meta, url)
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"{folder.meta_path}: this study drew batch_size as a log-scaled int")
    assert "one of 16, 32, 64" in line and "start a new study (--study NEW_NAME)" in line
    assert sorted((str(p), p.read_bytes()) for p in folder.path.rglob("*") if p.is_file()) == before


def test_a_study_that_drew_the_kept_effective_batchs_split_resumes(tmp_path):
    import optuna

    from tuner.search._storage import check_study_database

    folder, meta, url = _study(tmp_path, optuna.distributions.CategoricalDistribution([16, 32, 64]))
    check_study_database(folder, meta, url)  # no error
