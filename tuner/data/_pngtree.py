"""digits' PNG tree read with PIL alone: torchvision's ImageFolder, Grayscale(1), RandomAffine, ToTensor and
Normalize re-done step for step, so the tensors (and the augmentation's random draws) are the same.

digits needs five small pieces of torchvision, whose import costs 1.3-2 s of CPU where torch._dynamo is not yet
loaded (torchvision.ops imports it) and 0.1-0.3 s where it is (torch 2.14's optimizers import torch._dynamo at
their first step, so a training process pays that part anyway). The DIR kinds keep torchvision.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

# The train split's small random affine jitter (never val): RandomAffine(degrees=8, translate=(0.06, 0.06),
# scale=(0.94, 1.06)), nearest-neighbour, fill 0.
DEGREES = 8.0
TRANSLATE = (0.06, 0.06)
SCALE = (0.94, 1.06)


def _draw_affine(width: int, height: int) -> tuple[float, tuple[int, int], float]:
    """RandomAffine.get_params: angle, integer translation, scale, drawn from torch's global RNG in its order."""
    angle = float(torch.empty(1).uniform_(-DEGREES, DEGREES).item())
    max_dx, max_dy = float(TRANSLATE[0] * width), float(TRANSLATE[1] * height)
    tx = int(round(torch.empty(1).uniform_(-max_dx, max_dx).item()))
    ty = int(round(torch.empty(1).uniform_(-max_dy, max_dy).item()))
    scale = float(torch.empty(1).uniform_(SCALE[0], SCALE[1]).item())
    return angle, (tx, ty), scale


def _inverse_affine(center: tuple[float, float], angle: float, translate: tuple[int, int],
                    scale: float) -> list[float]:
    """torchvision's _get_inverse_affine_matrix without shear (shear 0): the matrix PIL's AFFINE wants."""
    rot, sx, sy = math.radians(angle), 0.0, 0.0
    cx, cy = center
    tx, ty = translate
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    matrix = [x / scale for x in [d, -b, 0.0, -c, a, 0.0]]
    matrix[2] += matrix[0] * (-cx - tx) + matrix[1] * (-cy - ty)
    matrix[5] += matrix[3] * (-cx - tx) + matrix[4] * (-cy - ty)
    matrix[2] += cx
    matrix[5] += cy
    return matrix


def jitter(img: Image.Image) -> Image.Image:
    """The train split's random affine jitter on a grayscale PIL image (torchvision's RandomAffine on PIL input)."""
    width, height = img.size
    angle, translate, scale = _draw_affine(width, height)
    matrix = _inverse_affine((width * 0.5, height * 0.5), angle, translate, scale)
    return img.transform(img.size, Image.Transform.AFFINE, matrix, Image.Resampling.NEAREST, fillcolor=0)


class GrayTensor:
    """Grayscale(1), optionally the jitter, ToTensor, Normalize((0.5,), (0.5,)): [0, 255] -> [-1, 1], (1, S, S)."""

    def __init__(self, augment: bool) -> None:
        self.augment = augment

    def __call__(self, img: Image.Image) -> torch.Tensor:
        img = img.convert("L")
        if self.augment:
            img = jitter(img)
        x = torch.from_numpy(np.array(img, np.uint8, copy=True))
        x = x.view(img.size[1], img.size[0], 1).permute((2, 0, 1)).contiguous()
        x = x.to(dtype=torch.get_default_dtype()).div(255)
        mean = torch.as_tensor((0.5,), dtype=x.dtype).view(-1, 1, 1)
        std = torch.as_tensor((0.5,), dtype=x.dtype).view(-1, 1, 1)
        return x.sub_(mean).div_(std)


def _load_rgb(path: str) -> Image.Image:
    """torchvision's pil_loader."""
    with open(path, "rb") as fh:
        return Image.open(fh).convert("RGB")


class PngTree(Dataset):
    """ImageFolder over root/<class>/*.png: classes sorted (or given, so val keeps train's indices), samples in
    ImageFolder's order, items (transform(image), class index)."""

    def __init__(self, root: Path, transform: GrayTensor, classes: list[str] | None = None) -> None:
        self.root = str(root)
        self.transform = transform
        if classes is None:
            classes = sorted(entry.name for entry in os.scandir(self.root) if entry.is_dir())
            if not classes:
                raise FileNotFoundError(f"Couldn't find any class folder in {self.root}.")
        self.classes = classes
        self.class_to_idx = {c: i for i, c in enumerate(classes)}
        self.samples = [(path, self.class_to_idx[c]) for c in sorted(classes) for path in self._pngs(c)]
        self.targets = [label for _, label in self.samples]

    def _pngs(self, cls: str) -> list[str]:
        folder = os.path.join(self.root, cls)
        if not os.path.isdir(folder):
            return []
        return [os.path.join(here, name) for here, _, names in sorted(os.walk(folder, followlinks=True))
                for name in sorted(names) if name.lower().endswith(".png")]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[i]
        return self.transform(_load_rgb(path)), label
