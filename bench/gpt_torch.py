#!/usr/bin/env python3
"""gpt_torch.py - PyTorch CPU reference for bench_gpt: the identical model
(token + position embeddings, L pre-LayerNorm blocks of causal multi-head
attention and a GELU(tanh) MLP, final LayerNorm, head tied to wte over 256
bytes), the same step (forward + backward + global-norm clip 1.0 + AdamW
betas 0.9/0.95 wd 0.1), batch B sequences x T bytes, N threads.

  gpt_torch.py --threads N --T 128 --C 128 --H 512 --L 4 --NH 4 --B 8 --seconds S

Prints one line: "... N tokens/s", best of 5 slices of S/5 seconds."""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H, NH):
        super().__init__()
        self.nh = NH
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fcproj = nn.Linear(C, H), nn.Linear(H, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (z.view(B, T, self.nh, C // self.nh).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.nh)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, T, C, H, L, NH):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(256, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C)

    def forward(self, idx, tgt):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, 256), tgt.view(-1))


def main():
    ap = argparse.ArgumentParser()
    for k, d in (("threads", 1), ("T", 128), ("C", 128), ("H", 512), ("L", 4), ("NH", 4), ("B", 8)):
        ap.add_argument("--" + k, type=int, default=d)
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    m = GPT(a.T, a.C, a.H, a.L, a.NH)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    idx = torch.randint(0, 256, (a.B, a.T))
    tgt = torch.randint(0, 256, (a.B, a.T))

    def step():
        opt.zero_grad(set_to_none=True)
        m(idx, tgt).backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()

    step()
    best = 0.0
    for _ in range(5):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < a.seconds / 5:
            step()
            n += 1
        best = max(best, n / (time.perf_counter() - t0))
    params = sum(p.numel() for p in m.parameters())
    print(f"pytorch {torch.__version__} gpt L={a.L} C={a.C} NH={a.NH} H={a.H} T={a.T} B={a.B} "
          f"params={params} threads={a.threads}: {best * a.B * a.T:.0f} tokens/s")


if __name__ == "__main__":
    main()
