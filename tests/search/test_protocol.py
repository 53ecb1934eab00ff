"""The trial-driver protocol (tuner.search._protocol): what crosses Ray is a TrialOrder in Tune's config and the
protocol's reports as Tune's dicts, and nothing else speaks their keys."""

from __future__ import annotations

import ast
import io
import json
import tokenize
from pathlib import Path

import pytest

from tuner.search._protocol import (ORDER_KEY, FinalReport, PhaseReport, RungReport, StartReport, TrialLimits,
                                    TrialOrder, WindowReport, from_tune, to_tune)
from tuner.study import Objective, TrialRecord

ROOT = Path(__file__).resolve().parents[2]
OBJECTIVES = [Objective(metric="throughput", direction="maximize"), Objective(metric="loss", direction="minimize")]


def test_an_order_goes_into_tune_s_config_as_plain_data_under_one_key_and_comes_back_the_same():
    order = TrialOrder(trial=4, params={"batch_size": 32, "lr": 0.01},
                       limits=TrialLimits(wall_limit_s=12.5, rungs=(64.0, 192.0), score_reserve_s=0.8,
                                          preflight_pace_s=0.002), repeat=1, round=2)
    config = order.to_config()
    assert list(config) == [ORDER_KEY]
    assert json.loads(json.dumps(config)) == config  # plain data: Ray pickles or logs it as it likes
    assert TrialOrder.from_config(json.loads(json.dumps(config))) == order
    assert order.rerun and not TrialOrder(trial=0).rerun


@pytest.mark.parametrize("report", [
    StartReport(),
    WindowReport(budget_used=8.0, window=1, samples=8, throughput=100.0, throughput_spread=0.1, train_loss=2.0),
    PhaseReport(phase="compile", limit_s=200.0),
    RungReport(rung=0, budget_used=16.0, values={"throughput": 90.0, "loss": 2.5}, feasible=True,
               result=TrialRecord(trial=3, state="stopped", rung=0, measured_at=16.0)),
    FinalReport(values={"throughput": 90.0, "loss": 2.5}, feasible=True, record=TrialRecord(trial=3, state="complete"),
                rung=1, budget_used=32.0),
    FinalReport(values={"throughput": 0.0, "loss": 1e9}, feasible=False, record=TrialRecord(trial=3, state="oom")),
    FinalReport(values={"throughput": 0.0, "loss": 1e9}, feasible=False, stopped=True,  # the race's
                record=TrialRecord(trial=3, state="not reached", error="stopped by the race")),
], ids=lambda r: type(r).__name__)
def test_every_report_survives_tune_s_dict_and_tune_s_own_keys(report):
    result = to_tune(report) | {"training_iteration": 3, "trial_id": "abc", "config": {}}  # what Tune adds
    assert from_tune(json.loads(json.dumps(result))) == report


def test_objective_values_sit_under_tune_s_metric_keys():
    report = RungReport(rung=0, budget_used=1.0, values={"throughput": 5.0, "loss": 1.0}, feasible=True,
                        result=TrialRecord(trial=0, state="stopped"))
    assert {"objective_throughput": 5.0, "objective_loss": 1.0}.items() <= to_tune(report).items()


def test_the_function_tune_calls_reads_an_order_and_emits_only_protocol_reports(tmp_path, monkeypatch):
    """The trial side as Tune runs it (_trainable.trainable), with a tiny engine and tune.report captured: every
    payload parses as a protocol report and converts back to itself; the engine got the order's limits."""
    import ray.tune

    import tuner.search._trial as trial_module
    from tuner.search._trainable import trainable
    from tuner.search._trial import TrialSetup
    from tuner.space import Space
    from tuner.study import TrialResult
    from tuner.train import reports

    sent: list[dict] = []
    monkeypatch.setattr(ray.tune, "report", lambda payload: sent.append(payload))
    monkeypatch.setattr(trial_module, "ray_node_id", lambda: None)
    seen: dict = {}

    def engine(cfg, *, reporter, wall_limit_s, score_reserve_s, preflight_pace_s, measure_ceilings, **_):
        seen.update(wall=wall_limit_s, score=score_reserve_s, pace=preflight_pace_s, rungs=list(reporter.rungs),
                    ceilings=measure_ceilings, batch=cfg.params.batch_size)
        (tmp_path / "seen.json").write_text(json.dumps(seen))  # the trial runs in a forked child of its own
        reporter.phase(reports.PhaseReport(phase="train", limit_s=30.0))
        reporter.window(reports.WindowReport(window=1, budget_used=8.0, samples=8, throughput=100.0,
                                             throughput_spread=0.1, train_loss=2.0))
        reporter.rung(reports.RungReport(rung=0, budget_used=16.0, result=TrialResult(
            state="stopped", rung=0, measured_at=16.0, metrics={"throughput": 90.0, "loss": 2.5})))
        return TrialResult(state="complete", rung=1, measured_at=32.0, metrics={"throughput": 120.0, "loss": 2.0})

    space = Space.model_validate({"objectives": [], "params": {"batch_size": 8}})
    setup = TrialSetup(space=space, base={"workload": "cnn", "dataset": "synthetic", "budget": {"samples": 32},
                                          "params": {"device": "cpu"}},
                       objectives=OBJECTIVES, study_dir=str(tmp_path / "s"), cache_dir=str(tmp_path / "c"))
    order = TrialOrder(trial=5, params={"batch_size": 16, "_micro_batch": 13},
                       limits=TrialLimits(wall_limit_s=9.0, rungs=(16.0, 32.0), score_reserve_s=0.5,
                                          preflight_pace_s=0.01))
    trainable(order.to_config(), setup, engine=engine)

    assert sent and from_tune(sent[-1]).record.error is None, from_tune(sent[-1]).record.error
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {"wall": 9.0, "score": 0.5, "pace": 0.01, "rungs": [16.0, 32.0], "ceilings": False, "batch": 16}
    got = [from_tune(payload) for payload in sent]
    assert [type(r) for r in got] == [PhaseReport, WindowReport, RungReport, FinalReport]
    for payload, report in zip(sent, got):
        assert to_tune(report).keys() == payload.keys()
        assert from_tune(to_tune(report)) == report
    rung, final = got[2], got[3]
    assert (rung.rung, rung.values, rung.record.state, rung.record.trial) == (0, {"throughput": 90.0, "loss": 2.5},
                                                                              "stopped", 5)
    assert final.record.state == "complete" and final.record.params == {"batch_size": 16}
    assert final.record.wall_limit_s == 9.0 and (final.rung, final.budget_used) == (1, 32.0)  # the top rung
    assert final.values == {"throughput": 120.0, "loss": 2.0} and final.feasible


# The keys of Tune's config and results before the protocol, and the protocol's own: spelled only in _protocol.py.
WIRE = {"tuner_order", "tuner_report", "tuner_budget_used", "tuner_rung", "tuner_state", "tuner_feasible",
        "tuner_record", "tuner_phase", "tuner_limit_s", "_trial", "_wall_limit_s", "_repeat", "_round", "_rerun",
        "_rungs", "_score_reserve_s", "_preflight_pace_s", "tuner_ddp_workers"}
OLD_NAMES = {"STATE_KEY", "RECORD_KEY", "BUDGET_KEY", "RUNG_KEY", "PHASE_KEY", "LIMIT_KEY", "TRIAL_KEY", "WALL_KEY",
             "REPEAT_KEY", "ROUND_KEY", "RERUN_KEY", "RUNGS_KEY", "SCORE_KEY", "PACE_KEY", "FEASIBLE_KEY",
             "WORKERS_KEY"}


def _strings(path: Path) -> list[str]:
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.STRING:
            out.append(tok.string.lstrip("rRbBuUfF").strip("'\""))
    return out


def _offenders(path: Path) -> list[str]:
    """The protocol's wire keys spelled as strings in `path`, and the old key constants it names."""
    found = [repr(t) for t in _strings(path) if t in WIRE or t.startswith("objective_")]
    tree = ast.parse(path.read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    return found + sorted(names & OLD_NAMES)


def test_no_module_but_the_protocol_spells_its_keys_or_the_old_ones():
    protocol = ROOT / "tuner" / "search" / "_protocol.py"
    offenders = {str(p.relative_to(ROOT)): _offenders(p) for p in sorted((ROOT / "tuner").rglob("*.py"))
                 if p != protocol}
    assert {k: v for k, v in offenders.items() if v} == {}
    assert _offenders(protocol)  # the scan reads what the protocol spells


def test_the_scan_catches_a_planted_key(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text('from tuner.search._trial import TRIAL_KEY\nx = {"tuner_record": 1, f"objective_{y}": 2}\n')
    assert _offenders(planted) == ["'tuner_record'", "'objective_{y}'", "TRIAL_KEY"]
