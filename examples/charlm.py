"""A character-level language model in nanoGPT's style, tuned by tuner with its own optimizer settings.

A small GPT (causal self-attention blocks) trained on its own source code as text, so nothing is downloaded. As
in nanoGPT, the model builds its AdamW parameter groups itself (`configure_optimizers`: weight decay on the
matrices, none on biases and norms), trains at lr 1e-3 with betas (0.9, 0.99), clips gradients at 1.0, and its
constructor prints its size. tuner's baseline is exactly that, and it reports tokens/s beside samples/s.

    tuner train --config examples/charlm.yaml
    tuner search --space amp_loader --workload examples/charlm.py:make --trials 6
"""

import math
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset

import tuner


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp(self.ln_2(x))


class CharGPT(nn.Module):
    def __init__(self, vocab_size: int, block_size: int = 32, n_layer: int = 2, n_head: int = 4,
                 n_embd: int = 64) -> None:
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head, block_size) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        print(f"number of parameters: {sum(p.numel() for p in self.parameters()) / 1e6:.2f}M")  # as nanoGPT does

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(self, weight_decay: float, learning_rate: float, betas: tuple[float, float]):
        """nanoGPT's: every 2-D parameter (matmuls, embeddings) decays, biases and norms do not."""
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)


def corpus() -> str:
    """The text: this file itself (always where the workload is, on every node a study ships it to)."""
    return Path(__file__).read_text(encoding="utf-8")


class Chunks(Dataset):
    """(x, y) token windows of `block_size`, y shifted by one, starting every `stride` characters."""

    def __init__(self, ids: torch.Tensor, block_size: int, stride: int) -> None:
        self.ids, self.block_size = ids, block_size
        self.starts = list(range(0, len(ids) - block_size - 1, stride))

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int):
        s = self.starts[i]
        chunk = self.ids[s:s + self.block_size + 1]
        return chunk[:-1], chunk[1:]


def make(block_size: int = 32, n_layer: int = 2, n_head: int = 4, n_embd: int = 64) -> tuner.Workload:
    text = corpus()
    vocab = sorted(set(text))
    ids = torch.tensor([vocab.index(ch) for ch in text], dtype=torch.long)
    cut = int(0.9 * len(ids))

    def datasets():
        return Chunks(ids[:cut], block_size, stride=4), Chunks(ids[cut:], block_size, stride=block_size)

    def evaluate(models, val_batches) -> dict:
        total, n = 0.0, 0
        for x, y in val_batches:
            _, loss = models["gpt"](x, y)
            total += float(loss) * y.numel()
            n += y.numel()
        return {"val_loss": total / n if n else math.nan}

    return tuner.Workload(
        models={"gpt": lambda: CharGPT(len(vocab), block_size, n_layer, n_head, n_embd)},
        datasets=datasets,
        loss=lambda models, batch: models["gpt"](batch[0], batch[1])[1],
        evaluate=evaluate,
        quality=("val_loss", "min"),
        # nanoGPT's own optimizer: AdamW groups the model builds, at its own settings
        optimizer=lambda models, lr, betas, weight_decay: models["gpt"].configure_optimizers(weight_decay, lr,
                                                                                              betas),
        hyperparameters={"lr": 1e-3, "betas": (0.9, 0.99), "weight_decay": 0.1},
        grad_clip=1.0,
        sample_unit="tokens",
        sample_size=lambda batch: batch[0].numel(),
        info={"model": f"char GPT, {n_layer} layers, {n_embd} wide, context {block_size}"},
    )
