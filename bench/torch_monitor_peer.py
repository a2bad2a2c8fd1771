"""`strata-bench torch-monitor`: the cost of strata.torch's step monitor on
a torch DDP loop, with vs without, in one run (bench/torch_monitor_bench.cc
starts it on every rank under `strata run`).

  torch_monitor_peer.py STEPS DIM

Each rank builds two identical DDP models (gloo, CPU, the MLP of
tests/integration/python/ddp_monitor.py) with their own Adam: model A
under strata.torch.monitor (forward and optimizer hooks, the DDP
communication hook timing the all-reduce) with every step inside
`strata.torch.step` (one report to the worker per step), model B plain.
Steps alternate A, B, A, B, ... so both see the same load on a shared
machine. Rank 0 prints one JSON line: the mean step time of each and the
monitor's cost, (A - B) / B.
"""
import json
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import strata.torch


def model(d):
    torch.manual_seed(0)
    return DDP(torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.Tanh(),
                                   torch.nn.Linear(d, d), torch.nn.Tanh(),
                                   torch.nn.Linear(d, 1)))


def one_step(m, opt, x, y):
    loss = (m(x) - y).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def main():
    steps, d = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    a, b = model(d), model(d)
    opt_a = torch.optim.Adam(a.parameters(), lr=1e-3)
    opt_b = torch.optim.Adam(b.parameters(), lr=1e-3)
    strata.torch.monitor(a, opt_a)
    strata.torch.set_total_steps(steps)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(256, d, generator=g)
    y = torch.randn(256, 1, generator=g)
    with_s = without_s = 0.0
    warmup = 20
    for s in range(1, steps + 1):
        t = time.perf_counter()
        with strata.torch.step(s, tokens=x.shape[0]) as st:
            st.loss = one_step(a, opt_a, x, y).item()
        t_a = time.perf_counter()
        one_step(b, opt_b, x, y).item()
        t_b = time.perf_counter()
        if s > warmup:
            with_s += t_a - t
            without_s += t_b - t_a
    n = steps - warmup
    if rank == 0:
        print(json.dumps({
            "steps": n, "with_ms": 1000 * with_s / n,
            "without_ms": 1000 * without_s / n,
            "cost": (with_s - without_s) / without_s}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
