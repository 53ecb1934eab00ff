"""The env-fidelity trace: tuner's GAN step and plain loops timed part by part with one clock, interleaved.

One process, the same data (`digits`, no workers): tuner's PhaseStep (built as a trial builds it, its parts timed
through its `mark` hook) against the plain pytorch/examples loop and the same loop computing G's gradients only in
G's step (benchmarks/fidelity.py's since the twenty-fourth session). Each arm warms up 5 steps, then rounds of
STEPS steps per arm, the order turned each round; per-part medians in ms and each arm's step time over tuner's per
round (ratios only inside a round: the machine may be shared).

    OMP_NUM_THREADS=1 python benchmarks/fidelity_trace.py CACHE_DIR [fp32|bf16] [ROUNDS] [STEPS]
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

Arm = Callable[[], dict[str, float]]
clk = time.perf_counter


def main() -> None:
    import torch

    from tuner.config import parse_config
    from tuner.device import device_for
    from tuner.train.trial import trial_scope

    cache = sys.argv[1]
    precision = sys.argv[2] if len(sys.argv) > 2 else "fp32"
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    params: dict[str, Any] = {"batch_size": 64, "accumulation_steps": 1, "num_workers": 0, "precision": precision,
                              "channels_last": precision != "fp32"}
    cfg = parse_config({"workload": "gan", "dataset": "digits", "workload_options": {"image_size": 32},
                        "budget": {"seconds": 10}, "params": params, "quality": {"enabled": False}}, "trace")
    device = device_for(torch.device("cpu"))
    with trial_scope(cfg, device, Path(cache), None):
        arms = {"tuner": tuner_arm(cfg, device), "plain": plain_arm(cache, params, False),
                "plain_g_only": plain_arm(cache, params, True)}
        for arm in arms.values():
            for _ in range(5):
                arm()
        rec: dict[str, list[list[dict[str, float]]]] = {k: [] for k in arms}
        names = list(arms)
        for r in range(rounds):
            for k in names if r % 2 == 0 else names[::-1]:
                rec[k].append([arms[k]() for _ in range(steps)])
    print(f"threads {torch.get_num_threads()}, {precision}, {rounds} rounds of {steps} steps; medians in ms")
    for k in names:
        every = [s for rnd in rec[k] for s in rnd]
        print(k, json.dumps({p: round(statistics.median(s[p] for s in every) * 1e3, 2) for p in every[0]}))
    for k in names[1:]:
        ratios = [statistics.median(s["total"] for s in rec[k][r])
                  / statistics.median(s["total"] for s in rec["tuner"][r]) for r in range(rounds)]
        print(f"{k} / tuner per round: {[round(x, 3) for x in ratios]}, median {statistics.median(ratios):.3f}")


def tuner_arm(cfg: Any, device: Any) -> Arm:
    """tuner's step as a trial builds it, each part timed through its `mark` hook (named by order: D's zero_grad
    and step, then G's)."""
    from tuner.train.trial import build_training

    training = build_training(cfg, device)
    step, batches = training.step, training.batches()
    parts: list[tuple[str, float]] = []

    @contextlib.contextmanager
    def mark(part: str) -> Iterator[None]:
        t = clk()
        yield
        parts.append((part, clk() - t))

    step.mark = mark

    def one() -> dict[str, float]:
        parts.clear()
        t = clk()
        step(batches)
        out: dict[str, float] = {}
        opt_n, phase = 0, "d"
        for part, dt in parts:
            if part == "optimizer":
                opt_n += 1
                phase = "g" if opt_n >= 3 else phase
                key = ("d_zero", "d_opt", "g_zero", "g_opt")[opt_n - 1]
            else:
                key = f"{phase}_{part}"
            out[key] = out.get(key, 0.0) + dt
        out["total"] = clk() - t
        return out

    return one


def plain_arm(cache: str, params: dict[str, Any], g_only: bool) -> Arm:
    """The plain loop (pytorch/examples' shape), each part timed; `g_only`: G's backward computes G's gradients
    only."""
    import torch
    from torch import nn
    from torch.utils.data import DataLoader

    from tuner.data import load_datasets
    from tuner.models import Discriminator, Generator

    data = load_datasets("digits", 32, cache)
    torch.manual_seed(0)
    fmt = torch.channels_last if params["channels_last"] else torch.contiguous_format
    loader = DataLoader(data.train, batch_size=params["batch_size"], shuffle=True, drop_last=True)

    def endless() -> Iterator[Any]:
        while True:
            yield from loader

    batches = endless()
    dtype = {"bf16": torch.bfloat16}.get(params["precision"])
    netG = Generator(channels=data.channels, image_size=32).to(memory_format=fmt)
    netD = Discriminator(channels=data.channels, image_size=32).to(memory_format=fmt)
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    crit = nn.BCEWithLogitsLoss()
    own_g = list(netG.parameters())

    def autocast() -> Any:
        return torch.autocast("cpu", dtype=dtype) if dtype is not None else contextlib.nullcontext()

    def one() -> dict[str, float]:
        c: dict[str, float] = {}
        t0 = clk()
        optD.zero_grad()
        t1 = clk()
        real = next(batches)[0].contiguous(memory_format=fmt)
        t2 = clk()
        with autocast():
            fake = netG(torch.randn(real.size(0), netG.nz, 1, 1))
            o_r, o_f = netD(real), netD(fake.detach())
            err_d = crit(o_r, torch.ones_like(o_r)) + crit(o_f, torch.zeros_like(o_f))
        t3 = clk()
        err_d.backward()
        t4 = clk()
        optD.step()
        t5 = clk()
        optG.zero_grad()
        t6 = clk()
        with autocast():
            o = netD(fake)
            err_g = crit(o, torch.ones_like(o))
        t7 = clk()
        err_g.backward(inputs=own_g if g_only else None)
        t8 = clk()
        optG.step()
        t9 = clk()
        c.update(d_zero=t1 - t0, d_data=t2 - t1, d_forward=t3 - t2, d_backward=t4 - t3, d_opt=t5 - t4,
                 g_zero=t6 - t5, g_forward=t7 - t6, g_backward=t8 - t7, g_opt=t9 - t8, total=t9 - t0)
        return c

    return one


if __name__ == "__main__":
    main()
