"""User workloads written to files, as a user would write them from the README (public API only)."""

from __future__ import annotations

from pathlib import Path

IMPORTS = '''
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import TensorDataset

import tuner
'''


def data_source(n: int = 96) -> str:
    """The planted workloads' data(): n random 4-feature samples labelled by the sign of their sum, the last 32
    held out for validation."""
    return f'''

def data(n={n}):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    y = (x.sum(1) > 0).long()
    return TensorDataset(x[: n - 32], y[: n - 32]), TensorDataset(x[n - 32:], y[n - 32:])
'''


def evaluate_source(first_line: str = "") -> str:
    """The planted workloads' evaluate(): models["net"]'s mean cross-entropy on the validation batches;
    `first_line` runs before it (a test's fake clock advanced by scoring, say)."""
    first = f"\n    {first_line}" if first_line else ""
    return f'''

def evaluate(models, val_batches):{first}
    total, n = 0.0, 0
    for x, y in val_batches:
        total += float(F.cross_entropy(models["net"](x), y, reduction="sum"))
        n += len(y)
    return {{"val_loss": total / n}}
'''


HEADER = IMPORTS + data_source() + evaluate_source()

# A loss that writes, at a process's first training step, its pid and whether glibc's malloc maps an 8 MB block on
# its own (above its mmap threshold) to $PLANT_LOG: a process whose threshold something before the training (a
# pre-flight's evaluate(), a fork server's warm-up) raised to a freed block's size keeps it on the heap instead.
# glibc's only; the probe's own free raises the threshold, so only the first step is read.
MAPS_8MB_LOSS = '''
import ctypes, json, os

LIBC = ctypes.CDLL("libc.so.6")
LIBC.malloc.restype = ctypes.c_void_p
LIBC.free.argtypes = [ctypes.c_void_p]


class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]


LIBC.mallinfo2.restype = Info


def mapped(size):
    """Whether malloc maps a block of `size` on its own (above the threshold) rather than serving it from the heap."""
    before = LIBC.mallinfo2().hblks
    p = LIBC.malloc(size)
    try:
        return LIBC.mallinfo2().hblks > before
    finally:
        LIBC.free(p)


SEEN = set()


def loss(models, batch):
    if os.getpid() not in SEEN:  # a process's first step only: the probe's own free raises the threshold
        SEEN.add(os.getpid())
        with open(os.environ["PLANT_LOG"], "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "step_maps_8mb": mapped(8 << 20)}) + "\\n")
    return F.cross_entropy(models["net"](batch[0]), batch[1])


'''

GOOD = HEADER + '''

def make(hidden=8):
    return tuner.Workload(models={"net": lambda: nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 2))},
                          datasets=data, loss=lambda m, b: F.cross_entropy(m["net"](b[0]), b[1]),
                          evaluate=evaluate, quality=("val_loss", "min"))
'''

# Raises inside its own loss when the batch size is 32 (a bug in the user's code, in some configs only).
RAISES_AT_32 = HEADER + '''

def user_loss(models, batch):
    if batch[0].shape[0] == 32:
        raise ValueError("shapes do not line up at 32")
    return F.cross_entropy(models["net"](batch[0]), batch[1])


def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data, loss=user_loss,
                          evaluate=evaluate, quality=("val_loss", "min"))
'''


def write(folder: Path, text: str, name: str = "mywork.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path

# Its validation loss falls predictably with the training samples seen: 1000 / (1 + samples), whatever the weights
# learn (a buffer counts the samples its loss saw). Against a target of 10 it meets it from 99 samples on.
PLANTED_CURVE = IMPORTS + data_source() + '''


class Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)
        self.register_buffer("seen", torch.zeros((), dtype=torch.float64))

    def forward(self, x):
        return self.lin(x)


def loss(models, batch):
    net = models["net"]
    if net.training:
        net.seen += len(batch[0])
    return F.cross_entropy(net(batch[0]), batch[1])


def evaluate(models, val_batches):
    for _ in val_batches:
        pass
    return {"val_loss": 1000.0 / (1.0 + float(models["net"].seen))}


def make():
    return tuner.Workload(models={"net": Counted}, datasets=data, loss=loss, evaluate=evaluate,
                          quality=("val_loss", "min"))
'''

# The same, counting 8 per optimizer step whatever the batch: a larger batch needs more samples to the same loss.
PLANTED_STEPS = PLANTED_CURVE.replace("net.seen += len(batch[0])", "net.seen += 8")
