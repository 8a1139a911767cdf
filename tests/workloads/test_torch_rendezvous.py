"""A real two-node PyTorch rendezvous through the operator: torchrun on both nodes of a multi-node task.

The local Batch service gives each node its own loopback address, so the two torchrun agents meet at the
primary's address (``AZ_BATCH_MASTER_NODE`` without its port) and their ranks all-reduce over gloo, with nothing
leaving the machine. What each node tells torch about itself is in the command, as it would be on Batch:
``--local_addr`` (the node's address: every node here has the host's name), ``is_host`` (the primary hosts
the rendezvous store: torch takes every loopback address for its own) and ``GLOO_SOCKET_IFNAME=lo`` (the
interface gloo binds; ``eth0`` on a Batch node).
"""

from __future__ import annotations

import ipaddress
import shlex
import socket
import uuid
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from tests.airflow_helpers import run_dag

RANK_SCRIPT = Path(__file__).with_name("torch_allreduce.py")

# This node's address (Batch sets no variable for it): the master's, or on the other node of two, the one the
# host list names besides it.
NODE_ADDRESS = (
    'master="${AZ_BATCH_MASTER_NODE%:*}"\n'
    'if [ "$AZ_BATCH_IS_CURRENT_NODE_MASTER" = true ]; then NODE_ADDRESS="$master"\n'
    'else NODE_ADDRESS=$(echo "$AZ_BATCH_HOST_LIST" | tr , "\\n" | grep -vxF "$master"); fi\n'
    "export NODE_ADDRESS GLOO_SOCKET_IFNAME=lo\n"
    # The CPU build warns at every import that NumPy is missing; nothing here needs it.
    "export PYTHONWARNINGS='ignore:Failed to initialize NumPy'\n"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def torchrun(port: int, run_id: str) -> str:
    # The other node's agent starts first and waits for the primary's store: up to read_timeout seconds
    # (60 by default, short for a loaded test machine where importing torch alone can take 15 s).
    return (
        f'torchrun --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint "$master:{port}" '
        f'--rdzv_id {run_id} --rdzv_conf "is_host=$AZ_BATCH_IS_CURRENT_NODE_MASTER,read_timeout=240" '
        f'--local_addr "$NODE_ADDRESS" {shlex.quote(str(RANK_SCRIPT))}'
    )


def test_torchrun_on_two_nodes_meets_in_one_rendezvous_and_all_reduces(airflow_db, azbatch_default, batch_client):
    launch = torchrun(_free_port(), f"rdzv-{uuid.uuid4().hex[:8]}")
    with DAG("torch_rendezvous", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        AzureBatchJobOperator(
            task_id="train",
            # A pool that stays after the job (an auto-pool would take the subtask's node away with it).
            batch_pool=BatchPool.shared("rendezvous-pool", requirements={"cpus": 1}, max_nodes=2, autoscale=False),
            num_nodes=2,
            # The other node's agent starts in the background: the primary's starts once coordination is done.
            coordination_command=f'{NODE_ADDRESS}[ "$AZ_BATCH_IS_CURRENT_NODE_MASTER" = true ] || {launch} &',
            command=f"{NODE_ADDRESS}{launch}",
            poll_interval=0.3,
            max_wall_clock=300,
        )
    run, logs = run_dag(dag)
    assert run.state == "success", "\n".join(logs[-40:])
    job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))

    primary_node = batch_client.get_task(job_id, "main").node_info
    (subtask,) = batch_client.list_subtasks(job_id, "main")
    nodes = {node.id: node.ip_address for node in batch_client.list_nodes(primary_node.pool_id)}
    primary, other = nodes[primary_node.node_id], nodes[subtask.node_info.node_id]
    assert primary != other
    assert all(ipaddress.ip_address(address).is_loopback for address in (primary, other))
    # Ranks follow the agents' addresses (torch sorts the nodes that joined); 1 + 2 = 3 on both.
    ranks = {address: rank for rank, address in enumerate(sorted([primary, other]))}
    lines = {address: f"rank {rank} of 2 on {address}: all_reduce sum 3" for address, rank in ranks.items()}
    # The primary's rank printed its line, and the lines of both ranks gathered over the process group.
    assert f"[main] {lines[primary]}" in logs
    assert [line for line in logs if line.startswith("[main] gathered: ")] == [
        f"[main] gathered: {lines[address]}" for address in sorted(ranks, key=ranks.__getitem__)
    ]
    # The other node's rank printed its own line there.
    other_output = AzureBatchHook().subtask_outputs(job_id, "main")[1].decode().splitlines()
    assert lines[other] in other_output
