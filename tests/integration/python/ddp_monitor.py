"""A torch DDP loop (gloo, CPU) reporting its steps through
strata.torch.monitor / strata.torch.step, under `strata run`.

  ddp_monitor.py STEPS [--no-monitor] [--hang-at N] [--ckpt URI]
                [--hold FILE]

Each step is ~60 ms of matrix work (forward, backward, Adam). Prints
"done steps=N mean_step_ms=X loss=L" on rank 0 (L: its last loss, the same
for every launcher of the same world size). --hang-at N makes rank 1 block in
a Python function at step N (the hang diagnosis test looks for it).
--ckpt URI saves the model and optimizer every 10 steps through dcp.save on
strata.torch.StorageWriter (the steps' `checkpoint` section). --hold FILE
keeps every rank alive after the last step, in a strata phase "hold",
until FILE exists (at most 120 s), so a test can query the running attempt.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.nn.parallel import DistributedDataParallel as DDP

import strata.torch


def hung_in_python():
    while True:  # the hang test kills the job
        time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("steps", type=int)
    ap.add_argument("--no-monitor", action="store_true")
    ap.add_argument("--hang-at", type=int, default=-1)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--ckpt")
    ap.add_argument("--hold")
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    d = args.dim
    model = DDP(torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.Tanh(),
                                    torch.nn.Linear(d, d), torch.nn.Tanh(),
                                    torch.nn.Linear(d, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    if not args.no_monitor:
        strata.torch.monitor(model, opt)
        strata.torch.set_total_steps(args.steps)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(256, d, generator=g)
    y = torch.randn(256, 1, generator=g)
    t0 = time.perf_counter()
    for s in range(1, args.steps + 1):
        if s == args.hang_at and rank == 1:
            hung_in_python()
        if args.no_monitor:
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            continue
        with strata.torch.step(s, tokens=x.shape[0]) as st:
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            st.loss = loss.item()
            if args.ckpt and s % 10 == 0:
                msd, osd = get_state_dict(model, opt)
                dcp.save({"model": msd, "optim": osd},
                         storage_writer=strata.torch.StorageWriter(args.ckpt, step=s))
    elapsed = time.perf_counter() - t0
    if rank == 0:
        print(f"done steps={args.steps} mean_step_ms={1000 * elapsed / args.steps:.2f}"
              f" loss={loss.item():.8f}", flush=True)
    if args.hold:  # a phase outside the step loop: not a hang
        from strata.torch import _runtime
        with _runtime.runtime().phase("hold", 150):
            for _ in range(1200):
                if os.path.exists(args.hold):
                    break
                time.sleep(0.1)
            dist.destroy_process_group()
        return
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
