"""The budget is a contract: a slow step's trial (training, scoring, ceilings) ends within its budget plus the
stated margin, its windows hold several steps, and a ceiling whose deadline cannot hold enough steps is skipped
with its reason. Time is a fake clock the planted workload advances: no real clock is asserted on."""

import sys

import pytest

from tuner.config import parse_config
from tuner.train import run_trial
from tuner.train.trial import budget_margin
from tests.helpers.userworkloads import IMPORTS, evaluate_source, write

SLOW = IMPORTS + '''
T = [0.0]  # the fake clock: a step takes 0.5 s of it, loading a sample 0.01 s, scoring 0.3 s


class Slow(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = (self.x.sum(1) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        T[0] += 0.01
        return self.x[i], self.y[i]


def loss(models, batch):
    T[0] += 0.5
    return F.cross_entropy(models["net"](batch[0]), batch[1])
''' + evaluate_source("T[0] += 0.3") + '''

def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=lambda: (Slow(64), Slow(32)),
                          loss=loss, evaluate=evaluate, quality=("val_loss", "min"))
'''


def planted(folder, text, module):
    """Writes `text` as `module`.py; yields (its path, its fake clock: T[0] once the trial imported it)."""
    path = write(folder, text, f"{module}.py")
    sys.modules.pop(module, None)
    yield path, lambda: sys.modules[module].T[0] if module in sys.modules else 0.0
    sys.modules.pop(module, None)


@pytest.fixture
def slow(tmp_path):
    yield from planted(tmp_path, SLOW, "slowstep")


@pytest.mark.parametrize("budget_s", [8, 20])
def test_a_slow_step_s_trial_keeps_its_budget_and_reads_only_windows_of_several_steps(tmp_path, slow, budget_s):
    path, clock = slow
    cfg = parse_config({"workload": f"{path}:make", "budget": {"seconds": budget_s},
                        "params": {"batch_size": 8, "device": "cpu"},
                        "measure": {"warmup_steps": 2, "windows": 5, "min_windows": 3, "window_min_steps": 3,
                                    "ceiling_seconds": 1.0}})
    res = run_trial(cfg, cache_dir=tmp_path / "cache", clock=clock)
    assert res.state == "complete", res.error
    step_s = res.value("step_seconds")
    assert step_s == pytest.approx(0.58)  # 0.5 s of step and 8 samples loaded
    assert 3 <= len(res.windows) <= 5
    ends = [res.value("warmup_steps") * 8] + [samples for samples, _ in res.loss_curve]  # samples at window ends
    assert all(b - a >= 3 * 8 for a, b in zip(ends, ends[1:]))  # no window shorter than three steps
    assert res.value("wall_seconds") <= budget_s + budget_margin(budget_s, step_s)
    assert "compute: one step takes 0.58 s" in res.get("ceiling_skipped")  # 5% of the budget holds no 7 steps


def test_a_trial_the_wall_cap_stops_before_one_full_window_is_an_error_with_no_reading(tmp_path, slow):
    """No window of the least steps, no throughput to rank: the trial is an error saying why, not a `complete`
    trial without a throughput (and its scoring is not paid for)."""
    path, clock = slow
    cfg = parse_config({"workload": f"{path}:make", "budget": {"seconds": 20},
                        "params": {"batch_size": 8, "device": "cpu"},
                        "measure": {"warmup_steps": 2, "windows": 5, "min_windows": 3, "window_min_steps": 3}})
    res = run_trial(cfg, cache_dir=tmp_path / "cache", clock=clock, wall_limit_s=2.0)
    assert res.state == "error" and "before one window of 3 steps" in res.error
    assert res.throughput is None and res.get("val_loss") is None


SLOW_SCORING = SLOW.replace("T[0] += 0.3", "T[0] += 4.0")  # scoring takes 4 s of the fake clock


@pytest.fixture
def slow_scoring(tmp_path):
    yield from planted(tmp_path, SLOW_SCORING, "slowscoring")


@pytest.mark.parametrize("reserve", [None, 4.0])
def test_scoring_kept_out_of_training_keeps_the_whole_trial_within_budget_and_margin(tmp_path, slow_scoring, reserve):
    """Scoring (4 s) is more than the margin holds: without its reserve the trial overruns; with the pre-flight's
    estimate kept out of training's share, warm-up, windows, scoring and ceilings end within budget + margin."""
    path, clock = slow_scoring
    cfg = parse_config({"workload": f"{path}:make", "budget": {"seconds": 20},
                        "params": {"batch_size": 8, "device": "cpu"},
                        "measure": {"warmup_steps": 2, "windows": 5, "min_windows": 3, "window_min_steps": 3}})
    res = run_trial(cfg, cache_dir=tmp_path / "cache", clock=clock, score_reserve_s=reserve)
    assert res.state == "complete", res.error
    within = res.value("wall_seconds") <= 20 + budget_margin(20, res.value("step_seconds"))
    assert within == (reserve is not None)
    assert res.get("score_reserve_seconds") == reserve
    assert 3 <= len(res.windows)


def test_no_reserve_without_scoring(tmp_path, slow_scoring):
    path, clock = slow_scoring
    cfg = parse_config({"workload": f"{path}:make", "budget": {"seconds": 20}, "quality": {"enabled": False},
                        "params": {"batch_size": 8, "device": "cpu"}})
    res = run_trial(cfg, cache_dir=tmp_path / "cache", clock=clock, score_reserve_s=4.0)
    assert res.state == "complete" and res.get("score_reserve_seconds") is None and res.get("val_loss") is None


# The machine got slower after the pre-flight: a step takes 1.5 s of the fake clock (the pre-flight read 0.5 s;
# with loading, 2.7x slower per sample) and scoring 13 s (the pre-flight estimated 5 s).
SLOWED = SLOW.replace("T[0] += 0.5", "T[0] += 1.5").replace("T[0] += 0.3", "T[0] += 13.0")


@pytest.fixture
def slowed(tmp_path):
    yield from planted(tmp_path, SLOWED, "slowedstep")


@pytest.mark.parametrize("pace_known", [False, True])
def test_a_step_slower_than_the_pre_flight_s_grows_the_scoring_reserve_and_keeps_the_budget(tmp_path, slowed,
                                                                                           pace_known):
    """The pre-flight's scoring estimate (5 s) kept as it is lets the slowed trial overrun its margin; grown by
    how much slower the trial's step is per sample than the pre-flight's, the whole trial fits."""
    path, clock = slowed
    cfg = parse_config({"workload": f"{path}:make", "budget": {"seconds": 40},
                        "params": {"batch_size": 8, "device": "cpu"},
                        "measure": {"warmup_steps": 2, "windows": 5, "min_windows": 3, "window_min_steps": 3,
                                    "ceiling_seconds": 0}})
    res = run_trial(cfg, cache_dir=tmp_path / "cache", clock=clock, score_reserve_s=5.0,
                    preflight_pace_s=(0.5 + 8 * 0.01) / 8 if pace_known else None)
    assert res.state == "complete", res.error
    within = res.value("wall_seconds") <= 40 + budget_margin(40, res.value("step_seconds"))
    assert within == pace_known
    assert res.get("score_reserve_seconds") == (pytest.approx(5.0 * 1.58 / 0.58) if pace_known else 5.0)


class Rungs:
    """A study trial's reporter under asha: rungs at 5 and 12 s of a 30 s budget (the last: the trial's end)."""

    def __init__(self):
        self.rungs, self.reports = [5.0, 12.0, 30.0], []

    def window(self, report):
        pass

    def rung(self, report):
        self.reports.append(report)


def rung_config(path, seconds):
    """The planted workload's trial with 3-step windows, a seconds budget and no ceilings (the rung tests)."""
    return parse_config({"workload": f"{path}:make", "budget": {"seconds": seconds},
                         "params": {"batch_size": 8, "device": "cpu"},
                         "measure": {"warmup_steps": 2, "windows": 8, "min_windows": 3, "window_min_steps": 3,
                                     "ceiling_seconds": 0}})


def test_asha_rung_evaluations_are_kept_inside_the_budget(tmp_path, slow_scoring):
    """Each rung evaluation takes 4 s (as does the final scoring): one scoring per rung the trial can reach is
    kept out of training's share, the rung points sit at the same fractions of that share, and the rungs are
    reported in the whole budget's terms."""
    path, clock = slow_scoring
    cfg = rung_config(path, 30)
    rep = Rungs()
    res = run_trial(cfg, cache_dir=tmp_path / "cache", clock=clock, score_reserve_s=4.0, reporter=rep)
    assert res.state == "complete", res.error
    # 3 scorings (2 rungs and the end), at the rungs' measured 4.32 s (4 s and 32 samples loaded), not the estimate
    assert res.get("score_reserve_seconds") == pytest.approx(3 * 4.32)
    assert [r.rung for r in rep.reports] == [0, 1]
    assert all(r.result.value("val_loss") is not None for r in rep.reports)
    assert rep.reports[0].budget_used >= 5 and rep.reports[1].budget_used >= 12  # where the rungs are
    assert res.rung == 2 and res.measured_at <= 30  # the top rung: the budget, never past it
    assert res.value("wall_seconds") <= 30 + budget_margin(30, res.value("step_seconds"))


def test_without_a_reserve_the_rung_evaluations_add_their_time(tmp_path, slow_scoring):
    """The same trial without the pre-flight's estimate (a samples budget's study, a cluster's): the rungs'
    evaluations are outside the training clock and the trial overruns: what the reserve is for."""
    path, clock = slow_scoring
    cfg = rung_config(path, 30)
    res = run_trial(cfg, cache_dir=tmp_path / "cache", clock=clock, reporter=Rungs())
    assert res.state == "complete" and res.get("score_reserve_seconds") is None
    assert res.value("wall_seconds") > 30 + budget_margin(30, res.value("step_seconds"))


class LateRungs(Rungs):
    """Rungs at 10 and 60 s of an 80 s budget: the second sits late in training's share."""

    def __init__(self):
        super().__init__()
        self.rungs = [10.0, 60.0, 80.0]
        self.windows = []

    def window(self, report):
        self.windows.append(report.budget_used)


def test_a_reserve_that_grows_after_the_rungs_were_placed_still_closes_every_rung_and_the_top_at_the_budget(
        tmp_path, slowed):
    """The slowed trial's reserve grows from the pre-flight's 3 x 5 s to about 3 x 13 s once warm-up reads its
    pace: the rung points move with training's share, so the late rung is still evaluated and reported, and the
    trial's figures say they were taken at the top rung, the whole 80 s budget (a budget the report can name)."""
    path, clock = slowed
    cfg = rung_config(path, 80)
    rep = LateRungs()
    res = run_trial(cfg, cache_dir=tmp_path / "cache", clock=clock, score_reserve_s=5.0,
                    preflight_pace_s=(0.5 + 8 * 0.01) / 8, reporter=rep)
    assert res.state == "complete", res.error
    assert res.get("score_reserve_seconds") > 3 * 5.0  # it grew after the rung points were placed
    assert [r.rung for r in rep.reports] == [0, 1]
    assert rep.reports[0].budget_used >= 10 and rep.reports[1].budget_used >= 60
    assert rep.windows == sorted(rep.windows)  # the budget used, as reported, never goes back
    assert res.rung == 2 and res.measured_at == 80
    assert res.value("wall_seconds") <= 80 + budget_margin(80, res.value("step_seconds"))


def test_a_slow_step_s_trial_skips_the_noise_pass_it_has_no_room_for(tmp_path, slow):
    """A new user's 2.4 s steps beside a busy process: the noise-scale pass, whose cap is checked between its pairs,
    spent 33.6 s on its first pair and their 40 s baseline trial ran 119.5 s. Here a pair of 4 steps of 0.58 s
    (fake clock) would take 2.3 s, and the 4 an estimate needs do not fit its 3 s: the pass is not begun, and the
    record says why."""
    path, clock = slow
    cfg = parse_config({"workload": f"{path}:make", "budget": {"seconds": 20},
                        "params": {"batch_size": 8, "device": "cpu"},
                        "measure": {"warmup_steps": 2, "windows": 5, "min_windows": 3, "window_min_steps": 3,
                                    "ceiling_seconds": 1.0}})
    res = run_trial(cfg, cache_dir=tmp_path / "cache", clock=clock)
    assert res.state == "complete", res.error
    assert "noise_scale" not in res.metrics
    assert "do not fit" in res.get("noise_scale_skipped")
    assert res.value("noise_seconds") < 0.1  # not one step of the pass ran on the fake clock
