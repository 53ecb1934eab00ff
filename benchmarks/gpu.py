"""The GPU proof (issue 38): every CUDA path exercised, and tuner's speed-up measured on GPU-sized models, in one call.

    bash benchmarks/gpu.sh OUT                 # on a GPU machine (benchmarks/GPU.md): at most 8 minutes
    python benchmarks/gpu.py OUT --dry-run     # on a CPU, tiny sizes, the same parts (CI: tests/benchmarks)
    python benchmarks/gpu.py OUT --dry-run --no-limits   # every part runs to its end, however loaded the CPU

Parts, each a fresh process under its own time limit, each failure recorded and the rest run on:
1. `cuda_tests`: `pytest -m cuda tests/cuda` (real CUDA; all skipped without a GPU, which the results say).
2. per model (torchvision ResNet-50 on synthetic 224x224 images, the nanoGPT-style LM of examples/charlm.py at
   6 layers x 384, pytorch/examples' DCGAN at 64x64 width 64 on digits; the dry run: tiny versions of each):
   `own` (`tuner train` of the model's own settings), `study` (`tuner search` over benchmarks/gpu_space.yaml:
   precision, TF32, channels_last, compile, batch split, loader, ...), `export` (the fastest trial whose quality
   is at least the own settings', else the knee), `tuned` (`tuner train` of the export, same budget as `own`),
   `plain` (benchmarks/gpu_plain.py: a plain PyTorch loop, written apart from tuner, with the export's settings,
   and with the own settings under PyTorch's own TF32 defaults), and `parity` (`tuner parity` of the export's
   numerics knobs against fp32; in the dry run, the LM's fp32 export is judged at bf16, so the path runs).
Writes OUT/gpu-proof.json and OUT/gpu-proof.md (device, torch and CUDA versions, every part's figure or the
reason it has none, and its time); OUT/work holds the studies and configs, OUT/logs each part's output.
Exit status 0 once the results are written, whatever the figures say. Over 400 lines because it must run alone
on a GPU machine in one call: the parts, their limits and the results' writers stay in one file.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SPACE = REPO / "benchmarks" / "gpu_space.yaml"
TARGET_SPEEDUP = 1.7  # tuned / own on at least one model, quality not worse
TARGET_FIDELITY = 0.10  # |tuner's reading / the plain loop's - 1| of the export
PARITY_MISSING = "not available in this version (the numerics parity verdict is issue #40)"


@dataclass(frozen=True)
class Model:
    key: str
    title: str
    workload: str
    options: dict[str, Any]
    dataset: str | None
    own: dict[str, Any]  # the model's own settings (the params of its `tuner train` config)
    batch: tuple[int, int]  # the study's batch size range
    compile: bool = True  # whether the study searches torch.compile
    dry_parity: bool = False  # the dry run judges bf16 with tuner parity (on a CPU bf16 convolutions crawl)


GPU_MODELS = (
    Model("resnet50", "torchvision ResNet-50, synthetic 224x224", "benchmarks/gpu_workloads.py:resnet",
          {"arch": "resnet50", "image_size": 224, "num_classes": 100}, None,
          {"batch_size": 256, "num_workers": 4, "pin_memory": True}, (64, 512),  # pytorch/examples imagenet's
          compile=False),  # a cold compile of ResNet-50's training step would outlast its short study
    Model("gpt", "nanoGPT-style char LM, 6 layers x 384, context 256", "examples/charlm.py:make",
          {"block_size": 256, "n_layer": 6, "n_head": 6, "n_embd": 384}, None,
          {"batch_size": 64, "num_workers": 0}, (16, 256)),  # nanoGPT's shakespeare_char batch, in fp32
    Model("dcgan64", "pytorch/examples DCGAN 64x64, width 64, digits", "gan", {"image_size": 64, "width": 64},
          "digits", {"batch_size": 64, "num_workers": 2}, (32, 512)),  # pytorch/examples dcgan's
)
DRY_MODELS = (
    Model("resnet50", "torchvision ResNet-18 (dry run), synthetic 16x16", "benchmarks/gpu_workloads.py:resnet",
          {"arch": "resnet18", "image_size": 16, "num_classes": 10, "n_train": 128, "n_val": 32}, None,
          {"batch_size": 16, "num_workers": 0}, (8, 32), compile=False),
    Model("gpt", "char LM (dry run), 2 layers x 64, context 32", "examples/charlm.py:make",
          {"block_size": 32, "n_layer": 2, "n_head": 4, "n_embd": 64}, None, {"batch_size": 16, "num_workers": 0},
          (8, 32), compile=False, dry_parity=True),
    Model("dcgan64", "DCGAN (dry run) 16x16, width 8, digits", "gan", {"image_size": 16, "width": 8}, "digits",
          {"batch_size": 16, "num_workers": 0}, (8, 32), compile=False),
)


@dataclass(frozen=True)
class Sizes:
    """Time limits (seconds) and budgets of one mode."""

    allowance: float  # the whole run; a part that cannot start in what is left is recorded as not run
    budget: dict[str, Any]  # each training run's (own, the study's trials, tuned): seconds or samples
    trials: int
    study_seconds: float | None
    plain_seconds: float
    parity_steps: int  # `tuner parity --steps`: optimizer steps of each of its three runs
    limits: dict[str, float]
    probe: bool
    parity_seconds: float | None = None  # the study's --parity-seconds (None: its own cap, or its --study-seconds share)


# On the GPU: 470 s in all (the call's 10 minutes hold the payload's set-up too), the CUDA tests first (at most
# 110 s: two cold Inductor compiles), then an equal share of what is left per model (about 120 s: own ~20 s, study
# ~50 s, export, tuned ~25 s, plain ~15 s, parity ~20 s; estimates, not GPU readings: a part that does not fit
# its model's share is recorded as not run, and the next model keeps its own share).
GPU = Sizes(allowance=470, budget={"seconds": 5}, trials=12, study_seconds=40, plain_seconds=3, parity_steps=12,
            limits={"cuda_tests": 110, "own": 40, "study": 75, "export": 15, "tuned": 60, "plain": 50, "parity": 40},
            probe=True)
DRY = Sizes(allowance=900, budget={"samples": 96}, trials=2, study_seconds=None, plain_seconds=1, parity_steps=8,
            limits={"cuda_tests": 120, "own": 90, "study": 200, "export": 60, "tuned": 90, "plain": 90,
                    "parity": 90}, probe=False, parity_seconds=0)  # the studies' own check: tests/search


@dataclass
class Part:
    """One part's outcome: a figure, or the reason there is none."""

    name: str
    status: str = "not run"  # ok, failed, timeout, not run
    seconds: float = 0.0
    figure: float | None = None
    unit: str = ""
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def unlimited(sizes: Sizes) -> Sizes:
    """`sizes` without the allowance and the parts' limits: what the parts do is checked, not how long they take
    (the dry run's parts ran past their limits on a loaded CI CPU, and a cut part has no figure to check)."""
    return replace(sizes, allowance=math.inf, limits={k: math.inf for k in sizes.limits})


class Proof:
    def __init__(self, out: Path, dry: bool, limits: bool = True) -> None:
        self.out, self.dry = out, dry
        self.sizes = DRY if dry else GPU
        if not limits:
            self.sizes = unlimited(self.sizes)
        self.models = DRY_MODELS if dry else GPU_MODELS
        self.work, self.logs = out / "work", out / "logs"
        for d in (self.work / "configs", self.logs):
            d.mkdir(parents=True, exist_ok=True)
        self.start = time.monotonic()
        self.until: float | None = None  # the current model's share of the allowance ends here
        self.run_stdout = ""  # the last part's stdout
        self.parts: list[Part] = []
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        self.env["PYTHONUNBUFFERED"] = "1"

    def left(self) -> float:
        """Seconds left: of the allowance, and of the current model's share of it (so a slow first model
        cannot leave the last one nothing)."""
        now = time.monotonic()
        left = self.sizes.allowance - (now - self.start)
        return min(left, self.until - now) if self.until is not None else left

    def log(self, line: str) -> None:
        print(f"[gpu-proof {time.monotonic() - self.start:6.1f}s] {line}", file=sys.stderr, flush=True)

    def run(self, part: Part, argv: list[str], kind: str) -> tuple[int | None, str]:
        """Run argv under the part's limit (or what is left); (exit status or None on timeout, stdout)."""
        limit = min(self.sizes.limits[kind], self.left())
        self.parts.append(part)
        if limit < 5:
            part.reason = (f"not run: {max(self.left(), 0):.0f} s left of this model's share of the "
                           f"{self.sizes.allowance:.0f} s allowance")
            self.log(f"{part.name}: {part.reason}")
            return None, ""
        self.log(f"{part.name}: {' '.join(argv)} ({f'limit {limit:.0f} s' if math.isfinite(limit) else 'no limit'})")
        log = self.logs / f"{part.name.replace('/', '-')}.log"
        t0 = time.monotonic()
        with open(log, "w") as err:
            proc = subprocess.Popen(argv, cwd=REPO, env=self.env, stdout=subprocess.PIPE, stderr=err, text=True,
                                    start_new_session=True)
            try:
                stdout, _ = proc.communicate(timeout=limit if math.isfinite(limit) else None)
                code = proc.returncode
            except subprocess.TimeoutExpired:
                _kill_tree(proc.pid)  # a study's Ray processes too: they would hold the GPU for the next parts
                stdout, _ = proc.communicate()
                code = None
        part.seconds = time.monotonic() - t0
        self.run_stdout = stdout or ""
        log.write_text(log.read_text() + (f"\n--- stdout ---\n{stdout}" if stdout else ""))
        if code is None:
            part.status, part.reason = "timeout", f"stopped at its limit of {limit:.0f} s (log: {log.name})"
        elif code != 0:
            part.status, part.reason = "failed", f"exit {code}: {_last_line(log)} (log: {log.name})"
        else:
            part.status = "ok"
        return code, stdout

    # --- parts ---------------------------------------------------------------------------------------------
    def cuda_tests(self) -> None:
        """pytest -m cuda, verbose: each test's outcome is read from its line as it ends, so a run stopped at its
        limit still says which tests passed (the JUnit file, when written, gives the totals)."""
        part = Part("cuda_tests", unit="tests passed")
        xml = self.out / "cuda-tests.xml"
        code, stdout = self.run(part, [sys.executable, "-m", "pytest", "-m", "cuda", "tests/cuda", "-v", "-rs",
                                       "-p", "no:cacheprovider", f"--junitxml={xml}"], "cuda_tests")
        outcomes = _outcomes(stdout)
        counts = _junit(xml) or {"tests": len(outcomes), "failed": sum(v == "FAILED" for v in outcomes.values()),
                                 "errors": sum(v == "ERROR" for v in outcomes.values()),
                                 "skipped": sum(v == "SKIPPED" for v in outcomes.values()),
                                 "passed": sum(v == "PASSED" for v in outcomes.values())}
        part.details = {**counts, "tests_run": outcomes}
        part.figure = counts["passed"] if counts["tests"] else None
        if part.status == "ok" and counts["passed"] == 0:
            part.reason = f"all {counts['skipped']} skipped: no CUDA GPU here"
        elif code not in (0, None):
            part.reason = f"{counts['failed']} failed, {counts['errors']} errors of {counts['tests']} (log: cuda_tests.log)"
        elif code is None:
            part.reason = (f"{part.reason}; {counts['passed']} passed, {counts['failed']} failed before it "
                           f"(the compile tests run last)")

    def config(self, model: Model, params: dict[str, Any]) -> dict[str, Any]:
        return {"workload": model.workload, "workload_options": model.options,
                **({"dataset": model.dataset} if model.dataset else {}), "budget": self.sizes.budget,
                "params": {"precision": "fp32", **params}}

    def train(self, name: str, model: Model, path: Path, kind: str) -> dict[str, Any] | None:
        part = Part(name, unit="samples/s")
        code, stdout = self.run(part, [sys.executable, "-m", "tuner", "train", "--config", str(path), "--format",
                                       "json", "--reports-dir", str(self.work), "--out-dir",
                                       str(self.work / name.replace("/", "-"))], kind)
        result = _json(stdout)
        if result is None:
            part.reason = part.reason or "no JSON on stdout"
            return None
        part.details = {k: result.get(k) for k in ("state", "error", "throughput", "throughput_spread", "data_wait",
                                                   "peak_mem_mb", "of_peak", "compile_seconds", "train_seconds",
                                                   "wall_seconds", "samples", "unit_throughput", "sample_unit",
                                                   "val_loss", "fid", "accuracy", "device", "optimizer")
                        if result.get(k) is not None}
        if result.get("state") != "complete":
            part.status, part.reason = "failed", f"state {result.get('state')}: {result.get('error')}"
            return None
        part.figure = result.get("throughput")
        return result

    def model(self, model: Model) -> dict[str, Any]:
        key, configs = model.key, self.work / "configs"
        row: dict[str, Any] = {"model": key, "title": model.title}
        own_path = configs / f"{key}-own.yaml"
        own_path.write_text(_yaml(self.config(model, model.own)))
        own = self.train(f"{key}/own", model, own_path, "own")
        quality_key = "fid" if model.workload == "gan" else "val_loss"
        row.update(own=own and own.get("throughput"), own_quality=own and own.get(quality_key), quality=quality_key)

        space = self.work / f"space-{key}.yaml"
        space.write_text(_yaml(study_space(model, self.dry)))
        study = f"gpu-{key}"
        argv = [sys.executable, "-m", "tuner", "search", "--space", str(space), "--study", study, "--workload",
                model.workload, "--trials", str(self.sizes.trials), "--confirm", "0", "--reports-dir",
                str(self.work), "--format", "json", "--probe" if self.sizes.probe else "--no-probe"]
        argv += [a for k, v in model.options.items() for a in ("-o", f"{k}={v}")]
        argv += ["--dataset", model.dataset] if model.dataset else []
        b = self.sizes.budget
        argv += ["--budget-seconds", str(b["seconds"])] if "seconds" in b else ["--budget-samples", str(b["samples"])]
        if self.sizes.study_seconds:
            argv += ["--study-seconds", str(self.sizes.study_seconds)]
        if self.sizes.parity_seconds is not None:
            argv += ["--parity-seconds", f"{self.sizes.parity_seconds:g}"]
        part = Part(f"{key}/study", unit="trials complete")
        self.run(part, argv, "study")
        part.details = study_summary(self.work / study)
        part.figure = part.details.get("complete")
        if not part.figure and not part.reason:
            part.reason = f"no complete trial: {part.details.get('states') or 'no trial recorded'}"

        tuned_path = configs / f"{key}-tuned.yaml"
        pick = self.export(model, study, tuned_path, row.get("own_quality"))
        row["pick"] = pick
        tuned = None
        if pick is not None:
            cfg = _read_yaml(tuned_path)
            cfg["budget"] = self.sizes.budget  # the own settings' budget (the study's, unless it differs)
            cfg.pop("provenance", None)
            tuned_path.write_text(_yaml(cfg))
            row["tuned_params"] = cfg.get("params")
            tuned = self.train(f"{key}/tuned", model, tuned_path, "tuned")
        else:
            self.parts.append(Part(f"{key}/tuned", reason="not run: nothing exported"))
        row.update(tuned=tuned and tuned.get("throughput"), tuned_quality=tuned and tuned.get(quality_key))
        if row["own"] and row["tuned"]:
            row["speedup"] = row["tuned"] / row["own"]
        if row["own_quality"] is not None and row["tuned_quality"] is not None:
            row["quality_not_worse"] = row["tuned_quality"] <= row["own_quality"]

        plain = Part(f"{key}/plain", unit="tuner / plain")
        if pick is None:
            plain.reason = "not run: nothing exported"
            self.parts.append(plain)
        else:
            _, stdout = self.run(plain, [sys.executable, "benchmarks/gpu_plain.py", "--own", str(own_path),
                                         "--tuned", str(tuned_path), "--seconds", str(self.sizes.plain_seconds),
                                         "--cache-dir", str(self.work / ".cache")], "plain")
            out = _json(stdout)
            if out is not None:
                plain.details = out
                row["plain_tuned"] = (out.get("tuned") or {}).get("throughput")
                row["plain_own_torch_tf32"] = (out.get("own") or {}).get("throughput")
                if row["plain_tuned"] and row["tuned"]:
                    plain.figure = row["fidelity"] = row["tuned"] / row["plain_tuned"]
                if row["plain_tuned"] and row["plain_own_torch_tf32"]:
                    row["plain_speedup"] = row["plain_tuned"] / row["plain_own_torch_tf32"]
            elif plain.status == "ok":
                plain.status, plain.reason = "failed", "no JSON on stdout"
        row["parity"] = self.parity(model, tuned_path if pick is not None else None)
        return row

    def parity(self, model: Model, tuned: Path | None) -> str:
        """`tuner parity` of the export's numerics knobs (the dry run's fp32 export: bf16, so the path runs), or
        why there is no verdict."""
        part = Part(f"{model.key}/parity", unit="")
        if not (REPO / "tuner" / "cli" / "parity.py").is_file():
            part.status, part.reason = "not available", PARITY_MISSING
        elif tuned is None:
            part.reason = "not run: nothing exported"
        elif self.dry and not model.dry_parity:
            part.reason = ("not run in the dry run: its fp32 export has no numerics knob, and bf16 convolutions are "
                           "emulated on a CPU (minutes); the LM's parity runs the same code at bf16")
        if part.reason:
            self.parts.append(part)
            return part.reason
        argv = [sys.executable, "-m", "tuner", "parity", "--config", str(tuned), "--steps",
                str(self.sizes.parity_steps), "--format", "json", "--reports-dir", str(self.work)]
        argv += ["--knob", "precision=bf16"] if self.dry else []
        self.run(part, argv, "parity")
        verdicts = (_json(self.run_stdout) or {}).get("verdicts") or []
        if verdicts:
            part.details = {"verdicts": verdicts}
            part.reason = "no figure: " + "; ".join(str(v.get("text") or v.get("state")) for v in verdicts)
            return "; ".join(str(v.get("text") or v.get("state")) for v in verdicts)
        return part.reason or "no verdict on stdout"

    def export(self, model: Model, study: str, path: Path, own_quality: float | None) -> str | None:
        """The fastest trial at least as good as the own settings' quality; else the knee (tuner's default pick)."""
        base = [sys.executable, "-m", "tuner", "export", study, "--reports-dir", str(self.work), "--out", str(path),
                "--format", "json"]
        tries = ([("throughput", ["--pick", "throughput", "--min-quality", repr(float(own_quality))])]
                 if own_quality is not None else []) + [("knee", ["--pick", "knee"])]
        for i, (pick, extra) in enumerate(tries):
            part = Part(f"{model.key}/export" + ("" if i == 0 else f"-{pick}"), unit="")
            code, _ = self.run(part, base + extra, "export")
            if code == 0 and path.is_file():
                said = "fastest at least as good as own" if pick == "throughput" else "knee"
                part.details = {"pick": pick, "params": _read_yaml(path).get("params")}
                part.reason = f"no figure: exported the {said} pick"
                return said
        return None

    def environment(self) -> dict[str, Any]:
        import torch

        env: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                               "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                               "cpus": os.cpu_count(), "host": platform.node(), "dry_run": self.dry,
                               "commit": _git("rev-parse", "HEAD"), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                          time.gmtime())}
        if torch.cuda.is_available():
            i = torch.cuda.current_device()
            props = torch.cuda.get_device_properties(i)
            env.update(device=torch.cuda.get_device_name(i), capability=".".join(map(str, props.major_minor()))
                       if hasattr(props, "major_minor") else f"{props.major}.{props.minor}",
                       gpu_memory_gb=round(props.total_memory / 2**30, 1), driver=_smi())
        else:
            env["device"] = f"cpu ({platform.machine()}), no CUDA GPU"
        for mod in ("ray", "optuna", "torchvision"):
            try:
                env[mod] = __import__(mod).__version__
            except Exception as err:  # noqa: BLE001 - a missing library is a line in the results, not a crash
                env[mod] = f"missing: {type(err).__name__}"
        return env

    def main(self) -> dict[str, Any]:
        env = self.environment()
        self.log(f"device {env['device']}, torch {env['torch']}, CUDA {env['cuda']}")
        self.cuda_tests()
        rows = []
        for i, model in enumerate(self.models):
            self.until = None
            self.until = time.monotonic() + self.left() / (len(self.models) - i)
            try:
                rows.append(self.model(model))
            except Exception as err:  # noqa: BLE001 - one model's crash is its row's reason; the rest run
                rows.append({"model": model.key, "title": model.title, "error": f"{type(err).__name__}: {err}"})
                self.log(f"{model.key}: {type(err).__name__}: {err}")
        results = {"environment": env, "seconds": time.monotonic() - self.start, "models": rows,
                   "parts": [asdict(p) for p in self.parts], "targets": targets(rows)}
        (self.out / "gpu-proof.json").write_text(json.dumps(results, indent=1, default=str))
        (self.out / "gpu-proof.md").write_text(markdown(results))
        self.log(f"wrote {self.out / 'gpu-proof.json'} and gpu-proof.md in {results['seconds']:.0f} s")
        return results


def study_space(model: Model, dry: bool) -> dict[str, Any]:
    """benchmarks/gpu_space.yaml for one model: its batch range; compile only where it is searched (the dry run
    never: a CPU compile costs minutes)."""
    space = _read_yaml(SPACE)
    params = space["params"]
    params["batch_size"].update(low=model.batch[0], high=model.batch[1])
    if not model.compile or dry:
        params.pop("compile", None)
    if dry:
        params["num_workers"]["high"] = 1
    return space


def study_summary(folder: Path) -> dict[str, Any]:
    """Trial states and the fastest complete trial, read from the study folder's trial records."""
    states: dict[str, int] = {}
    best = None
    for rec in sorted(folder.glob("trials/*/result.json")) if folder.is_dir() else []:
        data = _json(rec.read_text()) or {}
        state = str(data.get("state"))
        states[state] = states.get(state, 0) + 1
        if state == "complete" and (best is None or (data.get("throughput") or 0) > best):
            best = data.get("throughput")
    return {"states": states, "complete": states.get("complete", 0), "best_throughput": best}


def targets(rows: list[dict[str, Any]]) -> dict[str, Any]:
    hit = [r["model"] for r in rows if (r.get("speedup") or 0) >= TARGET_SPEEDUP and r.get("quality_not_worse")]
    fid = {r["model"]: r.get("fidelity") for r in rows}
    return {"speedup": {"target": f">= {TARGET_SPEEDUP}x own settings on one model, quality not worse",
                        "met_by": hit, "met": bool(hit)},
            "fidelity": {"target": f"tuner / plain loop within {TARGET_FIDELITY:.0%}", "ratios": fid,
                         "met": bool(fid) and all(v is not None and abs(v - 1) <= TARGET_FIDELITY
                                                  for v in fid.values())}}


def markdown(res: dict[str, Any]) -> str:
    env = res["environment"]
    f = lambda v, d=3: "-" if v is None else f"{v:.{d}g}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = [f"# GPU proof{' (dry run: tiny sizes, no figures to read)' if env.get('dry_run') else ''}", "",
             f"{env.get('device')}; torch {env.get('torch')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, "
             f"driver {env.get('driver', '-')}; python {env.get('python')}, {env.get('cpus')} CPUs; commit "
             f"{env.get('commit')}; {env.get('started')}; {res['seconds']:.0f} s in all.", "",
             "| model | own samples/s | tuned samples/s | speed-up | quality (own -> tuned) | pick | plain loop: "
             "tuned / own (PyTorch TF32 defaults) | fidelity (tuner / plain) | parity |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in res["models"]:
        q = f"{r.get('quality', '')} {f(r.get('own_quality'))} -> {f(r.get('tuned_quality'))}"
        lines.append(f"| {r.get('title', r['model'])} | {f(r.get('own'), 4)} | {f(r.get('tuned'), 4)} | "
                     f"{f(r.get('speedup'))} | {q} | {r.get('pick') or '-'} | {f(r.get('plain_speedup'))} | "
                     f"{f(r.get('fidelity'))} | {r.get('parity') or r.get('error', '-')} |")
    t = res["targets"]
    lines += ["", f"Speed-up target ({t['speedup']['target']}): {'met by ' + ', '.join(t['speedup']['met_by']) if t['speedup']['met'] else 'not met'}.",
              f"Fidelity target ({t['fidelity']['target']}): {'met' if t['fidelity']['met'] else 'not met'}.",
              "", "| part | status | seconds | figure | reason |", "|---|---|---|---|---|"]
    for p in res["parts"]:
        fig = "-" if p["figure"] is None else f"{f(p['figure'], 4)} {p['unit']}".strip()
        lines.append(f"| {p['name']} | {p['status']} | {p['seconds']:.1f} | {fig} | {p['reason'] or ''} |")
    return "\n".join(lines) + "\n"


def _junit(xml: Path) -> dict[str, int]:
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(xml).getroot()
    except (OSError, ET.ParseError):
        return {}
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")} if suite is not None else {}
    if not n:
        return {}
    return {"tests": n["tests"], "failed": n["failures"], "errors": n["errors"], "skipped": n["skipped"],
            "passed": n["tests"] - n["failures"] - n["errors"] - n["skipped"]}


def _outcomes(text: str) -> dict[str, str]:
    """pytest -v's `path::test[param] PASSED  [ 5%]` lines: each test's outcome, in the order they ran."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) >= 2 and "::" in parts[0] and parts[1] in ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL"):
            out[parts[0]] = parts[1]
    return out


def _json(text: str) -> dict[str, Any] | None:
    """The last JSON object in `text` (a command's stdout may carry a model's print before its document)."""
    text = (text or "").strip()
    for start in [i for i, ch in enumerate(text) if ch == "{" and (i == 0 or text[i - 1] == "\n")]:
        try:
            out = json.loads(text[start:])
            return out if isinstance(out, dict) else None
        except ValueError:
            continue
    return None


def _yaml(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False)


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(Path(path).read_text()) or {}


def _last_line(log: Path) -> str:
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def _kill_tree(pid: int) -> None:
    """Kill a part's process, its process group and every process it started (Ray's raylet and workers)."""
    import signal

    procs: list[Any] = []
    try:
        import psutil

        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except Exception:  # noqa: BLE001 - no psutil, or the process is gone: its group is still killed
        pass
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    for p in procs:
        try:
            p.kill()
        except Exception:  # noqa: BLE001 - gone already
            pass


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip() \
            or "unknown (no git checkout)"
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"


def _smi() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
        return out.splitlines()[0] if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="The GPU proof (issue 38), in one call.")
    ap.add_argument("out", type=Path, help="folder for gpu-proof.json, gpu-proof.md, logs/ and work/")
    ap.add_argument("--dry-run", action="store_true", help="tiny sizes on any machine (CPU): the script's own check")
    ap.add_argument("--no-limits", action="store_true", help="no allowance and no part's time limit: every part runs "
                    "to its end (the dry run's check on a loaded CPU)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    Proof(args.out.resolve(), args.dry_run, limits=not args.no_limits).main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
