"""The GPU proof's independent loop: a config's settings trained by plain PyTorch, as a user would write it.

    python benchmarks/gpu_plain.py --tuned TUNED.yaml [--own OWN.yaml] --seconds 8  ->  one JSON line on stdout

It reads the knobs of a `tuner export` / `tuner train` config (batch size, accumulation, loader, precision, TF32,
channels_last, cuDNN autotuning, the optimizer's implementation, torch.compile) and trains the same model classes
on the same data with them, sharing no code with tuner's loop, step, timing or device classes (benchmarks/fidelity.py's
rule): its own DataLoader, autocast and GradScaler, optimizer, `time.perf_counter()` around N steps after warm-up,
with `torch.cuda.synchronize()` before each clock read. N is calibrated from three untimed steps so the timed part
lasts about `--seconds`. `--own` runs first and leaves PyTorch's own TF32 defaults (matmul off, cuDNN on) instead of
setting both as the config's `tf32` says: the model's own settings as plain PyTorch runs them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _module(path: str) -> Any:
    spec = importlib.util.spec_from_file_location(Path(path).stem + "_plain", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


Phases = list[tuple[str, Callable[..., Any]]]  # (the model a phase updates, its loss(models, batch, shared))


def build(cfg: dict[str, Any], device: Any, cache_dir: Path) -> tuple[Any, dict[str, Any], Phases]:
    """(train Dataset, models, phases) for the config's workload: the textbook step is each phase in turn, its
    loss over the micro-batches, then its optimizer (DCGAN: D, then G against the updated D)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    ref, opts = cfg["workload"], dict(cfg.get("workload_options") or {})
    if ref == "gan":
        from tuner.data import load_datasets
        from tuner.models import Discriminator, Generator

        size, width, nz = int(opts.get("image_size", 32)), int(opts.get("width", 32)), int(opts.get("nz", 64))
        data = load_datasets(cfg.get("dataset") or "digits", size, cache_dir)
        g = Generator(nz=nz, ngf=width, channels=data.channels, image_size=size).to(device)
        d = Discriminator(ndf=width, channels=data.channels, image_size=size).to(device)
        bce = nn.BCEWithLogitsLoss()

        acc = int((cfg.get("params") or {}).get("accumulation_steps", 1))

        def d_loss(models: dict[str, Any], batch: Any, shared: dict[str, Any]) -> Any:
            real = batch[0]
            shared["z"] = z = torch.randn(real.shape[0], nz, 1, 1, device=real.device)
            if acc == 1:  # the textbook step: G's graph kept for G's update
                shared["fake"] = fake = models["g"](z)
            else:  # accumulating: G runs again in its own update rather than keep every micro-batch's graph
                with torch.no_grad():
                    fake = models["g"](z)
            lr_, lf = models["d"](real), models["d"](fake.detach())
            return bce(lr_, torch.ones_like(lr_)) + bce(lf, torch.zeros_like(lf))

        def g_loss(models: dict[str, Any], batch: Any, shared: dict[str, Any]) -> Any:
            fake = shared.pop("fake", None)
            lg = models["d"](fake if fake is not None else models["g"](shared["z"]))
            return bce(lg, torch.ones_like(lg))

        return data.train, {"g": g, "d": d}, [("d", d_loss), ("g", g_loss)]
    path, _, attr = ref.rpartition(":")
    mod = _module(str(REPO / path) if not Path(path).is_absolute() else path)
    if attr == "resnet":
        import torchvision.models as tvm

        arch = opts.pop("arch", "resnet50")
        size, classes = int(opts.get("image_size", 224)), int(opts.get("num_classes", 100))
        train, _ = mod.template_images(size, classes, int(opts.get("n_train", 2560)), int(opts.get("n_val", 256)))
        model = getattr(tvm, arch)(num_classes=classes).to(device)
        return train, {"resnet": model}, [("resnet", lambda m, b, _: F.cross_entropy(m["resnet"](b[0]), b[1]))]
    # the nanoGPT-style LM of examples/charlm.py
    block = int(opts.get("block_size", 32))
    text = mod.corpus()
    vocab = sorted(set(text))
    ids = torch.tensor([vocab.index(ch) for ch in text], dtype=torch.long)
    train = mod.Chunks(ids[:int(0.9 * len(ids))], block, stride=4)
    model = mod.CharGPT(len(vocab), block, int(opts.get("n_layer", 2)), int(opts.get("n_head", 4)),
                        int(opts.get("n_embd", 64))).to(device)
    return train, {"gpt": model}, [("gpt", lambda m, b, _: m["gpt"](b[0], b[1])[1])]


def optimizers(ref: str, models: dict[str, Any], params: dict[str, Any], cuda: bool) -> dict[str, Any]:
    """Each workload's own optimizer at its own settings, the implementation as the config's optimizer_impl says
    (tuner's default on CUDA is fused Adam/AdamW; SGD as torch builds it)."""
    import torch

    impl = params.get("optimizer_impl", "default")
    kw = {"fused": True} if impl == "fused" else {"foreach": True} if impl == "foreach" else {}
    if ref == "gan":
        kw = kw or ({"fused": True} if cuda else {})
        betas = (params.get("beta1", 0.5), params.get("beta2", 0.999))
        return {k: torch.optim.Adam(m.parameters(), lr=2e-4 * params.get("lr_scale", 1.0), betas=betas, **kw)
                for k, m in models.items()}
    if "resnet" in models:
        return {"resnet": torch.optim.SGD(models["resnet"].parameters(), lr=0.1 * params.get("lr_scale", 1.0),
                                          momentum=0.9, weight_decay=1e-4, **kw)}
    m = models["gpt"]
    ps = [p for p in m.parameters() if p.requires_grad]
    groups = [{"params": [p for p in ps if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in ps if p.dim() < 2], "weight_decay": 0.0}]
    kw = kw or ({"fused": True} if cuda else {})
    betas = (params.get("beta1", 0.9), params.get("beta2", 0.99))
    return {"gpt": torch.optim.AdamW(groups, lr=1e-3 * params.get("lr_scale", 1.0), betas=betas, **kw)}


def run(cfg: dict[str, Any], seconds: float, torch_tf32: bool, cache_dir: Path) -> dict[str, Any]:
    import torch
    from torch.utils.data import DataLoader

    p = dict(cfg.get("params") or {})
    dev_kind = p.get("device", "auto")
    device = torch.device("cuda" if dev_kind == "cuda" or (dev_kind == "auto" and torch.cuda.is_available())
                          else "cpu")
    cuda = device.type == "cuda"
    if cuda and not torch_tf32:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = bool(p.get("tf32", False))
    if cuda:
        torch.backends.cudnn.benchmark = bool(p.get("cudnn_benchmark", False))
    if p.get("threads"):
        torch.set_num_threads(int(p["threads"]))
    torch.manual_seed(int(p.get("seed", 0)))
    train, models, phases = build(cfg, device, cache_dir)
    batch, acc = int(p.get("batch_size", 64)), int(p.get("accumulation_steps", 1))
    workers = int(p.get("num_workers", 0))
    kw: dict[str, Any] = {"batch_size": batch, "shuffle": True, "drop_last": True, "num_workers": workers,
                          "pin_memory": bool(p.get("pin_memory", False))}
    if workers > 0:
        kw["persistent_workers"] = bool(p.get("persistent_workers", False))
        if p.get("prefetch_factor") is not None:
            kw["prefetch_factor"] = int(p["prefetch_factor"])
    loader = DataLoader(train, **kw)
    channels_last = bool(p.get("channels_last", False))
    if channels_last:
        for m in models.values():
            m.to(memory_format=torch.channels_last)
    opts = optimizers(cfg["workload"], models, p, cuda)
    mode = p.get("compile", "off")
    run_models = {k: torch.compile(m, mode=mode) for k, m in models.items()} if mode not in ("off", False) else models
    precision = p.get("precision", "fp32")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scalers = {k: torch.amp.GradScaler(device.type, enabled=precision == "fp16") for k in opts}
    non_blocking = kw["pin_memory"]
    clip = 1.0 if "gpt" in models else None

    def endless() -> Iterator[Any]:
        while True:
            yield from loader

    batches = endless()

    def step() -> Any:
        kept = []
        for _ in range(acc):
            b = [t.to(device, non_blocking=non_blocking) for t in next(batches)]
            if channels_last and b[0].dim() == 4:
                b[0] = b[0].contiguous(memory_format=torch.channels_last)
            kept.append(b)
        shared: list[dict[str, Any]] = [{} for _ in range(acc)]
        first = None
        for name, loss_fn in phases:
            opt, scaler = opts[name], scalers[name]
            opt.zero_grad(set_to_none=True)
            own = [q for q in models[name].parameters() if q.requires_grad]
            for i in range(acc):
                with torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext():
                    loss = loss_fn(run_models, kept[i], shared[i])
                scaler.scale(loss / acc).backward(inputs=own)  # only this phase's model's gradients
                first = loss if first is None else first
            if clip is not None:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(own, clip)
            scaler.step(opt)
            scaler.update()
        return first

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    try:
        t0 = time.perf_counter()
        for _ in range(5 if mode not in ("off", False) else 2):  # warm-up (compiles, when compiled)
            step()
        sync()
        warm_s = time.perf_counter() - t0
        t = time.perf_counter()
        for _ in range(3):
            step()
        sync()
        step_s = (time.perf_counter() - t) / 3
        n = max(3, int(seconds / max(step_s, 1e-6)))
        sync()
        t = time.perf_counter()
        for _ in range(n):
            last = step()
        sync()
        took = time.perf_counter() - t
        loss = float(last.detach())
    finally:
        batches.close()
    samples = n * batch * acc
    return {"throughput": samples / took, "seconds": took, "steps": n, "samples": samples, "loss": loss,
            "warmup_seconds": warm_s, "device": str(device), "torch_tf32": torch_tf32,
            "tf32": [torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32] if cuda else None}


def main(argv: list[str] | None = None) -> int:
    import yaml

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuned", type=Path, required=True, help="config whose settings are trained as they say")
    ap.add_argument("--own", type=Path, help="config trained first, under PyTorch's own TF32 defaults")
    ap.add_argument("--seconds", type=float, default=8.0, help="timed seconds of each run (about)")
    ap.add_argument("--cache-dir", type=Path, default=REPO / "reports" / ".cache")
    args = ap.parse_args(argv)
    out: dict[str, Any] = {}
    if args.own is not None:  # first: PyTorch's TF32 defaults are still untouched in this process
        out["own"] = run(yaml.safe_load(args.own.read_text()), args.seconds, True, args.cache_dir)
    out["tuned"] = run(yaml.safe_load(args.tuned.read_text()), args.seconds, False, args.cache_dir)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
