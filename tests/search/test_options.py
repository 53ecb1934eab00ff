"""Checks on a planned study before Ray starts (tuner.search._options)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.userworkloads import GOOD, write
from tuner.errors import ConfigError
from tuner.search._options import SearchOptions, check_plan, plan_search

REPO = Path(__file__).resolve().parents[2]

SGD = GOOD.replace('quality=("val_loss", "min"))', 'quality=("val_loss", "min"),\n'
                   '                          optimizer=lambda params, **hp: torch.optim.SGD(params, **hp),\n'
                   '                          hyperparameters={"lr": 20.0})')


def test_a_space_searching_betas_for_an_sgd_workload_names_the_space_to_copy_without_them(tmp_path):
    """word_language_model's SGD takes no betas: the refusal offers the loader space and a copy of this space
    (named) without beta1 and beta2, since the loader space drops lr and quality."""
    assert "SGD" in SGD
    work = write(tmp_path / "w", SGD)
    space = REPO / "search_spaces" / "optimizer.yaml"
    plan = plan_search(SearchOptions(space=str(space), workload=f"{work}:make", reports_dir=tmp_path / "r"))
    with pytest.raises(ConfigError) as err:
        check_plan(plan)
    msg = str(err.value)
    assert "--space loader" in msg and f"a copy of {space} without beta1 and beta2" in msg
    assert "\n" not in msg
