"""A real two-node PyTorch rendezvous: TorchX's own ``dist.torchrun`` component (2 replicas x 1 process, CPU,
gloo) through ``torchx run`` and through a DAG. The local Batch service gives every node its own loopback
address; the scheduler tells each replica its node (``TORCHX_REPLICA_HOST``, torchrun's ``PET_LOCAL_ADDR``) and
that the primary hosts the store (``is_host``), and ``TORCHX_RANK0_HOST`` is the primary's bare address. The
one thing the test adds is the interface gloo binds (``lo`` here, ``eth0`` on a Batch node)."""

from __future__ import annotations

import socket
from datetime import datetime
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="PyTorch (CPU) is not installed in this venv")

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.torchx import AzureBatchTorchXOperator
from tests.airflow_helpers import run_dag
from tests.helpers import wait_until
from tests.torchx import commands
from tests.torchx.commands import argv
from tests.torchx.conftest import job_of, pool_gone

SCRIPT = Path(__file__).with_name("allreduce.py")
# The page's pool, with fixed nodes: the DAG's account has no storage account, so the other replica's output is
# read from its node after the app, which an autoscaling pool may have removed by then.
POOL = {"shared_pool": "training", "max_nodes": 2, "autoscale": False}
# A pool made for the app, deleted with it: each replica's output is kept in the account's storage.
OWN_POOL = {"max_nodes": 2}
# The CPU build warns at every import that NumPy is missing; nothing here needs it.
ENV = "GLOO_SOCKET_IFNAME=lo,PYTHONWARNINGS=ignore:Failed to initialize NumPy"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def local_args() -> list[str]:
    """What this machine needs on top of the page's component arguments: small roles, a free rendezvous port
    (tests run side by side), and gloo on the loopback interface."""
    return ["--cpu", "1", "--memMB", "512", "--rdzv_port", str(_free_port()), "--env", ENV]


def component_args() -> list[str]:
    return ["-j", "2x1", *local_args(), "--script", str(SCRIPT)]


def documented_torchrun(pool: dict[str, object]) -> list[str]:
    """The page's ``torchx run ... dist.torchrun`` as run here: the script is allreduce.py, given by its path
    (no workspace: the local nodes share this machine's files), on ``pool``, with ``local_args()``."""
    words = argv(commands.TORCHRUN)
    cfg = words.index("-cfg") + 1
    assert words[cfg] == "shared_pool=training,max_nodes=2"
    words[cfg] = ",".join(f"{key}={value}" for key, value in pool.items())
    assert words[-2:] == ["--script", "train.py"]
    return [words[0], "--workspace", "", *words[1:-2], *local_args(), "--script", str(SCRIPT)]


def ranks(lines: list[str]) -> set[str]:
    return {line.split("rank ", 1)[1] for line in lines if "all-reduced" in line}


@pytest.mark.azurite
def test_torchrun_on_two_replicas_through_torchx_run(torchx, azbatch_with_storage, batch_client):
    run = torchx(*documented_torchrun(OWN_POOL))
    assert run.code == 0, run.err
    job_id = job_of(run.handle)
    wait_until(lambda: pool_gone(batch_client, job_id), timeout=400, what="the rendezvous app ended and its pool")
    status = torchx("status", run.handle)
    assert "State: SUCCEEDED" in status.out, status.out
    # Each replica its own state and exit code (replica 0, the primary, starred by torchx).
    replicas = [line.strip() for line in status.out.splitlines() if line.strip().lstrip("*").startswith("allreduce[")]
    assert replicas == ["*allreduce[0]:SUCCEEDED (exitcode: 0)", "allreduce[1]:SUCCEEDED (exitcode: 0)"], status.out
    log = torchx("log", "--streams", "stdout", run.handle)
    # Both ranks joined one rendezvous (world of 2) and got the same sum, 1 + 2; their output outlived the pool.
    assert ranks(log.out.splitlines()) == {"0 of 2: all-reduced 3", "1 of 2: all-reduced 3"}, log.out + log.err


def test_torchrun_on_two_replicas_through_a_dag(airflow_db, azbatch_default):
    with DAG("torchx_rendezvous", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        AzureBatchTorchXOperator(
            task_id="train",
            component="dist.torchrun",
            component_args=component_args(),
            app_options=POOL,
            poll_interval=0.5,
            max_wall_clock=400,
        )
    run, logs = run_dag(dag)
    assert run.state == "success", "\n".join(logs[-40:])
    # The primary's lines streamed live ([<task>] ...), the other replica's after the job ([<task>/1] ...).
    primary = [line for line in logs if "all-reduced" in line and "/1]" not in line.split(" ", 1)[0]]
    other = [line for line in logs if "all-reduced" in line and "/1]" in line.split(" ", 1)[0]]
    assert ranks(primary) | ranks(other) == {"0 of 2: all-reduced 3", "1 of 2: all-reduced 3"}
    assert len(ranks(primary)) == len(ranks(other)) == 1
