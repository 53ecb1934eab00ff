"""The on-disk record of a study: what `tuner search` writes as trials end and what reports read.

Layout under `<reports-dir>/<study>/`:
  study.json               study metadata (space, objectives, workload, dataset, budget, sampler, hardware, versions)
  study.db                 the Optuna study (SQLite), unless --storage named another database
  trials/<NNNN>/result.json  one trial: {"trial", "state", "error", "params", "config", metrics..., "windows", ...}
  trials/<NNNN>/samples.png  GAN sample grid
  trials.csv               one row per trial, rewritten after every trial so it is current while the study runs
  ray/                     Ray Tune's experiment folder (resume)
Writes are atomic (temp file + rename) so a kill never leaves a half-written file.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from tuner.errors import StudyError

STUDY_META = "study.json"
TRIALS_DIR = "trials"
TRIALS_CSV = "trials.csv"
# Columns after trial/state/objectives and before the params, in this order.
MEASURED_COLUMNS = ["throughput_spread", "data_wait", "peak_mem_mb", "train_seconds", "error"]


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def trial_dir(study_dir: Path, trial: int) -> Path:
    return Path(study_dir) / TRIALS_DIR / f"{trial:04d}"


def write_study_meta(study_dir: Path, meta: dict[str, Any]) -> None:
    atomic_write_text(Path(study_dir) / STUDY_META, json.dumps(meta, indent=2, default=str))


def read_study_meta(study_dir: Path) -> dict[str, Any]:
    path = Path(study_dir) / STUDY_META
    if not path.is_file():
        raise StudyError(f"no study at {study_dir} (missing {STUDY_META}); run `tuner search` first or check --reports-dir")
    return json.loads(path.read_text())


def record_trial(study_dir: Path, record: dict[str, Any]) -> Path:
    """Persist one finished trial and refresh trials.csv. `record` must hold "trial" (int) and "state"."""
    path = trial_dir(study_dir, int(record["trial"])) / "result.json"
    atomic_write_text(path, json.dumps(record, indent=2, default=str))
    write_trials_csv(study_dir)
    return path


def load_trials(study_dir: Path) -> list[dict[str, Any]]:
    """All persisted trial records, by trial number. Unreadable files are skipped (a kill mid-write cannot
    produce one, but a user may edit them)."""
    out = []
    for path in sorted((Path(study_dir) / TRIALS_DIR).glob("*/result.json")):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return sorted(out, key=lambda r: int(r["trial"]))


def csv_columns(meta: dict[str, Any], trials: list[dict[str, Any]]) -> list[str]:
    objectives = [o["metric"] for o in meta.get("objectives", [])]
    params = list(meta.get("params", []))
    for rec in trials:  # params seen in records but not named in meta (user spaces) go last
        params += [p for p in rec.get("params", {}) if p not in params]
    return ["trial", "state", *objectives, *[c for c in MEASURED_COLUMNS if c not in objectives], *params]


def write_trials_csv(study_dir: Path) -> Path:
    study_dir = Path(study_dir)
    meta = read_study_meta(study_dir)
    trials = load_trials(study_dir)
    cols = csv_columns(meta, trials)
    rows = []
    for rec in trials:
        row = {c: rec.get(c) for c in cols}
        row.update({k: v for k, v in rec.get("params", {}).items() if k in cols})
        rows.append(row)
    fd, tmp = tempfile.mkstemp(dir=study_dir, prefix=f".{TRIALS_CSV}.")
    with os.fdopen(fd, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, study_dir / TRIALS_CSV)
    return study_dir / TRIALS_CSV
