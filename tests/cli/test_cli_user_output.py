"""A workload that prints (nanoGPT's constructor reports its size on stdout) never breaks `--format json`: what
the user's code prints goes to stderr, so stdout stays exactly one JSON document (or the table)."""

import json

from tuner.cli import main
from tests.helpers.userworkloads import HEADER, write

PRINTING = HEADER + '''

class Chatty(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 2)
        print("number of parameters: 0.10M")

    def forward(self, x):
        print("forward!")
        return self.net(x)


def make():
    print("building the workload")
    return tuner.Workload(models={"net": Chatty}, datasets=data,
                          loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]),
                          evaluate=evaluate, quality=("val_loss", "min"))
'''


def config(tmp_path):
    path = write(tmp_path, PRINTING, name="chatty.py")
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"workload: {path}:make\nbudget: {{samples: 64}}\nparams: {{batch_size: 8, device: cpu}}\n"
                   f"measure: {{warmup_steps: 1, windows: 2, ceiling_seconds: 0}}\n")
    return cfg


def test_train_json_with_a_printing_model_is_one_document(tmp_path, capsys):
    assert main(["train", "--config", str(config(tmp_path)), "--format", "json",
                 "--reports-dir", str(tmp_path / "r")]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)  # fails if the model's print reached stdout
    assert doc["state"] == "complete"
    assert "number of parameters: 0.10M" in err and "forward!" in err and "building the workload" in err


def test_train_table_keeps_the_models_prints_out_of_the_table(tmp_path, capsys):
    assert main(["train", "--config", str(config(tmp_path)), "--reports-dir", str(tmp_path / "r")]) == 0
    out, err = capsys.readouterr()
    assert "number of parameters" not in out and "throughput" in out and "number of parameters" in err


def test_profile_json_with_a_printing_model_is_one_document(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    assert main(["profile", "--config", str(config(tmp_path)), "--steps", "1", "--top", "3", "--format", "json",
                 "--reports-dir", str(tmp_path / "r")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["steps"] == 1 and "forward!" in err


def test_a_search_trial_sends_the_workloads_prints_to_stderr(tmp_path, capsys):
    """Trials run in Ray workers; a driver that shows their output (--verbose) copies their stdout to its own,
    which holds `tuner search --format json`'s document: a trial's prints go to the worker's stderr."""
    from tuner.space import parse_space
    from tuner.search._protocol import TrialOrder, record_of
    from tuner.search._trial import TrialSetup, run_one
    from tuner.study import Objective, TrialResult

    def engine(cfg, *, cache_dir, out_dir=None, wall_limit_s=None, setup=None, **_):
        print("number of parameters: 0.10M")
        return TrialResult(state="complete", throughput=100.0, train_seconds=0.1)

    space = parse_space({"objectives": [{"metric": "throughput", "direction": "max"}],
                         "params": {"batch_size": {"type": "categorical", "choices": [16, 32]}}},
                        source="test", name="test")
    setup = TrialSetup(space=space, base={"workload": "cnn", "dataset": "synthetic", "budget": {"samples": 64},
                                          "gpus": 0, "params": {"device": "cpu"}},
                       objectives=[Objective(metric="throughput", direction="max")],
                       study_dir=str(tmp_path / "study"), cache_dir=str(tmp_path / "cache"))
    record = record_of(run_one(TrialOrder(trial=0, params={"batch_size": 16}).to_config(), setup, engine=engine))
    out, err = capsys.readouterr()
    assert record.complete and out == "" and "number of parameters" in err
