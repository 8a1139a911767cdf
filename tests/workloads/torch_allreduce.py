"""One rank of the two-node rendezvous test (test_torch_rendezvous.py), started by torchrun: a gloo all_reduce on CPU.

Every rank adds rank + 1 (1 + 2 = 3 on two ranks) and prints one line with the result. The rank on the Batch
primary also prints the lines of all ranks, gathered through the process group: a multi-instance task's output
is the primary's (the Airflow task log streams it), the other node's stays on that node.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
line = f"rank {rank} of {world} on {os.environ['NODE_ADDRESS']}: all_reduce sum {total.item():g}"
print(line, flush=True)
# all_gather_object needs NumPy, which the test venv does not have: the lines travel as byte tensors.
size = 200
mine = torch.zeros(size, dtype=torch.uint8)
mine[: len(line)] = torch.tensor(list(line.encode()), dtype=torch.uint8)
lines = [torch.zeros(size, dtype=torch.uint8) for _ in range(world)]
dist.all_gather(lines, mine)
if os.environ["AZ_BATCH_IS_CURRENT_NODE_MASTER"] == "true":
    for gathered in lines:
        print(f"gathered: {bytes(gathered.tolist()).rstrip(bytes(1)).decode()}", flush=True)
# Nobody leaves before everyone printed: the primary's end ends the task, and its other nodes' processes.
dist.barrier()
dist.destroy_process_group()
