"""Multi-node tasks through the operator, and the training-pipeline example DAG end to end."""

from __future__ import annotations

import importlib.util
from datetime import datetime
from pathlib import Path

import pytest
from airflow.sdk import DAG
from azure.storage.blob import BlobServiceClient

from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from tests.airflow_helpers import run_dag

ROOT = Path(__file__).resolve().parent.parent.parent
START = datetime(2026, 1, 1)
ENV = "AZ_BATCH_MASTER_NODE AZ_BATCH_HOST_LIST AZ_BATCH_NODE_LIST AZ_BATCH_IS_CURRENT_NODE_MASTER AZ_BATCH_NODE_ID"


def test_a_two_node_task_sees_the_right_environment_on_both_nodes(airflow_db, azbatch_default, batch_client):
    coordination = " ; ".join(f'echo "{name}=${name}"' for name in ENV.split())
    with DAG("two_nodes", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="mpi",
            # A pool that stays after the job (an auto-pool would take the subtask's node away with it).
            batch_pool=BatchPool.shared("two-node-pool", requirements={"cpus": 1}, max_nodes=2, autoscale=False),
            num_nodes=2,
            coordination_command=coordination,
            command='echo "launching on $AZ_BATCH_HOST_LIST via $AZ_BATCH_MASTER_NODE"',
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success"
    job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))
    # The primary's output (coordination, then the application) is streamed.
    primary = dict(line[len("[main] ") :].split("=", 1) for line in logs if line.startswith("[main] AZ_BATCH"))
    hosts = primary["AZ_BATCH_HOST_LIST"].split(",")
    assert len(hosts) == 2
    assert primary["AZ_BATCH_MASTER_NODE"] == f"{hosts[0]}:6000"
    assert primary["AZ_BATCH_NODE_LIST"] == ";".join(hosts)
    assert primary["AZ_BATCH_IS_CURRENT_NODE_MASTER"] == "true"
    assert f"[main] launching on {','.join(hosts)} via {hosts[0]}:6000" in logs
    # The other node's (the subtask's) output is reachable too.
    outputs = AzureBatchHook().subtask_outputs(job_id, "main")
    assert list(outputs) == [1]
    other = dict(line.split("=", 1) for line in outputs[1].decode().splitlines())
    assert other["AZ_BATCH_HOST_LIST"] == primary["AZ_BATCH_HOST_LIST"]
    assert other["AZ_BATCH_MASTER_NODE"] == primary["AZ_BATCH_MASTER_NODE"]
    assert other["AZ_BATCH_IS_CURRENT_NODE_MASTER"] == "false"
    assert other["AZ_BATCH_NODE_ID"] != primary["AZ_BATCH_NODE_ID"]


def _load_example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "example_dags" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module.dag


def _staged_workspaces(service: BlobServiceClient) -> set[str]:
    container = service.get_container_client("azbatch-workspaces")
    if not container.exists():
        return set()
    return {blob.name for blob in container.list_blobs(name_starts_with="workspace-")}


@pytest.mark.azurite
def test_training_pipeline_example_runs_green(airflow_db, azbatch_with_storage, azurite):
    dag = _load_example("example_azbatch_training")
    service = BlobServiceClient(azurite.url, credential={"account_name": azurite.account, "account_key": azurite.key})
    # The session's Azurite is shared with other tests of this process, which stage workspaces of their own.
    before = _staged_workspaces(service)
    run, logs = run_dag(dag)
    assert run.state == "success", "\n".join(logs[-40:])
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {
        "prepare": "success",
        "train": "success",
        "evaluate": "success",
        "promote_or_hold": "success",
        "promote": "success",
        "hold": "skipped",
    }
    assert "[shard-0] shard 0/4: wrote 500 samples" in logs
    assert any(line.startswith("[main] launch: torchrun --nnodes=2 --rdzv_endpoint=") for line in logs)
    assert any(line.startswith("[main] node ready: master=") and line.endswith("is_master=true") for line in logs)
    assert "[main] training on 2000 samples" in logs
    assert "[main] model from 2 nodes, 2000 samples: w=" in "\n".join(logs)
    mae = next(line for line in logs if line.startswith("[main] mean absolute error"))
    assert float(mae.split()[-1]) < 1.0
    models = [blob.name for blob in service.get_container_client("models").list_blobs(name_starts_with="runs/")]
    assert any(name.endswith("/model.json") for name in models)
    # The code is staged once, by content: the three Airflow tasks share one archive.
    staged = sorted(_staged_workspaces(service) - before)
    # train and evaluate find it staged (prepare too when an earlier test of the session's Azurite staged the
    # same code: the archive is named by its content).
    staged_lines = [line for line in logs if "already staged in azbatch-workspaces/" in line]
    assert len(staged_lines) in (2, 3), staged_lines
    # Each step's log ends with what its job cost: the fan-out and the evaluation on the shared CPU pool
    # (task time per slot), the training on its own GPU pool (node time, idle share).
    costs = [line for line in logs if line.startswith("Cost estimate: $")]
    assert len(costs) == 3
    assert (
        sum(line.startswith("  the pool is shared: charged by task time x the node's price per slot") for line in logs)
        == 2
    )
    assert any(line.startswith("  idle: ") and line.endswith("% of the paid node time ran no task") for line in logs)
    assert run.get_task_instance("train").xcom_pull(task_ids="train")["cost"]["basis"] == "node time"
    shas = {
        task_id: run.get_task_instance(task_id).xcom_pull(task_ids=task_id)["workspaces"]
        for task_id in ("prepare", "train")
    }
    assert shas["prepare"] == shas["train"], shas
    assert len(shas["train"]) == 1, shas
    short = f"workspace-{shas['train'][0][:16]}.tar.gz"
    assert short in _staged_workspaces(service)
    assert staged in ([], [short])
    # The evaluation is a function run on Batch: its return value is the XCom, and the DAG branches on it.
    metrics = run.get_task_instance("evaluate").xcom_pull(task_ids="evaluate")
    assert metrics["mae"] == round(float(mae.split()[-1]), 4)
    assert metrics["nodes"] == 2
    promoted = run.get_task_instance("promote")
    assert (promoted.state, run.get_task_instance("hold").state) == ("success", "skipped")
    assert (
        promoted.xcom_pull(task_ids="promote")
        == f"promoted the model of {run.run_id}: mean absolute error {metrics['mae']}"
    )
    service.close()
