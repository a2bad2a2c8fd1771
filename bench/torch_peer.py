"""The PyTorch peer of `strata-bench train --peer torch`.

Trains the reference GPT of strata-train in plain PyTorch, with the same
initial weights, the same token stream and the same optimizer, so the two
tokens/s figures measure the same work:

- GPT-2 blocks: pre-LayerNorm (eps 1e-5), separate Q, K, V and output
  projections with biases, causal softmax attention scaled by 1/sqrt(d),
  a 4x MLP with tanh-approximated GeLU, a final LayerNorm and an LM head
  tied to the token embedding; loss = mean token cross-entropy;
- AdamW (betas 0.9/0.95, eps 1e-8, weight decay 0.1 on 2-D weights only),
  linear warm-up of the learning rate over 10 steps, global-norm gradient
  clipping at 1.0;
- data parallelism: torch DistributedDataParallel over gloo, one process
  per rank, gradient accumulation over micro-batches (no_sync on all but
  the last).

Input directory (written by strata-bench): `weights.f32` (every tensor in
strata's [in, out] layout, float32, in the order of `weights.json`),
`tokens.i32` ([steps][global batch][seq + 1] int32) and `config.json`.
Prints one JSON object on stdout: parameter count, first-step loss and the
per-step seconds of rank 0.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(h, eps=1e-5)
        self.q, self.k, self.v, self.o = (nn.Linear(h, h) for _ in range(4))
        self.ln2 = nn.LayerNorm(h, eps=1e-5)
        self.fc1 = nn.Linear(h, 4 * h)
        self.fc2 = nn.Linear(4 * h, h)

    def forward(self, x, mask):
        b, t, h = x.shape
        d = h // self.heads
        y = self.ln1(x)
        q, k, v = (p(y).view(b, t, self.heads, d).transpose(1, 2)
                   for p in (self.q, self.k, self.v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        att = att.masked_fill(mask[:t, :t], float("-inf")).softmax(dim=-1)
        a = (att @ v).transpose(1, 2).reshape(b, t, h)
        x = x + self.o(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, seq, hidden, heads, layers):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(hidden, eps=1e-5)
        # A plain attribute, not a buffer: DDP broadcasts buffers, and gloo
        # has no bool type.
        self.mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1)

    def forward(self, tokens, targets):
        t = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(t))
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               targets.reshape(-1))


def load_weights(model, directory):
    """Copies strata's tensors ([in, out] weights) into the torch model."""
    names = json.load(open(os.path.join(directory, "weights.json")))
    flat = np.fromfile(os.path.join(directory, "weights.f32"), dtype=np.float32)
    by_name = {}
    pos = 0
    for entry in names:
        n = int(np.prod(entry["shape"]))
        by_name[entry["name"]] = torch.from_numpy(
            flat[pos:pos + n].reshape(entry["shape"]).copy())
        pos += n
    if pos != flat.size:
        sys.exit(f"weights.f32 holds {flat.size} floats, weights.json {pos}")

    def put(param, name, transpose=False):
        src = by_name.pop(name)
        src = src.t() if transpose else src
        if tuple(src.shape) != tuple(param.shape):
            sys.exit(f"{name}: shape {tuple(src.shape)} vs {tuple(param.shape)}")
        with torch.no_grad():
            param.copy_(src)

    put(model.wte.weight, "wte")
    put(model.wpe.weight, "wpe")
    for i, blk in enumerate(model.blocks):
        p = f"h.{i}."
        put(blk.ln1.weight, p + "ln1_g")
        put(blk.ln1.bias, p + "ln1_b")
        for short, lin in (("q", blk.q), ("k", blk.k), ("v", blk.v),
                           ("o", blk.o)):
            put(lin.weight, f"{p}attn.{short}_w", transpose=True)
            put(lin.bias, f"{p}attn.{short}_b")
        put(blk.ln2.weight, p + "ln2_g")
        put(blk.ln2.bias, p + "ln2_b")
        put(blk.fc1.weight, p + "mlp.fc1_w", transpose=True)
        put(blk.fc1.bias, p + "mlp.fc1_b")
        put(blk.fc2.weight, p + "mlp.fc2_w", transpose=True)
        put(blk.fc2.bias, p + "mlp.fc2_b")
    put(model.lnf.weight, "lnf_g")
    put(model.lnf.bias, "lnf_b")
    if by_name:
        sys.exit(f"tensors not used: {sorted(by_name)}")


def run(rank, args, cfg, out_queue):
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    world = args.ranks
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                                rank=rank, world_size=world)
    model = GPT(cfg["vocab"], cfg["seq"], cfg["hidden"], cfg["heads"],
                cfg["layers"])
    load_weights(model, args.dir)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() != 2]
    ddp = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: min(1.0, (step + 1) / cfg["warmup"]))
    gb, mb, seq = cfg["global_batch"], cfg["micro_batch"], cfg["seq"]
    tokens = np.fromfile(os.path.join(args.dir, "tokens.i32"), dtype=np.int32)
    tokens = torch.from_numpy(tokens.astype(np.int64)).view(-1, gb, seq + 1)
    per_rank = gb // world
    micro = per_rank // mb
    seconds, first_loss = [], None
    for step in range(tokens.shape[0]):
        t0 = time.perf_counter()
        mine = tokens[step, rank * per_rank:(rank + 1) * per_rank]
        opt.zero_grad(set_to_none=True)
        total = torch.zeros(())
        for i in range(micro):
            batch = mine[i * mb:(i + 1) * mb]
            last = i == micro - 1
            ctx = ddp.no_sync() if (world > 1 and not last) else _null()
            with ctx:
                loss = ddp(batch[:, :-1], batch[:, 1:]) / micro
                loss.backward()
            total += loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if world > 1:
            dist.all_reduce(total)
            total /= world
        seconds.append(time.perf_counter() - t0)
        if first_loss is None:
            first_loss = float(total)
    if rank == 0:
        out_queue.put({"params": params, "first_loss": first_loss,
                       "step_seconds": seconds})
    if world > 1:
        dist.destroy_process_group()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--port", type=int, default=29517)
    args = ap.parse_args()
    cfg = json.load(open(os.path.join(args.dir, "config.json")))
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    if args.ranks == 1:
        run(0, args, cfg, q)
    else:
        mp.spawn(run, args=(args, cfg, q), nprocs=args.ranks, join=True)
    print(json.dumps(q.get()))


if __name__ == "__main__":
    main()
