"""benchmarks/efficiency.py's grid: the fastest points are read again and answered with their median, so the
trials-to-95% rows are not decided by one reading that happened to run high."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import benchmarks.efficiency as eff
from benchmarks.common import Context, make_settings


def _ctx(tmp_path: Path) -> Context:
    return Context(settings=make_settings(quick=False, cuda=False), out_dir=tmp_path, work_dir=tmp_path / "work")


def _row(thr: float, loss: float = 0.5) -> dict[str, Any]:
    return {"state": "complete", "throughput": thr, "loss": loss, "error": None, "capped": False,
            "readings": [thr]}


def _planted(monkeypatch: pytest.MonkeyPatch, later: dict[tuple[int], list[float]]) -> list[tuple[int]]:
    """read_point answers each point's re-reads from `later`, in order; returns the order read."""
    order: list[tuple[int]] = []

    def read(ctx: Any, space: Any, point: dict[str, Any]) -> dict[str, Any]:
        key = (point["b"],)
        order.append(key)
        return {**_row(later[key].pop(0), 0.4), "readings": None}

    monkeypatch.setattr(eff, "read_point", read)
    return order


def test_a_lone_high_best_is_answered_by_its_median_and_brings_the_points_near_it_within_reach(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    # one reading of point 0 ran 25% high; read again it reads as the others do
    table = {(0,): _row(1960.0), (1,): _row(1560.0), (2,): _row(1540.0), (3,): _row(1500.0), (4,): _row(900.0),
             (5,): _row(800.0)}
    later = {(0,): [1550.0, 1570.0], (1,): [1530.0, 1580.0], (2,): [1550.0, 1520.0], (3,): [1490.0, 1510.0],
             (4,): [910.0, 890.0]}
    order = _planted(monkeypatch, later)
    eff.settle_top(_ctx(tmp_path), None, table, ["b"])
    assert table[(0,)]["throughput"] == 1570.0 and table[(0,)]["readings"] == [1960.0, 1550.0, 1570.0]
    best = max(v["throughput"] for v in table.values())
    assert sum(v["throughput"] >= 0.95 * best for v in table.values()) == 4  # 1 of 6 before
    # the top 4 read twice more, interleaved and in alternating order; the slow points not at all
    assert order == [(0,), (1,), (2,), (3,), (3,), (2,), (1,), (0,)]
    assert table[(4,)]["readings"] == [900.0] and table[(0,)]["loss"] == pytest.approx(0.4)


def test_a_point_a_re_read_pushes_into_the_top_is_read_again_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    table = {(0,): _row(2000.0), (1,): _row(1900.0), (2,): _row(1800.0), (3,): _row(1700.0), (4,): _row(1600.0)}
    later = {(0,): [1000.0, 1000.0], (1,): [1900.0, 1900.0], (2,): [1800.0, 1800.0], (3,): [1700.0, 1700.0],
             (4,): [1650.0, 1550.0]}
    order = _planted(monkeypatch, later)
    eff.settle_top(_ctx(tmp_path), None, table, ["b"])
    assert table[(0,)]["throughput"] == 1000.0  # read high once, twice at 1000
    assert (4,) in order and len(table[(4,)]["readings"]) == 3  # now in the top 4: settled as well


def test_the_rows_are_read_from_the_settled_grid(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """run() end to end on a planted grid (no training): the best the rows reach for is the settled median, and the
    row says how many points were read again."""
    from tuner.study import LoaderProbe, ProbeChoice, ProbePlan

    def read(ctx: Any, space: Any, point: dict[str, Any]) -> dict[str, Any]:
        high = point == {"batch_size": 64, "num_workers": 0, "precision": "bf16"} and not read.seen
        read.seen |= high  # the first reading of one point runs 30% high, as a lone lucky one does
        thr = 1000.0 + 10 * point["batch_size"] / 16 + (100 if point["precision"] == "bf16" else 0)
        return {"state": "complete", "throughput": thr * (1.3 if high else 1.0), "loss": 0.1 * point["batch_size"],
                "error": None, "capped": False}
    read.seen = False

    plan = ProbePlan(knobs=["num_workers"], seconds=1.0, choices=[
        ProbeChoice(batch_size=b, loader={"num_workers": 0}, probes=[LoaderProbe(loader={"num_workers": 0})])
        for b in (16, 32, 64, 128)])
    monkeypatch.setattr(eff, "read_point", read)
    monkeypatch.setattr(eff, "probe_plan", lambda ctx, space: plan)
    rows = {r.row: r for r in eff.run(_ctx(tmp_path))}
    grid = {(g["batch_size"], g["num_workers"], g["precision"]): g for g in rows["6"].details["grid"]}
    assert grid[(64, 0, "bf16")]["throughput"] == pytest.approx(1140.0)  # 1482 read once, then 1140 twice
    assert rows["6"].details["grid_best_throughput"] == pytest.approx(1180.0)  # batch 128, bf16: not the lucky one
    again = sum(len(g["readings"]) == 3 for g in grid.values())
    assert again == 5  # the top 4, and the one the lucky point's fall brought into them
    assert f"its fastest points ({again}) read 2 more times" in rows["6"].note


def test_a_search_answers_each_trial_with_a_config_not_yet_run_as_tuner_search_does():
    """The tabular search asks the sampler as `tuner search`'s searcher does: a draw that repeats a trial's config is
    drawn anew (tuner.search.toolkit.twin_of), so trials to 95% count configs run, not repeats of one."""
    import optuna

    class Repeating(optuna.samplers.RandomSampler):
        """Proposes batch 16 on its first two draws, then 32: the second draw repeats the first trial."""

        def __init__(self) -> None:
            super().__init__(seed=0)
            self.draws = 0

        def before_trial(self, study: Any, trial: Any) -> None:
            self.draws += 1

        def sample_independent(self, study: Any, trial: Any, name: str, distribution: Any) -> Any:
            return 16 if self.draws <= 2 else 32

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = eff.grid_space((("batch_size", (16, 32, 64)),), 1.0, 2)  # more configs than trials: a repeat is redrawn
    table = {(16,): _row(1000.0), (32,): _row(1200.0), (64,): _row(1300.0)}
    hist = eff.search_once(space, table, Repeating(), 2)
    assert [h["params"]["batch_size"] for h in hist] == [16, 32]
