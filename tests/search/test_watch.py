"""A trial its own process cannot end (issue 37): a user's loss() that blocks (here `time.sleep`, which no
exception reaches in a Ray trial's thread) is ended by the study's driver once its wall cap and what follows it are
past, recorded as `error` naming the limit, and the study goes on. `tuner search` runs as a real process: the
subprocess timeout is only there to fail instead of hanging, never a timing assertion."""

from __future__ import annotations

import json

import pytest

from tests.helpers.searchproc import finish
from tests.helpers.studies import load_trials
from tests.helpers.userworkloads import HEADER, write

BLOCKS_IN_TRIAL_LOSS = HEADER + '''

def user_loss(models, batch):
    if not tuner.trial_context().preflight:  # the pre-flight check passes; the trial's first step never returns
        import time
        time.sleep(100000)
    return F.cross_entropy(models["net"](batch[0]), batch[1])


def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data, loss=user_loss)
'''

SPACE = """
description: one trial of a user's workload whose step blocks in the trial
defaults: {budget: {seconds: 1}, trials: 1}
objectives:
  default: [{metric: throughput, direction: max}]
trial: {quality: {enabled: false}, measure: {warmup_steps: 1, windows: 2, ceiling_seconds: 0}}
params:
  batch_size: {type: categorical, choices: [8]}
  num_workers: 0
  precision: fp32
"""


@pytest.mark.ray
def test_a_step_that_blocks_is_ended_by_the_driver_and_recorded_as_an_error_naming_the_wall_cap(tmp_path,
                                                                                                space_search):
    work = write(tmp_path / "proj", BLOCKS_IN_TRIAL_LOSS, "blocks.py")
    proc, reports = space_search.start(SPACE, "--workload", f"{work}:make", "--study", "blocked", "--confirm", "0",
                                       "--no-probe", "--format", "json", name="one.yaml")
    out, err = finish(proc, timeout=600)
    assert proc.returncode == 0, err[-3000:]
    assert json.loads(out)["states"] == {"error": 1}
    (record,) = load_trials(reports / "blocked")
    assert record["state"] == "error"
    assert "wall cap 11 s" in record["error"] and "process was ended" in record["error"], record["error"]


class _Trial:
    """What the watch reads of a Tune trial."""

    def __init__(self, trial_id: str, wall: float = 11.0, status: str = "RUNNING") -> None:
        from tuner.search._protocol import TrialLimits, TrialOrder

        self.trial_id, self.status = trial_id, status
        self.config = TrialOrder(trial=0, limits=TrialLimits(wall_limit_s=wall)).to_config()


def _watch(monkeypatch, allowance=None):
    """A TrialWatch on a planted clock whose kills are listed instead of done (tuner.search._watch._kill)."""
    import tuner.search._watch as watch_module

    now = [0.0]
    killed: list[str] = []
    monkeypatch.setattr(watch_module, "_kill", lambda trial: killed.append(trial.trial_id) or True)
    return watch_module.TrialWatch(allowance, clock=lambda: now[0]), now, killed


def test_a_trial_past_its_phase_limit_is_ended_with_a_reason_naming_the_limit(monkeypatch):
    from tuner.search._protocol import PhaseReport, to_tune

    watch, now, killed = _watch(monkeypatch)
    slow, fine = _Trial("a"), _Trial("b")
    watch.on_trial_result(0, [], slow, to_tune(PhaseReport("train", 41.0)))
    watch.on_trial_result(0, [], fine, to_tune(PhaseReport("train", 41.0)))
    now[0] = 40.0
    watch.on_step_end(0, [slow, fine])
    assert killed == []
    watch.on_trial_complete(0, [], fine)  # a trial that ended in time is no longer watched
    now[0] = 41.5
    watch.on_step_end(0, [slow, fine])
    assert killed == ["a"]
    ended = watch.ended(slow)
    assert ended.state == "error" and "within 41 s of its training's start (its wall cap 11 s" in ended.reason
    assert watch.ended(slow) is None  # told once


def test_a_compile_past_its_limit_is_ended_as_a_compile_timeout(monkeypatch):
    from tuner.search._protocol import PhaseReport, to_tune

    watch, now, killed = _watch(monkeypatch)
    trial = _Trial("c")
    watch.on_trial_result(0, [], trial, to_tune(PhaseReport("compile", 200.0)))
    now[0] = 201.0
    watch.on_step_end(0, [trial])
    ended = watch.ended(trial)
    assert killed == ["c"] and ended.state == "compile_timeout" and "within 200 s" in ended.reason


def test_every_running_trial_is_ended_once_the_study_seconds_and_half_the_margin_are_spent(monkeypatch):
    from tuner.search._allowance import Allowance

    allowance = Allowance(60.0, started=0.0, confirm_runs=0, trial_s=5.0)
    watch, now, killed = _watch(monkeypatch, allowance)
    allowance.clock = lambda: now[0]
    running, done = _Trial("r"), _Trial("d", status="TERMINATED")
    now[0] = 69.0  # 60 s + 10 s (half of the 20 s margin) not yet spent
    watch.on_step_end(0, [running, done])
    assert killed == [] and not allowance.ended
    now[0] = 70.0
    watch.on_step_end(0, [running, done])
    assert killed == ["r"] and allowance.ended  # and no trial starts after it
    assert "--study-seconds 60 (+20 s margin) ran out while this trial ran" in watch.ended(running).reason
