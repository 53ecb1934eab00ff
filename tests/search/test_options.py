"""Checks on a planned study before Ray starts (tuner.search._options)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.userworkloads import GOOD, write
from tuner.errors import ConfigError
from tuner.search._check import check_plan
from tuner.search._options import SearchOptions
from tuner.search._plan import plan_search, same_space
from tuner.space import load_space

REPO = Path(__file__).resolve().parents[2]

SGD = GOOD.replace('quality=("val_loss", "min"))', 'quality=("val_loss", "min"),\n'
                   '                          optimizer=lambda params, **hp: torch.optim.SGD(params, **hp),\n'
                   '                          hyperparameters={"lr": 20.0})')


def test_a_space_searching_betas_for_an_sgd_workload_names_the_space_to_copy_without_them(tmp_path):
    """word_language_model's SGD takes no betas: a space file of the user's own that searches them is refused,
    offering the loader space and a copy of this space (named) without beta1 and beta2, since the loader space
    drops lr and quality."""
    assert "SGD" in SGD
    work = write(tmp_path / "w", SGD)
    space = tmp_path / "optimizer.yaml"
    space.write_text((REPO / "search_spaces" / "optimizer.yaml").read_text())
    plan = plan_search(SearchOptions(space=str(space), workload=f"{work}:make", reports_dir=tmp_path / "r"))
    with pytest.raises(ConfigError) as err:
        check_plan(plan)
    msg = str(err.value)
    assert "--space loader" in msg and f"a copy of {space} without beta1 and beta2" in msg
    assert "\n" not in msg


def test_a_bundled_space_leaves_out_the_betas_an_sgd_workload_does_not_take_and_says_so(tmp_path):
    """The bundled optimizer space searches Adam's betas for any workload: for SGD the study searches its lr scale
    and batch without them, and the line said as it starts names what was left out and why."""
    work = write(tmp_path / "w", SGD)
    plan = check_plan(plan_search(SearchOptions(space="optimizer", workload=f"{work}:make",
                                                reports_dir=tmp_path / "r")))
    assert "beta1" not in plan.space.params and "beta2" not in plan.space.params
    assert {"lr_scale", "batch_size"} <= set(plan.space.searched)
    assert plan.optimizer_note is not None
    assert plan.optimizer_note.startswith(f"beta1, beta2 not searched: workload {work}:make's optimizer takes no betas")
    assert "lr_scale" not in plan.optimizer_note


def test_resuming_compares_a_bundled_space_without_the_betas_it_left_out_but_not_a_file_of_ones_own(tmp_path):
    """study.json of an SGD study keeps the bundled space less its betas: `--resume --space optimizer` is the same
    space. A file of the user's own that gained beta1 since the study started is another space (its resume is
    refused), not one whose addition is silently dropped."""
    bundled = load_space("optimizer")
    saved = bundled.without(["beta1", "beta2"])
    assert bundled.bundled and same_space(bundled, saved)
    mine = tmp_path / "optimizer.yaml"
    mine.write_text((REPO / "search_spaces" / "optimizer.yaml").read_text())
    own = load_space(str(mine))
    assert not own.bundled
    assert same_space(own.without(["beta1", "beta2"]), saved.model_copy(update={"source": str(mine)}))
    assert not same_space(own.without(["beta2"]), saved.model_copy(update={"source": str(mine)}))


def test_a_spaces_relative_workload_is_read_from_the_spaces_folder_and_the_command_lines_from_here(tmp_path,
                                                                                                   monkeypatch):
    """`tuner search --space project/spaces/s.yaml` from another folder finds the space's `../work/mine.py:make`
    beside the space; a --workload path on the command line is read from the current folder."""
    work = write(tmp_path / "project" / "work", GOOD, "mine.py")
    space = tmp_path / "project" / "spaces" / "s.yaml"
    space.parent.mkdir(parents=True)
    space.write_text("defaults: {workload: ../work/mine.py:make, budget: {samples: 64}}\n"
                     "objectives: [{metric: throughput, direction: max}]\n"
                     "params: {batch_size: {type: int, low: 8, high: 16}}\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    plan = plan_search(SearchOptions(space="../project/spaces/s.yaml", reports_dir=Path("r")))
    assert plan.workload.file == str(work.resolve())
    here = write(tmp_path / "elsewhere", GOOD, "here.py")
    plan = plan_search(SearchOptions(space="../project/spaces/s.yaml", workload="here.py:make", reports_dir=Path("r")))
    assert plan.workload.file == str(here.resolve())


def test_a_study_with_a_target_confirms_with_three_re_runs_by_default(tmp_path):
    """Issue 51: a confirmed time to target stands on its re-runs alone (the search's selected reading is left
    out), and two gave its interval one degree of freedom (0.34-204 s in the docs' example): three by default where
    the study has a target; --repeats still decides, and a study without a target keeps two."""
    from tuner.search import SearchOptions
    from tuner.search._plan import plan_search

    def repeats(**kw):
        return plan_search(SearchOptions(space="amp_loader", study="r", reports_dir=tmp_path, **kw)).confirm_repeats

    assert repeats() == 2
    assert repeats(target=100.0) == 3
    assert repeats(target=100.0, repeats=2) == 2
