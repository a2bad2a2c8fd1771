# An unmodified torch.distributed script, as torchrun would run it: env://
# rendezvous (MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE) and the gloo backend.
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
expected = world * (world + 1) / 2
assert t.item() == expected, (t.item(), expected)
print(f"torch rank={rank} world={world} local_rank={os.environ['LOCAL_RANK']} "
      f"allreduce={t.item():.0f} ok", flush=True)
dist.destroy_process_group()
