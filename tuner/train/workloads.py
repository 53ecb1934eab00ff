"""One optimizer step of each workload. The loop in `tuner.train.loop` decides how many and times them.

Both steps follow nanoGPT's shape: autocast and GradScaler built once (GradScaler enabled only for fp16), so there
are no precision branches; accumulation divides each micro-batch loss by the number of micro-batches, so the
accumulated gradient equals that of one batch `accumulation_steps` times larger (BatchNorm statistics aside).
No `.item()` here: the running loss stays on the device and is read at window ends only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from tuner.config import Params
from tuner.device import Device


class _Step:
    """Shared bits: device placement, autocast context, scaler, on-device loss sum."""

    def __init__(self, params: Params, device: Device) -> None:
        self.params = params
        self.device = device
        self.acc = params.accumulation_steps
        self.scaler = device.grad_scaler(params.precision)
        self._loss_sum = torch.zeros((), device=device.torch_device)
        self._loss_n = 0

    def autocast(self):  # noqa: ANN201 - a context manager
        return self.device.autocast(self.params.precision)

    def to_device(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.device.torch_device, non_blocking=self.params.pin_memory)

    def _add_loss(self, loss: torch.Tensor, count: bool = True) -> None:
        self._loss_sum += loss.detach().float()
        self._loss_n += int(count)

    def pop_mean_loss(self) -> float:
        """Mean loss since the last call. Reads a device value: call it only at window ends (a sync point)."""
        if self._loss_n == 0:
            return float("nan")
        value = (self._loss_sum / self._loss_n).item()
        self._loss_sum.zero_()
        self._loss_n = 0
        return value

    @staticmethod
    def _no_sync(model: nn.Module, last: bool) -> Any:
        """Under DDP, skip the gradient all-reduce on all but the last micro-batch."""
        import contextlib

        if not last and hasattr(model, "no_sync"):
            return model.no_sync()
        return contextlib.nullcontext()


class CnnStep(_Step):
    """Classifier step: cross-entropy over `accumulation_steps` micro-batches, then one optimizer step."""

    def __init__(self, model: nn.Module, params: Params, device: Device) -> None:
        super().__init__(params, device)
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=params.lr, betas=(params.beta1, params.beta2))
        self.loss_fn = nn.CrossEntropyLoss()

    def __call__(self, batches: Iterator[Any]) -> int:
        self.opt.zero_grad(set_to_none=True)
        samples = 0
        for i in range(self.acc):
            x, y = next(batches)
            x, y = self.to_device(x), self.to_device(y)
            with self._no_sync(self.model, i == self.acc - 1):
                with self.autocast():
                    loss = self.loss_fn(self.model(x), y)
                self.scaler.scale(loss / self.acc).backward()
            self._add_loss(loss)
            samples += x.shape[0]
        self.scaler.step(self.opt)
        self.scaler.update()
        return samples


class GanStep(_Step):
    """DCGAN step: D on real + fake over the micro-batches, D step; then G against the updated D, G step.

    The fakes of phase 1 are reused in phase 2 (as the textbook loop does with accumulation 1), so each micro-batch
    costs one G forward.
    """

    def __init__(self, generator: nn.Module, discriminator: nn.Module, params: Params, device: Device) -> None:
        super().__init__(params, device)
        self.g, self.d = generator, discriminator
        betas = (params.beta1, params.beta2)
        self.opt_g = torch.optim.Adam(generator.parameters(), lr=params.lr, betas=betas)
        self.opt_d = torch.optim.Adam(discriminator.parameters(), lr=params.lr, betas=betas)
        self.loss_fn = nn.BCEWithLogitsLoss()
        self.nz = _unwrap(generator).nz
        # The G scaler is separate: its scale must not be updated by D's overflows and vice versa.
        self.scaler_g = device.grad_scaler(params.precision)

    def __call__(self, batches: Iterator[Any]) -> int:
        dev = self.device.torch_device
        self.opt_d.zero_grad(set_to_none=True)
        fakes, samples = [], 0
        for i in range(self.acc):
            real = self.to_device(next(batches)[0])
            n = real.shape[0]
            z = torch.randn(n, self.nz, 1, 1, device=dev)
            with self._no_sync(self.d, i == self.acc - 1):
                with self.autocast():
                    fake = self.g(z)
                    logits_real = self.d(real)
                    logits_fake = self.d(fake.detach())
                    loss_d = self.loss_fn(logits_real, torch.ones_like(logits_real)) + self.loss_fn(
                        logits_fake, torch.zeros_like(logits_fake)
                    )
                self.scaler.scale(loss_d / self.acc).backward()
            self._add_loss(loss_d)
            fakes.append(fake)
            samples += n
        self.scaler.step(self.opt_d)
        self.scaler.update()

        self.opt_g.zero_grad(set_to_none=True)
        for i, fake in enumerate(fakes):
            with self._no_sync(self.g, i == self.acc - 1):
                with self.autocast():
                    logits = self.d(fake)
                    loss_g = self.loss_fn(logits, torch.ones_like(logits))
                self.scaler_g.scale(loss_g / self.acc).backward()
            self._add_loss(loss_g, count=False)  # the curve shows D + G loss per micro-batch
        self.scaler_g.step(self.opt_g)
        self.scaler_g.update()
        return samples


def _unwrap(model: nn.Module) -> nn.Module:
    return getattr(model, "module", model)
