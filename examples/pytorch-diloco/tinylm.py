"""tinylm.py - the model and the data of the PyTorch DiLoCo example.

A byte-level language model small enough for CI on a loaded 2-core box: a
multilayer perceptron over the previous CONTEXT bytes (embedding, one
hidden layer, logits over 256 bytes), trained on Debian's English fortunes
(/usr/share/games/fortunes; any text file with --data). The corpus is split
by whole fortunes: the first 90% of the bytes train, the rest is the
held-out text the coordinator evaluates the global model on. Worker i of M
trains on the i-th contiguous shard of the training bytes.
"""

import math
import os

import torch

FORTUNES_DIR = "/usr/share/games/fortunes"
CONTEXT = 16  # bytes of context
EMBED = 16  # embedding width per byte
HIDDEN = 128  # hidden units


class ByteMLP(torch.nn.Module):
    """logits[b, 256] = W2 · gelu(W1 · concat(E[x[b, 0]], ..., E[x[b, C-1]]) + b1) + b2"""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(256, EMBED)
        self.hidden = torch.nn.Linear(CONTEXT * EMBED, HIDDEN)
        self.out = torch.nn.Linear(HIDDEN, 256)

    def forward(self, x):  # x: [B, CONTEXT] int64 -> [B, 256]
        h = self.embed(x).reshape(x.shape[0], CONTEXT * EMBED)
        return self.out(torch.nn.functional.gelu(self.hidden(h)))


def new_model(seed):
    """The initial model: the same on every process for the same seed."""
    torch.manual_seed(seed)
    return ByteMLP()


def flat(model):
    """The parameters as one float32 vector (a copy)."""
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()


def load_flat(model, vec):
    torch.nn.utils.vector_to_parameters(vec, model.parameters())


def read_corpus(data=None):
    """The text as bytes: --data FILE, else every English fortune file (plain
    files without a '.', in name order; entries kept whole)."""
    if data:
        with open(data, "rb") as f:
            return f.read()
    if not os.path.isdir(FORTUNES_DIR):
        raise SystemExit("no %s (Debian's fortunes package): give --data FILE" % FORTUNES_DIR)
    parts = []
    for name in sorted(os.listdir(FORTUNES_DIR)):
        path = os.path.join(FORTUNES_DIR, name)
        if "." in name or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            parts.append(f.read())
    return b"".join(parts)


def split(text):
    """(train bytes, held-out bytes): the cut is at the first fortune
    boundary ("\\n%\\n") after 90% of the text."""
    cut = text.find(b"\n%\n", int(len(text) * 0.9))
    cut = int(len(text) * 0.9) if cut < 0 else cut + 3
    return text[:cut], text[cut:]


def shard(train, worker, workers):
    """Worker's contiguous share of the training bytes."""
    n = len(train) // workers
    return train[worker * n : (worker + 1) * n]


def as_tensor(data):
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(torch.int64)


def batch_at(data, positions):
    """Inputs [B, CONTEXT] and next-byte targets [B] at the given start
    positions of a uint8->int64 tensor."""
    idx = positions.unsqueeze(1) + torch.arange(CONTEXT).unsqueeze(0)
    return data[idx], data[positions + CONTEXT]


def eval_loss(model, heldout, n=4096):
    """Mean cross-entropy in nats per byte over n fixed, evenly spaced
    positions of the held-out text (the same positions every time, so two
    evals differ only by the model)."""
    span = len(heldout) - CONTEXT - 1
    pos = torch.linspace(0, span - 1, steps=min(n, span)).to(torch.int64)
    x, y = batch_at(heldout, pos)
    with torch.no_grad():
        loss = torch.nn.functional.cross_entropy(model(x), y).item()
    return loss if math.isfinite(loss) else float("nan")
