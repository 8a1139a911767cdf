"""TorchX apps in DAGs: ``AzureBatchTorchXOperator`` with real Airflow (``dag.test()``) and the local service."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from airflow.sdk import DAG

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.operators.torchx import AzureBatchTorchXOperator
from tests.airflow_helpers import run_dag

specs = pytest.importorskip("torchx.specs", reason="the [torchx] extra is not installed")

START = datetime(2026, 1, 1)


def test_a_component_with_templated_arguments_runs_every_replica_with_its_own_macros(
    airflow_db, azbatch_default, monkeypatch
):
    monkeypatch.setenv("AIRFLOW__AZBATCH__POLL_INTERVAL", "0.3")
    with DAG("torchx_component", schedule=None, start_date=START) as dag:
        # docs/howto/torchx.md shows this operator.
        # [START howto_torchx_component_args]
        AzureBatchTorchXOperator(
            task_id="replicas",
            component="utils.sh",
            component_args=[
                "--num_replicas",
                "2",
                "sh",
                "-c",
                "echo replica=$TORCHX_REPLICA_ID rank0=$TORCHX_RANK0_HOST dag={{ dag.dag_id }}",
            ],
            # A pool that outlives the job: the other replica's output is read from its node at the end.
            app_options={"shared_pool": "torchx-dag-pool", "max_nodes": 2, "autoscale": False},
        )
        # [END howto_torchx_component_args]
    run, logs = run_dag(dag)
    assert run.state == "success", "\n".join(logs[-30:])
    primary = next(line for line in logs if line.startswith("[sh] replica="))
    other = next(line for line in logs if line.startswith("[sh/1] replica="))
    rank0 = primary.split("rank0=")[1].split()[0]
    assert primary == f"[sh] replica=0 rank0={rank0} dag=torchx_component"
    assert other == f"[sh/1] replica=1 rank0={rank0} dag=torchx_component"
    assert rank0
    assert ":" not in rank0  # a bare host: AZ_BATCH_MASTER_NODE without its port
    result = run.get_task_instance("replicas").xcom_pull(task_ids="replicas")
    assert result["torchx_app_handle"] == f"azure_batch://torchx/azbatch_default:{result['job_id']}"
    assert result["tasks"]["sh"]["exit_code"] == 0


@pytest.mark.azurite
def test_a_failing_app_fails_the_task_with_the_failure_report_while_deferred(airflow_db, azbatch_with_storage):
    app = specs.AppDef(
        "broken",
        roles=[
            specs.Role(
                "fail",
                image="alpine:3",
                entrypoint="sh",
                args=["-c", "echo about to fail >&2; exit 5"],
                resource=specs.Resource(cpu=1, gpu=0, memMB=512),
            )
        ],
    )
    with DAG("torchx_failing", schedule=None, start_date=START) as dag:
        AzureBatchTorchXOperator(task_id="app", app=app, deferrable=True, poll_interval=0.3)
    run, logs = run_dag(dag)
    assert run.state == "failed"
    error = next(line for line in logs if "failed: 1 of 1 tasks failed" in line)
    assert "Task 'fail' failed with exit code 5" in error
    assert "about to fail" in error  # its stderr, kept in Blob after the app's pool went


def test_an_app_no_vm_size_can_run_fails_the_dag_file():
    app = specs.AppDef(
        "huge",
        roles=[specs.Role("big", image="x", entrypoint="true", resource=specs.Resource(cpu=100000, gpu=0, memMB=1))],
    )
    with pytest.raises(AzureBatchValidationError, match=r"role 'big' resource .* cannot run on Azure Batch"):
        AzureBatchTorchXOperator(task_id="app", app=app)
    with pytest.raises(AzureBatchValidationError, match=r"app_options has unknown option.*colour"):
        AzureBatchTorchXOperator(task_id="app2", component="utils.echo", app_options={"colour": "red"})


def test_the_roles_mounts_and_a_private_registry_connection_reach_the_job(
    airflow_db, azbatch_default, batch_client, monkeypatch
):
    monkeypatch.setenv(
        "AIRFLOW_CONN_TRAINING_REGISTRY",
        json.dumps(
            {"conn_type": "generic", "host": "training.azurecr.io", "login": "puller", "password": "pull-s3cret"}
        ),
    )
    app = specs.AppDef(
        "mounted",
        roles=[
            specs.Role(
                "train",
                image="training.azurecr.io/train:1",
                entrypoint="echo",
                args=["trained"],
                resource=specs.Resource(cpu=1, gpu=0, memMB=512),
                mounts=[specs.BindMount(src_path="/mnt/batch/data", dst_path="/data", read_only=True)],
            )
        ],
    )
    with DAG("torchx_mounts_registry", schedule=None, start_date=START) as dag:
        AzureBatchTorchXOperator(
            task_id="app", app=app, app_options={"registry_conn_id": "training_registry"}, poll_interval=0.3
        )
    run, logs = run_dag(dag)
    assert run.state == "success", "\n".join(logs[-30:])
    assert "[train] trained" in logs
    job_id = run.get_task_instance("app").xcom_pull(task_ids="app")["job_id"]
    settings = batch_client.get_task(job_id, "train").container_settings
    assert settings.image_name == "training.azurecr.io/train:1"
    # The role's mount, then its /dev/shm: half the memory of its node (standard_f2s_v2, 4 GiB).
    assert settings.container_run_options == "--volume /mnt/batch/data:/data:ro --shm-size=2g"
    assert (settings.registry.registry_server, settings.registry.username) == ("training.azurecr.io", "puller")
    # The app's pool may pull from the registry too (the pool made for it, as the scheduler's).
    pool = batch_client.get_job(job_id).pool_info.auto_pool_specification.pool
    registries = pool.virtual_machine_configuration.container_configuration.container_registries
    assert [(r.registry_server, r.username) for r in registries] == [("training.azurecr.io", "puller")]
    assert not any("pull-s3cret" in line for line in logs)
    # The app fails fast as the scheduler's apps do (the operator's default, [azbatch] fail_fast, is off).
    assert batch_client.get_task(job_id, "train").exit_conditions.default.job_action == "terminate"
