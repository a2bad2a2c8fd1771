# An unmodified torch.distributed script: env:// rendezvous (MASTER_ADDR,
# MASTER_PORT, RANK, WORLD_SIZE), gloo, one all_reduce. Prints
# "torch ok rank R sum S" where S must be 1 + 2 + ... + WORLD_SIZE.
import os
from datetime import timedelta

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://",
                        timeout=timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"torch ok rank {rank} sum {int(t.item())}", flush=True)
dist.barrier()
dist.destroy_process_group()
