"""One rank of the rendezvous tests: joins the process group torchrun set up and all-reduces its rank + 1."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(f"rank {rank} of {world}: all-reduced {value.item():g}", flush=True)
dist.destroy_process_group()
