"""Data-parallel PyTorch training (DDP, gloo) that checkpoints through
strata and resumes after a failure — run it the way torchrun would:

    strata run --nodes 2 --ranks-per-node 1 --max-restarts 1 \
        --ckpt file:///tmp/ddp-ckpt -- python3 python/examples/torch_ddp.py

Parameters and Adam moments are saved as replicated tensors (each rank
writes 1/world of them); on restart every rank loads the latest committed
step and continues with the same batches it would have seen.
Set STRATA_EXAMPLE_CRASH_AT=N to make rank 1 of the first attempt die at
step N (the restart test in tests/integration/python does).
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import strata  # an installed package (pip, python3-strata)
except ImportError:  # a source checkout: the package next to this example
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import strata  # noqa: E402


def batch(step, rank, world, size=32, dim=16):
    """Global batch `step` split by rank: the same data whatever the world."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(size, dim, generator=g)
    y = x.sum(dim=1, keepdim=True).sin()
    per = size // world
    return x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--ckpt", default=None)
    args = ap.parse_args()

    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    rt = strata.Runtime()
    rt.set_total_steps(args.steps)  # past it a rank is done, not hung
    uri = args.ckpt or rt.ckpt_uri
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(),
                                torch.nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    params = dict(model.named_parameters())

    start = 0
    if uri:
        last = strata.latest_step(uri)
        if last is not None:
            state = {n: p.data for n, p in params.items()}
            moments = {}
            for n, p in params.items():
                moments[n] = (torch.zeros_like(p), torch.zeros_like(p))
                state["adam.m." + n] = moments[n][0]
                state["adam.v." + n] = moments[n][1]
            strata.load(uri, last, state)
            for n, p in params.items():
                opt.state[p] = {"step": torch.tensor(float(last)),
                                "exp_avg": moments[n][0],
                                "exp_avg_sq": moments[n][1]}
            start = last
            if rank == 0:
                print(f"resumed from step {start} (world {world})", flush=True)
    ddp = DDP(model)
    ck = rt.checkpointer(uri) if uri else None
    crash_at = int(os.environ.get("STRATA_EXAMPLE_CRASH_AT", "-1"))
    for step in range(start + 1, args.steps + 1):
        if step == crash_at and rt.restart_count == 0 and rank == world - 1:
            print(f"rank {rank}: simulated crash at step {step}", flush=True)
            os._exit(3)
        x, y = batch(step, rank, world)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        total = total.item() / world
        rt.end_step(step, tokens=x.shape[0] * world, loss=total)
        if rank == 0:
            print(f"step={step} loss={total:.8f}", flush=True)
        if ck and step % args.ckpt_every == 0:
            state = {n: p.data for n, p in params.items()}
            for n, p in params.items():
                state["adam.m." + n] = opt.state[p]["exp_avg"]
                state["adam.v." + n] = opt.state[p]["exp_avg_sq"]
            ck.save(step, state)
    if ck:
        ck.close()
    dist.destroy_process_group()
    rt.close()


if __name__ == "__main__":
    main()
