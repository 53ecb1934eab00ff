"""Benchmark 2, fidelity: does a trial report the throughput a user would measure with their own loop?

For each config, the tuner's engine (`tuner.train.run_trial`) and a minimal training loop written here from
scratch run the same model classes on the same Dataset object with the same DataLoader settings, optimizer, loss,
autocast and GradScaler, for the same number of warm-up and timed steps. The independent loop deliberately shares
no code with tuner's loop, step or timing classes: it is what a user would write, timed with
`time.perf_counter()` around N steps after warm-up (with a device sync on CUDA). Runs are interleaved
(config A: tuner, independent; config B: independent, tuner; ...) so drift on a noisy machine hits both alike.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from benchmarks.common import BenchResult, Context, median
from benchmarks.table import target

TARGET = "median |ratio - 1| <= 5%"
WINDOWS = 5  # the tuner's timed windows per run (Measure.windows default)
LIMIT = 0.05


def independent_throughput(data: Any, workload: str, params: dict[str, Any], device: Any,
                           warmup_steps: int, timed_steps: int, image_size: int = 32) -> dict[str, float]:
    """Samples/s of a plain PyTorch training loop (the textbook DCGAN / classifier loop) for one config.

    `data` is a tuner.data.Datasets (only its .train Dataset, .channels and .num_classes are used); `device` a
    torch.device. Samples/s counts micro-batch samples, so accumulation does not inflate it.
    """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader

    from tuner.models import Discriminator, Generator, SmallCNN

    batch = int(params.get("batch_size", 64))
    acc = int(params.get("accumulation_steps", 1))
    workers = int(params.get("num_workers", 0))
    precision = params.get("precision", "fp32")
    lr = float(params.get("lr", 2e-4))
    betas = (float(params.get("beta1", 0.5)), float(params.get("beta2", 0.999)))
    torch.manual_seed(int(params.get("seed", 0)))

    kwargs: dict[str, Any] = {"batch_size": batch, "shuffle": True, "drop_last": True, "num_workers": workers,
                              "pin_memory": bool(params.get("pin_memory", False))}
    if workers > 0:
        kwargs["persistent_workers"] = bool(params.get("persistent_workers", False))
        if params.get("prefetch_factor") is not None:
            kwargs["prefetch_factor"] = int(params["prefetch_factor"])
    loader = DataLoader(data.train, **kwargs)

    def endless() -> Iterator[Any]:
        while True:
            for item in loader:
                yield item

    batches = endless()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def autocast() -> Any:
        return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()

    if workload == "gan":
        fmt = torch.channels_last if params.get("channels_last") else torch.contiguous_format
        netG = Generator(channels=data.channels, image_size=image_size).to(device, memory_format=fmt)
        netD = Discriminator(channels=data.channels, image_size=image_size).to(device, memory_format=fmt)
        optG = torch.optim.Adam(netG.parameters(), lr=lr, betas=betas)
        optD = torch.optim.Adam(netD.parameters(), lr=lr, betas=betas)
        scalerD = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
        scalerG = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
        criterion = nn.BCEWithLogitsLoss()

        own_g = list(netG.parameters())

        def step() -> torch.Tensor:
            # The built-in workload's step, written as a user of it would (benchmarks/gpu_plain.py's GAN alike): G's
            # backward computes G's gradients only (inputs=), not D's, which D's next zero_grad would drop anyway
            # (pytorch/examples' errG.backward() computes them too: 11% of a step on a CPU, traced in the lab notes'
            # twenty-fourth session); with accumulation G's forward runs under no_grad in D's phase and again in G's
            # from the same z, rather than keeping every micro-batch's graph alive.
            # (1) D: maximize log D(x) + log(1 - D(G(z))), over `acc` micro-batches
            optD.zero_grad()
            fakes = []
            for _ in range(acc):
                real = next(batches)[0].to(device).contiguous(memory_format=fmt)
                noise = torch.randn(real.size(0), netG.nz, 1, 1, device=device).contiguous(memory_format=fmt)
                with autocast():
                    if acc == 1:
                        fake = netG(noise)
                    else:
                        with torch.no_grad():
                            fake = netG(noise)
                    out_real = netD(real)
                    out_fake = netD(fake.detach())
                    errD = criterion(out_real, torch.ones_like(out_real)) + \
                        criterion(out_fake, torch.zeros_like(out_fake))
                scalerD.scale(errD / acc).backward()
                fakes.append(fake if acc == 1 else noise)
            scalerD.step(optD)
            scalerD.update()
            # (2) G: maximize log D(G(z)) against the updated D
            optG.zero_grad()
            for kept in fakes:
                with autocast():
                    out = netD(kept if acc == 1 else netG(kept))
                    errG = criterion(out, torch.ones_like(out))
                scalerG.scale(errG / acc).backward(inputs=own_g)
            scalerG.step(optG)
            scalerG.update()
            return errD
    else:
        model = SmallCNN(channels=data.channels, num_classes=data.num_classes).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=lr, betas=betas)
        scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
        criterion = nn.CrossEntropyLoss()

        def step() -> torch.Tensor:
            opt.zero_grad()
            for _ in range(acc):
                x, y = next(batches)
                x, y = x.to(device), y.to(device)
                with autocast():
                    loss = criterion(model(x), y)
                scaler.scale(loss / acc).backward()
            scaler.step(opt)
            scaler.update()
            return loss

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    try:
        for _ in range(warmup_steps):
            step()
        sync()
        start = time.perf_counter()
        for _ in range(timed_steps):
            last = step()
        sync()
        seconds = time.perf_counter() - start
        final_loss = float(last.detach())  # read once, after the clock stopped
    finally:
        batches.close()  # drops the loader iterator: its worker processes stop now
    samples = timed_steps * batch * acc
    return {"throughput": samples / seconds, "seconds": seconds, "samples": samples, "loss": final_loss}


def tuner_throughput(workload: str, params: dict[str, Any], warmup_steps: int, timed_steps: int,
                     cache_dir: Any) -> dict[str, Any]:
    """The figure a tuner trial reports for the same config and the same amount of work (samples budget)."""
    from tuner.config import parse_config
    from tuner.train import run_trial

    eff = int(params.get("batch_size", 64)) * int(params.get("accumulation_steps", 1))
    cfg = parse_config({
        "workload": workload, "dataset": "digits", "workload_options": {"image_size": 32},
        "budget": {"samples": (warmup_steps + timed_steps) * eff},
        "params": {**params, "device": "auto"},
        "measure": {"warmup_steps": warmup_steps, "windows": WINDOWS},
        "quality": {"enabled": False},
    }, "fidelity config")
    r = run_trial(cfg, cache_dir=cache_dir)
    if r.state != "complete" or r.throughput is None:
        raise RuntimeError(f"tuner trial did not complete: {r.state} {r.error}")
    # throughput: samples / timed seconds over all the windows, the statistic the independent loop reports; the
    # median window beside it, which the tuner reported until 2026-12-08
    return {"throughput": r.throughput, "median": r.value("throughput_median"), "spread": r.value("throughput_spread"),
            "seconds": r.value("train_seconds"), "samples": r.get("samples")}


def label(workload: str, params: dict[str, Any]) -> str:
    p = {"batch_size": 64, "accumulation_steps": 1, "num_workers": 0, "precision": "fp32", **params}
    return (f"{workload} b{p['batch_size']} acc{p['accumulation_steps']} nw{p['num_workers']} "
            f"{p['precision']}")


def calibrate(data: Any, workload: str, params: dict[str, Any], device: Any, warmup: int, run_s: float,
              cap: int) -> int:
    """Timed steps so that one run lasts about `run_s` seconds on this machine (bf16 is fast on a CPU with
    AVX512-BF16 and 20x slower without it; a GPU is faster still). Decided once per config, before the
    interleaved runs, so both implementations get the same number of steps."""
    probe = independent_throughput(data, workload, params, device, warmup, 3)
    step_s = probe["seconds"] / 3
    # A multiple of the tuner's 5 windows, at least one step each, so both sides time exactly the same steps.
    per_window = max(1, min(cap // WINDOWS, round(run_s / max(step_s, 1e-6) / WINDOWS)))
    return per_window * WINDOWS


def run(ctx: Context) -> list[BenchResult]:
    import torch

    from tuner.data import load_datasets

    s = ctx.settings
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = load_datasets("digits", 32, ctx.cache_dir)
    configs = []
    for workload, params, warmup in s.fidelity_configs:
        timed = calibrate(data, workload, params, device, warmup, s.fidelity_run_s, s.fidelity_max_steps)
        configs.append((workload, params, warmup, timed))
        ctx.log(f"  fidelity {label(workload, params)}: {timed} timed steps per run (~{s.fidelity_run_s:g} s)")
    per: dict[int, dict[str, list[float]]] = {i: {"tuner": [], "independent": [], "tuner_median": []}
                                              for i in range(len(configs))}
    for rep in range(s.fidelity_repeats):
        for i, (workload, params, warmup, timed) in enumerate(configs):
            order = ("tuner", "independent") if (rep + i) % 2 == 0 else ("independent", "tuner")
            for impl in order:
                if impl == "tuner":
                    out = tuner_throughput(workload, params, warmup, timed, ctx.cache_dir)
                else:
                    out = independent_throughput(data, workload, params, device, warmup, timed)
                per[i][impl].append(out["throughput"])
                if impl == "tuner" and out.get("median") is not None:
                    per[i]["tuner_median"].append(out["median"])
                ctx.log(f"  fidelity rep {rep + 1}/{s.fidelity_repeats} {label(workload, params)} {impl}: "
                        f"{out['throughput']:.1f} samples/s")

    rows = []
    for i, (workload, params, warmup, timed) in enumerate(configs):
        t, u = median(per[i]["tuner"]), median(per[i]["independent"])
        med = median(per[i]["tuner_median"])
        # Ratio of each back-to-back pair (same repeat), then the median: slow drift in the machine's load
        # cancels within a pair.
        pairs = list(zip(per[i]["tuner"], per[i]["independent"]))
        pairs_med = list(zip(per[i]["tuner_median"], per[i]["independent"]))
        rows.append({"config": label(workload, params), "tuner": t, "independent": u,
                     "ratio": median(a / b for a, b in pairs if b > 0), "tuner_runs": per[i]["tuner"],
                     "tuner_median": med, "ratio_median": median(a / b for a, b in pairs_med if b > 0),
                     "tuner_median_runs": per[i]["tuner_median"],
                     "independent_runs": per[i]["independent"], "warmup_steps": warmup, "timed_steps": timed,
                     "params": params})
    devs = [abs(r["ratio"] - 1) for r in rows if r["ratio"] is not None]
    dev = median(devs)
    dev_med = median(abs(r["ratio_median"] - 1) for r in rows if r["ratio_median"] is not None)
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    passed = dev is not None and dev <= LIMIT and len(devs) >= 4
    worst = max(rows, key=lambda r: abs((r["ratio"] or 1) - 1))
    per_config = "; ".join(f"{r['config']}: {r['ratio']:.3f}" for r in rows if r["ratio"])
    note = (f"Fidelity: tuner-reported / independent plain-PyTorch loop, {len(rows)} configs "
            f"({per_config}; each the median of {s.fidelity_repeats} back-to-back pairs, order alternating), same "
            f"work per run. "
            f"Figure = median |ratio - 1|; ratio column = median ratio. The tuner reports its all-windows rate "
            f"(total samples / total timed seconds over 5 timed windows, what the independent loop reports); the "
            f"median window, which it reported until 2026-12-08, gives median |ratio - 1| = "
            f"{dev_med * 100 if dev_med is not None else float('nan'):.1f}%.")
    if not passed and dev is not None:
        runs = worst["independent_runs"] + worst["tuner_runs"]
        noise = max(runs) / min(runs) - 1 if runs and min(runs) > 0 else None
        gap = max(worst["ratio"], 1 / worst["ratio"]) - 1
        verdict = "within" if noise is not None and noise >= gap else "beyond"
        note += (f" Missed: the largest gap is {worst['config']} (ratio {worst['ratio']:.3f}); its fastest and slowest "
                 f"runs (either side) differ by {noise * 100 if noise is not None else float('nan'):.0f}%, so the gap "
                 f"is {verdict} this machine's run-to-run noise during the run.")
    return [BenchResult(
        name="reported vs independent throughput", benchmark="fidelity",
        figure=dev * 100 if dev is not None else None, unit="%", baseline=None,
        ratio=median(ratios), target=TARGET, pass_=passed, note=note, row="4",
        rule=target(TARGET, ("figure", "<=", 5.0)),
        details={"configs": rows, "device": str(device)},
    )]
