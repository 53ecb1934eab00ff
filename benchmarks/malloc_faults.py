"""Minor page faults a plain PyTorch DCGAN step pays (fp32, batch 64, CPU) under glibc's allocator as it starts, and
with its thresholds fixed: the reason the `malloc` knob exists (issue 58, lab notes' twenty-sixth session).

Faults (`ru_minflt` of the process over 20 steps after 5 warm-up steps) count the pages the step maps fresh and
zeroes; unlike a time they do not move with the machine's load. Each arm is a fresh process, since glibc reads its
MALLOC_*_THRESHOLD_ once, at the process's first malloc. Seconds each (the five arms: about a minute on 2 cores):

    python benchmarks/malloc_faults.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RETAIN = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "268435456"}  # tuner.knobs.MALLOC_RETAIN
ARMS = {"nothing set": {}, "retain (both thresholds)": RETAIN,
        "trim threshold alone": {"MALLOC_TRIM_THRESHOLD_": RETAIN["MALLOC_TRIM_THRESHOLD_"]}}

STEP = """
import json, resource, sys
import torch
from torch import nn
from tuner.models.dcgan import Discriminator, Generator
torch.manual_seed(0)
G, D = Generator(), Discriminator()
oG = torch.optim.Adam(G.parameters(), 2e-4, betas=(0.5, 0.999))
oD = torch.optim.Adam(D.parameters(), 2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
def step():
    x, z = torch.randn(64, 1, 32, 32), torch.randn(64, G.nz, 1, 1)
    fake = G(z)
    oD.zero_grad()
    real, seen = D(x), D(fake.detach())
    (bce(real, torch.ones_like(real)) + bce(seen, torch.zeros_like(seen))).backward()
    oD.step()
    oG.zero_grad()
    out = D(fake)
    bce(out, torch.ones_like(out)).backward()
    oG.step()
for _ in range(5):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print(json.dumps((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20))
"""


def faults(env: dict[str, str]) -> float:
    """Faults a step in a fresh process under `env` (this shell's environment without its own thresholds)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    base["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-c", STEP], env={**base, **env}, capture_output=True, text=True,
                          check=True)
    return float(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    for name, env in ARMS.items():
        reads = [faults(env) for _ in range(2 if env else 3)]
        print(f"{name}: {', '.join(f'{r:,.0f}' for r in reads)} faults a step")


if __name__ == "__main__":
    main()
