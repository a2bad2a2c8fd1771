"""FSDP2 (fully_shard, DTensor) model and Adam state through DCP on
strata.torch's storage, under `strata run` (gloo, CPU).

  fsdp_reshard.py save URI REF   trains 2 steps, saves step 2 through
                                 StorageWriter; rank 0 also writes the full
                                 (unsharded) state to REF with torch.save
  fsdp_reshard.py load URI REF   a differently initialised model and
                                 optimizer load step 2 through StorageReader
                                 (any world size); rank 0 compares the full
                                 state with REF and prints "equal" or exits 1
"""
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (StateDictOptions,
                                                     get_state_dict,
                                                     set_state_dict)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from strata.torch import StorageReader, StorageWriter


def build(seed):
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 40), torch.nn.Tanh(),
                                torch.nn.Linear(40, 7))
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, opt


def train(model, opt, steps):
    for s in range(steps):
        g = torch.Generator().manual_seed(100 + s)
        x = torch.randn(12, 16, generator=g)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


def full_state(model, opt):
    return get_state_dict(model, opt, options=StateDictOptions(
        full_state_dict=True, cpu_offload=True))


def compare(a, b, path=""):
    if isinstance(a, dict):
        if set(a) != set(b):
            return f"{path}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            err = compare(a[k], b[k], f"{path}/{k}")
            if err:
                return err
        return None
    if isinstance(a, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b)):
            err = compare(x, y, f"{path}[{i}]")
            if err:
                return err
        return None if len(a) == len(b) else f"{path}: lengths differ"
    if isinstance(a, torch.Tensor):
        return None if torch.equal(a, b) else f"{path}: values differ"
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def main():
    mode, uri, ref = sys.argv[1:4]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if mode == "save":
        model, opt = build(seed=0)
        train(model, opt, 2)
        msd, osd = get_state_dict(model, opt)
        dcp.save({"model": msd, "optim": osd},
                 storage_writer=StorageWriter(uri, step=2))
        full = full_state(model, opt)
        if rank == 0:
            torch.save(full, ref)
            print(f"saved step 2 from {dist.get_world_size()} ranks", flush=True)
    else:
        model, opt = build(seed=1)
        train(model, opt, 1)  # so the optimizer has state to overwrite
        msd, osd = get_state_dict(model, opt)
        sd = {"model": msd, "optim": osd}
        dcp.load(sd, storage_reader=StorageReader(uri))
        set_state_dict(model, opt, model_state_dict=sd["model"],
                       optim_state_dict=sd["optim"])
        full = full_state(model, opt)
        if rank == 0:
            want = torch.load(ref, weights_only=False)
            err = compare(want, full)
            if err:
                print(f"differs on {dist.get_world_size()} ranks: {err}", flush=True)
                sys.exit(1)
            print(f"equal on {dist.get_world_size()} ranks", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
