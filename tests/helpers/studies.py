"""A fake but realistic study on disk, written the way `tuner search` writes one (study.json + trial records).

The `make_study` fixture (tests/conftest.py) writes it; study, report and CLI tests read it back."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Callable

from tuner.config import Budget, Params, TrialConfig, dump_config
from tuner.study import StudyFolder, StudyMeta, TrialRecord
from tuner.analysis import read_records
from tests.helpers.records import write_record

SEARCHED = ["batch_size", "num_workers", "precision", "beta1"]


def _png(path: Path, shade: int) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.new("L", (34, 34), color=shade)
    for i in range(0, 34, 3):
        img.putpixel((i, i), 255 - shade)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    path.write_bytes(buf.getvalue())


def _record(study_dir: Path, n: int, state: str, params: dict[str, Any], *, throughput: float | None = None,
            fid: float | None = None, data_wait: float | None = 0.05, error: str | None = None,
            grid: str | None = None) -> dict[str, Any]:
    p = Params(batch_size=params["batch_size"], num_workers=params["num_workers"], precision=params["precision"],
               beta1=params["beta1"], prefetch_factor=2 if params["num_workers"] else None,
               persistent_workers=bool(params["num_workers"]), device="cpu")
    cfg = TrialConfig(workload="gan", dataset="digits", budget=Budget(seconds=5), params=p)
    rec: dict[str, Any] = {
        "trial": n, "state": state, "error": error, "params": params, "config": dump_config(cfg),
        "throughput": throughput, "throughput_spread": 0.04 if throughput else None,
        "windows": [throughput * f for f in (0.97, 1.0, 1.02, 0.99, 1.01)] if throughput else [],
        "data_wait": data_wait if throughput else None, "peak_mem_mb": 812.5 + 10 * n,
        "train_seconds": 5.2 if state == "complete" else 1.1, "samples": 3200, "steps": 50, "capped": False,
        "loss_curve": [[640 * (i + 1), 1.4 - 0.1 * i] for i in range(5)] if throughput else [],
        "device": "cpu (x86_64)", "sample_grid": None,
        "started": f"2026-11-22T10:{n:02d}:00+00:00", "ended": f"2026-11-22T10:{n:02d}:30+00:00",
    }
    if state == "complete":
        rec.update({"fid": fid, "fid_features": "classifier", "fid_samples": 256, "quality_seconds": 1.5})
    if grid == "relative":
        _png(StudyFolder(study_dir).trial_dir(n) / "samples.png", 40 + 20 * n)
        rec["sample_grid"] = f"trials/{n:04d}/samples.png"
    elif grid == "absolute":
        _png(StudyFolder(study_dir).trial_dir(n) / "samples.png", 40 + 20 * n)
        rec["sample_grid"] = str((StudyFolder(study_dir).trial_dir(n) / "samples.png").resolve())
    return rec


def _params(bs: int, nw: int, prec: str = "fp32", b1: float = 0.5) -> dict[str, Any]:
    return {"batch_size": bs, "num_workers": nw, "precision": prec, "beta1": b1}


def gan_trials(study_dir: Path) -> list[dict[str, Any]]:
    """Front = trials 1 (fastest, worst fid), 2 (knee), 4 (best fid); 0 and 5 dominated; 3 oom; 6 diverged; 7 error."""
    return [
        _record(study_dir, 0, "complete", _params(64, 0), throughput=400.0, fid=30.0, grid="relative"),
        _record(study_dir, 1, "complete", _params(256, 1), throughput=900.0, fid=40.0, data_wait=0.45,
                grid="absolute"),
        _record(study_dir, 2, "complete", _params(128, 1), throughput=700.0, fid=22.0, data_wait=0.2,
                grid="relative"),
        _record(study_dir, 3, "oom", _params(4096, 2), error="OutOfMemoryError: CUDA out of memory. Tried to "
                "allocate 2.00 GiB"),
        _record(study_dir, 4, "complete", _params(32, 0, b1=0.3), throughput=300.0, fid=18.0),
        _record(study_dir, 5, "complete", _params(64, 2, "bf16"), throughput=35.0, fid=25.0),
        _record(study_dir, 6, "diverged", _params(512, 1, "fp16", 0.9), throughput=850.0,
                error="non-finite training loss"),
        _record(study_dir, 7, "error", _params(64, 1), error="RuntimeError: DataLoader worker (pid 123) is killed"),
    ]


def asha_trials(study_dir: Path) -> list[dict[str, Any]]:
    """A study a rung scheduler ran (budget 45 s, rungs at 5, 15, 45 s): trials 0-2 complete at the top rung (front
    = 1 and 2, the knee 2), trial 3 stopped at rung 0 with figures that would beat every complete trial if a 5 s
    reading were ranked against 45 s ones, trial 4 stopped at rung 1, trial 5 oom."""
    out = [_record(study_dir, 0, "complete", _params(64, 0), throughput=400.0, fid=30.0),
           _record(study_dir, 1, "complete", _params(256, 1), throughput=900.0, fid=40.0),
           _record(study_dir, 2, "complete", _params(128, 1), throughput=700.0, fid=22.0),
           _record(study_dir, 3, "stopped", _params(512, 1), throughput=1000.0),
           _record(study_dir, 4, "stopped", _params(32, 0, b1=0.3), throughput=350.0),
           _record(study_dir, 5, "oom", _params(4096, 2), error="OutOfMemoryError: CUDA out of memory")]
    for rec, rung, at in zip(out, (2, 2, 2, 0, 1, 0), (45.0, 45.2, 45.1, 5.0, 15.1, None)):
        rec.update(rung=rung, measured_at=at)
    out[3].update(fid=10.0, fid_features="classifier", fid_samples=256)
    out[4].update(fid=50.0, fid_features="classifier", fid_samples=256)
    return out


def cnn_trials() -> list[dict[str, Any]]:
    out = []
    for n, (bs, thr, loss) in enumerate([(64, 1500.0, 0.31), (256, 2600.0, 0.45), (32, 900.0, 0.52)]):
        cfg = TrialConfig(workload="cnn", budget=Budget(samples=4096), params=Params(batch_size=bs, device="cpu"))
        out.append({"trial": n, "state": "complete", "error": None, "params": {"batch_size": bs},
                    "config": dump_config(cfg), "throughput": thr, "throughput_spread": 0.1, "windows": [thr] * 3,
                    "data_wait": 0.02, "peak_mem_mb": 400.0, "train_seconds": 3.0, "samples": 4096, "steps": 64,
                    "capped": False, "loss_curve": [[1024, 2.1], [4096, 0.6]], "device": "cpu", "sample_grid": None,
                    "loss": loss, "accuracy": 1 - loss / 2, "quality_seconds": 0.2})
    return out


def study_meta(name: str, workload: str = "gan") -> dict[str, Any]:
    quality = "fid" if workload == "gan" else "loss"
    return {
        "name": name, "space": "default", "space_source": "tuner/spaces/default.yaml",
        "space_def": {"batch_size": {"type": "int", "low": 16, "high": 4096, "log": True},
                      "num_workers": {"type": "int", "low": 0, "high": 2},
                      "precision": {"type": "categorical", "choices": ["fp32", "fp16", "bf16"]},
                      "beta1": {"type": "float", "low": 0.0, "high": 0.9}},
        "params": SEARCHED,
        "objectives": [{"metric": "throughput", "direction": "maximize"}, {"metric": quality, "direction": "minimize"}],
        "workload": workload, "dataset": "digits", "budget": {"seconds": 5}, "trials": 8, "sampler": "tpe",
        "seed": 0, "storage": "sqlite:///reports/" + name + "/study.db", "created": "2026-11-22T09:59:00+00:00",
        "hardware": {"cpu": "x86_64, 2 cores", "gpu": None, "memory_gb": 24},
        "versions": {"tuner": "0.1.0", "torch": "2.14.1", "ray": "2.60.0", "optuna": "5.0.0"},
    }


def study_maker(tmp_path: Path) -> Callable[..., Path]:
    """make_study(name, kind) -> reports dir. kind: "gan" (8 trials, see gan_trials), "failed" (no complete trial),
    "cnn" (3 classifier trials scored on validation loss), "asha" (a rung scheduler's study, see asha_trials), "empty"
    (no trial recorded yet)."""

    def make(name: str = "gan-demo", kind: str = "gan") -> Path:
        reports = tmp_path / "reports"
        study_dir = reports / name
        folder = StudyFolder(study_dir)
        folder.write_meta(StudyMeta.model_validate(study_meta(name)))
        if kind == "gan":
            records = gan_trials(study_dir)
        elif kind == "failed":
            records = [r for r in gan_trials(study_dir) if r["state"] != "complete"]
        elif kind == "asha":
            folder.write_meta(StudyMeta.model_validate({**study_meta(name), "budget": {"seconds": 45}}))
            records = asha_trials(study_dir)
        elif kind == "cnn":
            folder.write_meta(StudyMeta.model_validate(study_meta(name, "cnn")))
            records = cnn_trials()
        else:
            records = []
        for rec in records:
            write_record(folder, TrialRecord.model_validate(rec))
        return reports

    return make


def load_trials(study_dir: Path) -> list[dict[str, Any]]:
    """The study's records as the JSON users read (result.json's shape)."""
    return [r.to_json() for r in read_records(StudyFolder(study_dir))]


def stored_trials(study_dir: Path) -> dict[int, dict[str, Any]]:
    """What each trial recorded itself, by number: its result.json as written (the views add what the study
    measured later for the same knobs, e.g. ceilings from its confirmation re-runs)."""
    import json

    out = {}
    for path in sorted(study_dir.glob("trials/*/result.json")):
        data = json.loads(path.read_text())
        out[int(data["trial"])] = data
    return out


def read_meta(study_dir: Path) -> dict[str, Any]:
    return StudyFolder(study_dir).read_meta().model_dump(mode="json")


def goodput_study(reports: Path, name: str = "cnn-goodput", noise_scale: float | None = 900.0) -> Path:
    """cnn_trials() in a study whose baseline (trial 0, batch 64) measured `noise_scale` (None: not measured);
    every trial recorded its effective batch (its batch_size) and its Adam's lr: 1e-3, but trial 1 (batch 256) the
    linear rule's 4e-3. Returns the study's folder."""
    study_dir = reports / name
    folder = StudyFolder(study_dir)
    folder.write_meta(StudyMeta.model_validate({**study_meta(name, "cnn"),
                                                "baseline": {"trial": 0, "params": {"batch_size": 64}}}))
    for rec in cnn_trials():
        rec["effective_batch"] = rec["params"]["batch_size"]
        rec["optimizer"] = {"train": {"optimizer": "Adam", "lr": 4e-3 if rec["trial"] == 1 else 1e-3}}
        if rec["trial"] == 0 and noise_scale is not None:
            rec["noise_scale"] = noise_scale
        write_record(folder, TrialRecord.model_validate(rec))
    return study_dir


def target_study(reports: Path, name: str = "gan-demo") -> Path:
    """The gan study (make_study) given a target (fid <= 30) and a baseline (trial 0), confirmed on it (issue 34):
    trial 2 reached it in 4 s, its re-runs in 5 s, 3.2 s and not at all; the baseline in 12 s, its re-runs in 11,
    13 and 12.5 s; trial 1 ended `not reached` and so did its 3 re-runs. Every re-run read throughput and fid.
    Returns the study's folder."""
    from tests.helpers.records import write_rerun
    from tuner.study import Rerun

    folder = StudyFolder(reports / name)
    target = {"metric": "fid", "direction": "minimize", "value": 30.0, "eval_every_samples": 1600,
              "source": "given", "evaluations": [], "cap_seconds": 36.0}
    folder.write_meta(folder.read_meta().model_copy(update={"target": target,
                                                            "baseline": {"trial": 0, "params": {}}}))
    first = {0: 12.0, 2: 4.0}  # each as run_trial records it: the estimate is samples to target / throughput
    for rec in read_records(folder):
        if rec.trial in first:
            rec.metrics.update(time_to_target=first[rec.trial], samples_to_target=3200,
                               estimated_time_to_target=3200 / rec.throughput)
            write_record(folder, rec)
        elif rec.trial == 1:
            write_record(folder, rec.model_copy(update={"state": "not reached"}))
    for trial, times in {2: [5.0, 3.2, None], 0: [11.0, 13.0, 12.5], 1: [None, None, None]}.items():
        for k, t in enumerate(times):
            write_rerun(folder, trial, Rerun(repeat=k, seed=1 + k, state="complete" if t else "not reached",
                                             metrics={"throughput": 100.0 + k, "fid": 25.0 if t else 35.0,
                                                      **({"time_to_target": t, "samples_to_target": 3200 + 1600 * k,
                                                          "estimated_time_to_target": (3200 + 1600 * k) / (100.0 + k)}
                                                         if t else {})}))
    return folder.path


def disk_state(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file below `folder` with its sha256 and mtime: what 'nothing on disk changed' compares. SQLite's
    shared-memory index of a write-ahead database (`*.db-shm`) is left out: any connection rewrites it, it holds
    none of the study's data, and SQLite rebuilds it from the database and its log."""
    import hashlib

    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.endswith("-shm")}
