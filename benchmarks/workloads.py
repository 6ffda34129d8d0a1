"""The benchmark workloads: plain PyTorch modules and inputs, no lazyxla import (peers such as
torch_xla and torchax run this file from their own virtualenvs).

  mlp          3 hidden layers of 256 (256 -> 256 -> 256 -> 256 -> 10), batch 32, cross-entropy
  transformer  2 pre-norm blocks (causal attention, GELU MLP 4x), d_model 256, 4 heads, seq 128,
               batch 8, MSE loss
  cnn          small ResNet: stem conv 3->32 + BN, 3 basic blocks (32, 64/2, 128/2), avgpool, fc 10;
               32x32 images, batch 32, cross-entropy (BatchNorm in train mode for training)
  gpt          GPT-2-small-shaped decoder at reduced depth: 2 layers, d_model 768, 12 heads, seq 128,
               vocab reduced to 8192 (GPT-2: 50257), tied head, batch 2, cross-entropy
  dyn          (dynamic-length experiment) 1 block, d_model 64, 4 heads, batch 1, seq L
"""
from __future__ import annotations


import torch
import torch.nn as nn
import torch.nn.functional as F

WORKLOADS = ("mlp", "transformer", "cnn", "gpt")


class Attention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(d), Attention(d, h)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=8192, seq=128, layers=2, d=768, heads=12):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln_f(self.blocks(self.tok(idx) + self.pos(pos))))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                      if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + self.short(x))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.layers = nn.Sequential(BasicBlock(32, 32, 1), BasicBlock(32, 64, 2), BasicBlock(64, 128, 2))
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc(self.layers(self.stem(x)).mean(dim=(2, 3)))


def _ce(out, y):
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def make(name: str, seq: int | None = None):
    """(model, x, y, loss_fn) on the CPU, deterministic."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if name == "mlp":
        model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
        return model, torch.randn(32, 256, generator=g), torch.randint(0, 10, (32,), generator=g), _ce
    if name == "transformer":
        model = nn.Sequential(Block(256, 4), Block(256, 4))
        x = torch.randn(8, 128, 256, generator=g)
        return model, x, torch.randn(8, 128, 256, generator=g), F.mse_loss
    if name == "cnn":
        return (ResNet(), torch.randn(32, 3, 32, 32, generator=g),
                torch.randint(0, 10, (32,), generator=g), _ce)
    if name == "gpt":
        model = GPT()
        return (model, torch.randint(0, 8192, (2, 128), generator=g),
                torch.randint(0, 8192, (2, 128), generator=g), _ce)
    if name == "dyn":
        model = Block(64, 4)
        return model, torch.randn(1, seq or 16, 64, generator=g), None, None
    raise KeyError(name)


def describe() -> dict:
    return {
        "mlp": "MLP 256-256-256-256-10 (3 hidden x 256), batch 32",
        "transformer": "2 pre-norm transformer blocks, d_model 256, 4 heads, seq 128, batch 8",
        "cnn": "small ResNet (stem 32 + 3 basic blocks 32/64/128, BatchNorm), 32x32 images, batch 32",
        "gpt": "GPT-2-small-shaped decoder, 2 layers (of 12), d 768, 12 heads, seq 128, "
               "vocab 8192 (reduced from 50257), batch 2",
    }
