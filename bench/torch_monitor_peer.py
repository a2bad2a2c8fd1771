"""`strata-bench torch-monitor`: the cost of strata.torch's step monitor on
a torch DDP loop, with vs without, in one run (bench/torch_monitor_bench.cc
starts it on every rank under `strata run`).

  torch_monitor_peer.py STEPS DIM

Each rank builds three identical DDP models (gloo, CPU, the MLP of
tests/integration/python/ddp_monitor.py) with their own Adam: model A
under strata.torch.monitor (forward, optimizer and gradient hooks) with
every step inside `strata.torch.step` (one report to the worker per step),
models B and C plain. Each round steps all three so they see the same load
on a shared machine, in an order that rotates (ABC, BCA, CAB): a step's
place in the round changes its time by itself (0.9 ms of 21 ms for two
plain models in the first two places of five), which always putting A
first counted as the monitor's cost. C against B is the method's noise in
the same run ("control"): a cost is resolved only when it is above it. Rank 0 prints one JSON line: the mean step time of each and the
monitor's cost, (A - B) / B; next to them what does not depend on the
machine's load as much: the training thread's CPU time per step of each
(thread_time) and the process's (process_time: also gloo's, ZeroMQ's and
the report sender's threads, whichever step they fall in), the CPU and
wall time of the rank's end_step calls, the 1-minute load average, and the
cost and control on median step times (robust to the long descheduling
outliers of a loaded machine, which dominate the means).
"""
import json
import os
import statistics
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
    a, b, c_model = model(d), model(d), model(d)
    opt_a = torch.optim.Adam(a.parameters(), lr=1e-3)
    opt_b = torch.optim.Adam(b.parameters(), lr=1e-3)
    opt_c = torch.optim.Adam(c_model.parameters(), lr=1e-3)
    strata.torch.monitor(a, opt_a)
    strata.torch.set_total_steps(steps)
    # end_step timed where the monitor calls it.
    rt = strata.torch._runtime.runtime()
    inner = rt.end_step
    timed = {"cpu": 0.0, "wall": 0.0, "n": 0}

    def end_step(*args, **kwargs):
        c, w = time.thread_time(), time.perf_counter()
        inner(*args, **kwargs)
        timed["cpu"] += time.thread_time() - c
        timed["wall"] += time.perf_counter() - w
        timed["n"] += 1
    rt.end_step = end_step
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(256, d, generator=g)
    y = torch.randn(256, 1, generator=g)
    wall = {"a": 0.0, "b": 0.0, "c": 0.0}
    times = {"a": [], "b": [], "c": []}  # per step, for the medians
    cpu = {"a": 0.0, "b": 0.0, "c": 0.0}
    pcpu = {"a": 0.0, "b": 0.0, "c": 0.0}
    plain = {"b": (b, opt_b), "c": (c_model, opt_c)}
    warmup = 20
    load = []
    for s in range(1, steps + 1):
        if s == warmup:
            timed.update(cpu=0.0, wall=0.0, n=0)
        if s % 100 == 0:
            load.append(os.getloadavg()[0])
        order = "abc"[s % 3:] + "abc"[:s % 3]
        for which in order:
            t, c, p = time.perf_counter(), time.thread_time(), time.process_time()
            if which == "a":
                with strata.torch.step(s, tokens=x.shape[0]) as st:
                    st.loss = one_step(a, opt_a, x, y).item()
            else:
                one_step(*plain[which], x, y).item()
            if s > warmup:
                times[which].append(time.perf_counter() - t)
                wall[which] += times[which][-1]
                cpu[which] += time.thread_time() - c
                pcpu[which] += time.process_time() - p
    n = steps - warmup
    if rank == 0:
        k = max(1, timed["n"])
        ms = lambda v: round(1000 * v / n, 3)  # noqa: E731
        base = (wall["b"] + wall["c"]) / 2  # the plain models' mean
        med = {k: statistics.median(v) for k, v in times.items()}
        med_base = statistics.median(times["b"] + times["c"])
        print(json.dumps({
            "steps": n, "with_ms": ms(wall["a"]), "without_ms": ms(base),
            "control": round((wall["c"] - wall["b"]) / base, 4),
            "median_ms": [round(1000 * med[k], 3) for k in "abc"],
            "median_cost": round((med["a"] - med_base) / med_base, 4),
            "median_control": round((med["c"] - med["b"]) / med_base, 4),
            "thread_cpu_ms": [ms(cpu[k]) for k in "abc"],
            "process_cpu_ms": [ms(pcpu[k]) for k in "abc"],
            "end_step_us": {"cpu": round(1e6 * timed["cpu"] / k, 1),
                            "wall": round(1e6 * timed["wall"] / k, 1)},
            "load1": [min(load or [0]), max(load or [0])],
            "cost": (wall["a"] - base) / base}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
