"""DDP for a trial: who we are, wrapping a model, and decisions every rank must take together.

Each rank runs the same loop. Anything a rank decides from its own clock or its own loss (a window is over, the
wall cap is hit, warm-up should stop, the loss is not finite) must be agreed, or one rank takes a step the
others do not and waits on an all-reduce until the process group times out. `Agreement` all-reduces such flags
at the points where the loop reads the clock anyway (window ends, warm-up steps), never inside a timed window.
"""

from __future__ import annotations

import torch
from torch import nn

from tuner.device import Device


def rank_world() -> tuple[int, int]:
    """(rank, world size); (0, 1) unless a torch.distributed process group is up (DDP under Ray Train)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def wrap_ddp(model: nn.Module, device: Device) -> nn.Module:
    """DDP over `model`; rank 0's weights are broadcast to every rank here."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    ids = [device.torch_device.index] if device.is_cuda and device.torch_device.type == "cuda" else None
    # broadcast_buffers=False: D runs twice (real, fake) before one backward; re-broadcasting BatchNorm buffers
    # between those forwards is an in-place change autograd refuses.
    return DDP(model, device_ids=ids, broadcast_buffers=False)


def unwrap(model: nn.Module) -> nn.Module:
    """The user's own module under torch.compile's wrapper (`_orig_mod`) and DDP's (`module`): what is evaluated
    and whose state_dict keys are the user's."""
    inner = getattr(model, "_modules", {}).get("_orig_mod")  # torch.compile's OptimizedModule (a submodule)
    if isinstance(inner, nn.Module):
        model = inner
    return getattr(model, "module", model)


def without_ddp(model: nn.Module) -> nn.Module:
    """The model a phase that does not update it calls: the compiled module without DDP's gradient hooks when it
    has no DDP inside (one process), else the user's own module (under DDP, compile wraps DDP)."""
    inner = getattr(model, "_modules", {}).get("_orig_mod")
    if isinstance(inner, nn.Module) and not hasattr(inner, "no_sync"):
        return model
    return unwrap(model)


class Agreement:
    """Flags and numbers all ranks agree on (max over ranks). With one process it returns its input."""

    def __init__(self, world: int = 1) -> None:
        self.world = world
        self.calls = 0
        if world > 1:
            import torch.distributed as dist

            self._device = torch.device("cuda", torch.cuda.current_device()) \
                if dist.get_backend() == "nccl" else torch.device("cpu")

    def max(self, value: float) -> float:
        self.calls += 1
        if self.world == 1:
            return value
        import torch.distributed as dist

        t = torch.tensor([float(value)], dtype=torch.float64, device=self._device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def any(self, flag: bool) -> bool:
        """True on every rank when it is True on any rank."""
        return self.max(1.0 if flag else 0.0) > 0.5
