"""A process that trains and scores the built-in GAN or CNN on digits (classifier FID features, the default)
imports neither torchvision, torchmetrics nor scipy: 1.5-3 s of CPU that every trial process, confirmation
re-run, pre-flight and `tuner train` paid before tuner read digits, drew samples.png and did FID's arithmetic
itself.

torch._dynamo is not on the list: torch 2.14's optimizers import it at their first step (torch.optim.optimizer's
_use_grad), so every process that trains pays it whatever tuner imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tuner.config import Quality
from tuner.device import resolve_device
from tuner.measure.fid import warm_up_fid

HEAVY = ("torchvision", "torchmetrics", "scipy", "sklearn", "matplotlib")

PROBE = """
import json, math, sys
from pathlib import Path
from tuner.config import Budget, Params, Quality, TrialConfig
from tuner.device import resolve_device
from tuner.train import check_workload, run_trial

cache, out = Path(sys.argv[1]), Path(sys.argv[2])
cpu = resolve_device("cpu")
seen = {}
for name in ("gan", "cnn"):
    cfg = TrialConfig(workload=name, dataset="digits", budget=Budget(samples=64), quality=Quality(fid_samples=128),
                      params=Params(batch_size=32, device="cpu"))
    check_workload(cfg, cache, cpu)  # the pre-flight: builds, steps and scores the workload
    result = run_trial(cfg, cache_dir=cache, out_dir=out / name, device=cpu, measure_ceilings=False)
    quality = result.metrics.get("fid" if name == "gan" else "loss")
    seen[name] = [result.state, quality is not None and math.isfinite(quality)]
seen["samples.png"] = (out / "gan" / "samples.png").is_file()
seen["heavy"] = [m for m in HEAVY if m in sys.modules]
print(json.dumps(seen))
"""


def test_a_digits_gan_and_cnn_trial_imports_no_torchvision_torchmetrics_or_scipy(digits, cache, tmp_path):
    warm_up_fid(digits, Quality(), cache, resolve_device("cpu"))  # the classifier and real statistics, built here
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # the CPU, on a GPU host too
    probe = PROBE.replace("HEAVY", repr(HEAVY))
    out = subprocess.run([sys.executable, "-c", probe, str(cache), str(tmp_path)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["gan"] == ["complete", True] and seen["cnn"] == ["complete", True] and seen["samples.png"], seen
    assert seen["heavy"] == [], f"imported by a digits trial: {', '.join(seen['heavy'])}"
