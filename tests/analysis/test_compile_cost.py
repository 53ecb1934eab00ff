"""The compile break-even: arithmetic, the sentence, and the study's eager trials it compares with."""

from tuner.analysis import break_even_seconds, break_even_text, eager_reference, study_payback
from tuner.study import TrialRecord


def record(trial, throughput, compile_s=None, state="complete", **params):
    metrics = {"throughput": throughput}
    if compile_s is not None:
        metrics.update(compile_seconds=compile_s, graph_breaks=1, recompiles=0)
    return TrialRecord(trial=trial, state=state, params={"batch_size": 64, "precision": "fp32", **params},
                       metrics=metrics)


def test_break_even_is_when_the_compiled_run_catches_up_with_eager():
    # 40 s of compiling at twice eager's speed: at t = 80 s eager has 80 x 100 samples, compiled 40 x 200.
    assert break_even_seconds(40, 200, 100) == 80
    assert break_even_seconds(40, 100, 100) is None and break_even_seconds(40, 90, 100) is None
    assert break_even_text(41, 110, 100, "x").startswith("pays back its 41 s of compiling after 8 min of training")
    assert break_even_text(41, 90, 100, "x").startswith("never pays back its 41 s of compiling")
    assert "no eager speed" in break_even_text(41, 90, None, "x")


def test_the_eager_reference_is_the_studys_eager_trials_at_the_same_batch_and_precision():
    compiled = record(5, 300.0, compile_s=60.0, compile="default")
    records = [record(0, 100.0), record(1, 140.0, compile="off"), record(2, 999.0, batch_size=128),
               record(3, 999.0, precision="bf16"), record(4, 999.0, state="error"), compiled]
    assert eager_reference(compiled, records) == (120.0, 2)
    line = study_payback(compiled, records)
    assert "after 2 min" in line and "median of the study's 2 eager trials" in line and "1 graph breaks" in line
    assert study_payback(records[0], records) is None
