"""FSDP2 training (fully_shard, gloo on CPU) that checkpoints through
torch.distributed.checkpoint on strata's engine and resumes from the newest
step under any world size — the torchrun command line with `strata run`:

    strata run --nnodes 2 --nproc-per-node 2 --max-restarts 1 \\
        python/examples/torch_fsdp2.py --ckpt file:///tmp/fsdp2-ckpt
    # later, on 3 ranks, from the same checkpoint:
    strata run --nproc-per-node 3 python/examples/torch_fsdp2.py \\
        --ckpt file:///tmp/fsdp2-ckpt --steps 40

Each step reports its sections (forward, backward, optimizer) through
strata.torch.step. Every --ckpt-every steps the sharded model and Adam state
are saved with dcp.async_save (training continues while strata persists);
on start, the newest committed step is loaded, whatever world size wrote it.
Set STRATA_EXAMPLE_CRASH_AT=N to make rank 1 of the first attempt die at
step N (tests/integration/python/fsdp2_restart_test.sh does).
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import strata  # noqa: E402
import strata.torch  # noqa: E402


def global_batch(step, size=24, dim=16):
    """Batch `step`, the same whatever the world size."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(size, dim, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--ckpt", default=None, help="file:///DIR or rocksdb:///DIR")
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(),
                                torch.nn.Linear(64, 1))
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    strata.torch.monitor(model, opt)
    # The last step: a rank past it is done while its last save persists.
    strata.torch.set_total_steps(args.steps)
    uri = args.ckpt or os.environ.get("STRATA_CKPT_URI")
    # async_save's collectives run on a background thread: a group of their
    # own keeps them apart from training's (DCP's advice).
    ckpt_group = dist.new_group(backend="gloo")

    start = 0
    if uri and strata.latest_step(uri) is not None:
        msd, osd = get_state_dict(model, opt)
        state = {"model": msd, "optim": osd}
        reader = strata.torch.StorageReader(uri)
        dcp.load(state, storage_reader=reader)
        set_state_dict(model, opt, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
        start = reader.step
        if rank == 0:
            print(f"resumed from step {start} on {world} ranks", flush=True)

    crash_at = int(os.environ.get("STRATA_EXAMPLE_CRASH_AT", "0"))
    restarts = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    pending = None
    for step in range(start + 1, args.steps + 1):
        if crash_at and step == crash_at and rank == 1 and restarts == 0:
            print(f"simulated crash at step {step}", flush=True)
            os._exit(1)
        x, y = global_batch(step)
        per = x.shape[0] // world
        x, y = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]
        with strata.torch.step(step, tokens=x.shape[0]) as s:
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            s.loss = mean.item() / world
        if rank == 0:
            print(f"step={step} loss={s.loss:.8f}", flush=True)
        if uri and step % args.ckpt_every == 0:
            if pending is not None:
                pending.result()  # one save in flight
            msd, osd = get_state_dict(model, opt)
            pending = dcp.async_save(
                {"model": msd, "optim": osd},
                storage_writer=strata.torch.StorageWriter(uri, step=step),
                process_group=ckpt_group)
    if pending is not None:
        pending.result()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
