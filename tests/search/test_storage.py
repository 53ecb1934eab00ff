"""The study folder's one writer of a trial's record (tuner.search._storage.keep_record, through tuner.study's
writer): the searcher hands it each trial after telling Optuna, reconcile_study each one a kill lost, and no other
module of tuner writes one."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFINED = ROOT / "tuner" / "study" / "writer.py"  # write_record itself
FACE = ROOT / "tuner" / "study" / "__init__.py"  # its re-export
KEEPER = ROOT / "tuner" / "search" / "_storage.py"


def _writers(path: Path) -> list[str]:
    """Where `path` names tuner.study's write_record (an import, a call, a reference): 'function:line' each,
    '<module>' outside any function."""
    found: list[str] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
            named = (isinstance(child, ast.Name) and child.id == "write_record") or \
                (isinstance(child, ast.Attribute) and child.attr == "write_record") or \
                (isinstance(child, ast.alias) and child.name.split(".")[-1] == "write_record")
            if named:
                found.append(f"{where}:{child.lineno}" if hasattr(child, "lineno") else where)
            visit(child, inner)

    visit(ast.parse(path.read_text()), "<module>")
    return found


def test_only_keep_record_writes_a_trial_s_record():
    offenders = {str(p.relative_to(ROOT)): _writers(p) for p in sorted((ROOT / "tuner").rglob("*.py"))
                 if p not in (DEFINED, FACE, KEEPER)}
    assert {k: v for k, v in offenders.items() if v} == {}
    # the keeper imports it once and calls it in keep_record alone
    assert [w.split(":")[0] for w in _writers(KEEPER)] == ["<module>", "keep_record"]


def test_the_scan_catches_a_planted_writer(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("import tuner.study as a\nfrom tuner.study import write_record as w\n\n\n"
                       "def record(folder, rec):\n    a.write_record(folder, rec)\n")
    assert _writers(planted) == ["<module>:2", "record:6"]


def test_a_record_a_kill_lost_comes_back_from_optuna_through_the_keeper(tmp_path):
    """The searcher told Optuna and wrote the folder; a kill took result.json and trials.csv: --resume's
    reconcile writes both back from the record Optuna keeps."""
    from tests.helpers.searchers import tiny_searcher
    from tuner.analysis import read_records
    from tuner.search._protocol import FinalReport, TrialOrder, to_tune
    from tuner.search._storage import reconcile_study
    from tuner.study import TrialRecord

    searcher, folder, _ = tiny_searcher(tmp_path / "s")
    order = TrialOrder.from_config(searcher.suggest("t1"))
    record = TrialRecord(trial=order.trial, state="complete", params=order.searched, windows=[90.0, 110.0],
                         metrics={"throughput": 100.0, "loss": 2.5})
    report = FinalReport(record=record, values={"throughput": 100.0, "loss": 2.5}, feasible=True)
    searcher.on_trial_complete("t1", result=to_tune(report))
    assert [r.trial for r in read_records(folder)] == [order.trial]
    (folder.trial_dir(order.trial) / "result.json").unlink()
    folder.csv_path.unlink()
    reconcile_study(folder, searcher._storage, "s")
    [back] = read_records(folder)
    assert (back.trial, back.state, back.throughput) == (order.trial, "complete", 100.0)
    assert folder.csv_path.is_file()
