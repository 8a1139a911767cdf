"""Pools and jobs as enterprises run them, through the operator against the local Batch service: overrides that
reach the service, elevated start tasks and tasks, mounts, networks, images, priorities, and what is refused."""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from datetime import datetime

import pytest
from airflow.sdk import DAG
from azure.batch import models as m
from azure.storage.blob import BlobServiceClient

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import (
    BatchPool,
    BlobMount,
    FileShareMount,
    NfsMount,
    PoolImage,
    PoolNetwork,
    RunAs,
    StartTask,
)
from airflow_provider_azbatch.pools.ready import prepare_pool
from airflow_provider_azbatch.submission import TaskSpec
from local_azure_batch.testing import run_local_batch_service
from tests.airflow_helpers import run_dag
from tests.helpers import pool_options, sh, wait_until

START = datetime(2026, 1, 1)
IDENTITY = 'echo "runs as $AZ_BATCH_TASK_USER_IDENTITY"'


def _submitted_job(logs: list[str]) -> str:
    return next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))


def _uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# -- overrides ------------------------------------------------------------------------------------
def test_each_override_kind_reaches_the_service(airflow_db, azbatch_default, batch_client):
    pool_id = _uid("ovr")
    with DAG("overrides_reach_the_service", schedule=None, start_date=START, params={"retries": 2}) as dag:
        AzureBatchJobOperator(
            task_id="overridden",
            batch_pool=BatchPool.shared(
                pool_id,
                {"cpus": 1},
                max_nodes=1,
                autoscale=False,
                pool_overrides={"displayName": "team pool {{ dag.dag_id }}", "resizeTimeout": "PT20M"},
            ),
            tasks=[
                {"id": "a", "command_line": "true", "overrides": {"constraints": {"retentionTime": "PT3H"}}},
                {"id": "b", "command_line": "true"},
            ],
            job_overrides={
                "allowTaskPreemption": True,
                "constraints": {"maxTaskRetryCount": "{{ params.retries }}"},
            },
            task_overrides=m.BatchTaskCreateOptions(
                constraints=m.BatchTaskConstraints(retention_time="PT1H"),
                affinity_info=m.BatchAffinityInfo(affinity_id="TVM:preferred-node"),
            ),
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success", logs[-20:]
    job = batch_client.get_job(_submitted_job(logs))
    assert job.allow_task_preemption is True
    assert job.constraints.max_task_retry_count == 2  # rendered from the template, read as a number
    tasks = {task.id: task for task in batch_client.list_tasks(job.id)}
    assert tasks["a"].constraints.retention_time.total_seconds() == 3 * 3600  # the task's own wins
    assert tasks["b"].constraints.retention_time.total_seconds() == 3600
    assert tasks["b"].affinity_info.affinity_id == "TVM:preferred-node"
    pool = batch_client.get_pool(pool_id)
    assert pool.display_name == "team pool overrides_reach_the_service"
    assert pool.resize_timeout.total_seconds() == 20 * 60


def test_an_auto_pool_gets_its_overrides(airflow_db, azbatch_default, batch_client):
    with DAG("auto_pool_overrides", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="auto",
            batch_pool=BatchPool.auto({"cpus": 1}, pool_overrides={"displayName": "made for one job"}),
            command="true",
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success", logs[-20:]
    spec = batch_client.get_job(_submitted_job(logs)).pool_info.auto_pool_specification.pool
    assert spec.display_name == "made for one job"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"job_overrides": {"constraints": {"maxTaskRetryCont": 2}}},
            "job_overrides.constraints.maxTaskRetryCont is not a field of BatchJobConstraints: did you mean "
            "'maxTaskRetryCount'?",
        ),
        (
            # A value holding a template waits for the run; its key is checked when the DAG is parsed.
            {"task_overrides": {"constraints": {"retentionTme": "{{ params.keep }}"}}},
            "task_overrides.constraints.retentionTme is not a field of BatchTaskConstraints: did you mean "
            "'retentionTime'?",
        ),
        (
            {"tasks": [{"id": "t", "command_line": "true", "overrides": {"affinityInf": {}}}]},
            "tasks[0].overrides.affinityInf is not a field of BatchTaskCreateOptions: did you mean 'affinityInfo'?",
        ),
        (
            {"batch_pool": lambda: BatchPool.auto({"cpus": 1}, pool_overrides={"displayNam": "x"})},
            "pool_overrides.displayNam is not a field of BatchPoolSpecification: did you mean 'displayName'?",
        ),
        (
            {"job_overrides": {"poolInfo": {"poolId": "other"}}},
            "job_overrides.poolInfo is set by the provider (the pool the job runs on): use pool_id or batch_pool",
        ),
        (
            {"task_overrides": {"userIdentity": {"autoUser": {"elevationLevel": "admin"}}}},
            "task_overrides.userIdentity is set by the provider (the user the task runs as): use run_as (operator "
            "or task)",
        ),
        (
            {"batch_pool": lambda: BatchPool.auto({"cpus": 1}, pool_overrides={"startTask": {"commandLine": "x"}})},
            "pool_overrides.startTask.commandLine is set by the provider (the start task's command, handed to a "
            "shell): use start_task=",
        ),
        ({"priority": 1001}, "priority must be between -1000 and 1000, got 1001"),
        (
            {"batch_pool": lambda: BatchPool.auto({"cpus": 1}), "output_identity": "/subscriptions/s/identity"},
            "output_identity cannot work on a pool this provider creates: a managed identity reference needs the pool "
            "to have that identity",
        ),
        (
            {"batch_pool": lambda: BatchPool.auto({"cpus": 1}), "run_as": RunAs(user="builder")},
            "run_as names the user 'builder', which the pool does not define: add PoolUser('builder') to the "
            "BatchPool's users",
        ),
    ],
)
def test_mistakes_fail_when_the_dag_is_parsed_naming_the_field(kwargs, message):
    arguments = {"task_id": "t", "command": "true", "pool_id": "p", **kwargs}
    if "batch_pool" in kwargs:
        arguments.pop("pool_id")
    if "tasks" in kwargs:
        arguments.pop("command")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        _parse(arguments)


def _parse(arguments: dict) -> None:
    """What a DAG file does when it is parsed: make the pool, then the operator."""
    with DAG("parse_time", schedule=None, start_date=START):
        AzureBatchJobOperator(**{name: value() if callable(value) else value for name, value in arguments.items()})


# -- identity -------------------------------------------------------------------------------------
def test_the_start_task_of_a_provider_pool_runs_elevated_and_a_task_can_too(airflow_db, azbatch_default, batch_client):
    pool_id = _uid("admin")
    with DAG("elevated", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="elevated",
            batch_pool=BatchPool.shared(
                pool_id,
                {"cpus": 1},
                max_nodes=1,
                autoscale=False,
                start_task='echo "$AZ_BATCH_TASK_USER_IDENTITY" > "$AZ_BATCH_NODE_SHARED_DIR/start-user"',
            ),
            tasks=[
                {
                    "id": "start",
                    "command_line": 'echo "start task ran as $(cat "$AZ_BATCH_NODE_SHARED_DIR/start-user")"',
                },
                {"id": "admin", "command_line": IDENTITY, "run_as": "admin"},
                {"id": "plain", "command_line": IDENTITY},
                {"id": "task-admin", "command_line": IDENTITY, "run_as": {"elevation": "admin", "scope": "task"}},
            ],
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success", logs[-20:]
    assert "[start] start task ran as PoolAdmin" in logs
    assert "[admin] runs as PoolAdmin" in logs
    assert "[plain] runs as PoolNonAdmin" in logs
    assert "[task-admin] runs as TaskAdmin" in logs
    start_task = batch_client.get_pool(pool_id).start_task
    assert start_task.user_identity.auto_user.elevation_level == "admin"
    assert start_task.user_identity.auto_user.scope == "pool"
    job_id = _submitted_job(logs)
    assert batch_client.get_task(job_id, "admin").user_identity.auto_user.elevation_level == "admin"


def test_run_as_for_every_task_and_a_start_task_without_elevation(airflow_db, azbatch_default, batch_client):
    # A shared pool: an auto-pool's nodes (and the tasks' output on them) go as soon as the job ends.
    pool_id = _uid("plain-start")
    with DAG("run_as_everywhere", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="all_admin",
            batch_pool=BatchPool.shared(
                pool_id, {"cpus": 1}, max_nodes=1, autoscale=False, start_task=StartTask("true", run_as="nonadmin")
            ),
            tasks=[{"id": "a", "command_line": IDENTITY}, {"id": "b", "command_line": IDENTITY, "run_as": "nonadmin"}],
            run_as="admin",
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success", logs[-20:]
    assert "[a] runs as PoolAdmin" in logs
    assert "[b] runs as PoolNonAdmin" in logs
    assert batch_client.get_pool(pool_id).start_task.user_identity.auto_user.elevation_level == "nonadmin"


# -- mounts ---------------------------------------------------------------------------------------
def test_an_azurite_container_mounted_on_the_pool_is_read_under_the_mount_root(
    airflow_db, azbatch_with_storage, azurite, local_batch_service
):
    blobs = BlobServiceClient(azurite.url, credential={"account_name": azurite.account, "account_key": azurite.key})
    container = f"refs-{uuid.uuid4().hex[:6]}"
    blobs.create_container(container).upload_blob("genome/chr1.fa", b">chr1\nACGTACGT\n")
    local_batch_service.set_storage(blob_endpoints={azurite.account: azurite.url})
    with DAG("blob_mount", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="read_mount",
            batch_pool=BatchPool.shared(
                _uid("mounted"), {"cpus": 1}, max_nodes=1, autoscale=False, mounts=[BlobMount(container, "refs")]
            ),
            command='cat "$AZ_BATCH_NODE_MOUNTS_DIR/refs/genome/chr1.fa"',
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success", logs[-20:]
    assert "[main] ACGTACGT" in logs
    assert not any(azurite.key in line for line in logs)  # the key went to Batch only


def test_a_mount_that_fails_on_the_node_fails_the_job_saying_why(airflow_db, azbatch_with_storage, local_batch_service):
    local_batch_service.set_storage(blob_endpoints={"devstoreaccount1": None})
    pool_id = _uid("nomount")
    with DAG("mount_fails", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="never",
            batch_pool=BatchPool.shared(
                pool_id, {"cpus": 1}, max_nodes=1, autoscale=False, mounts=[BlobMount("data", "data")]
            ),
            command="true",
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "failed"
    text = "\n".join(logs)
    assert f"Pool {pool_id} has no usable node: node tvmps_" in text
    assert "is unusable; MountFailed: No Blob endpoint is known for storage account 'devstoreaccount1'" in text
    assert "(RelativeMountPath=data, Source=devstoreaccount1/data)" in text


# -- shared pools are what they say ---------------------------------------------------------------
def _prepare(hook: AzureBatchHook, pool: BatchPool) -> tuple[str | None, dict | None]:
    tasks = [TaskSpec(id="t", command_line="true")]
    return prepare_pool(hook, pool, tasks, job_image=None, registry=None, log=logging.getLogger("test"))


def _differs(hook: AzureBatchHook, first: BatchPool, second: BatchPool) -> str:
    assert _prepare(hook, first) == (first.pool_id, None)
    with pytest.raises(AzureBatchValidationError) as info:
        _prepare(hook, second)
    message = str(info.value)
    assert message.startswith(f"batch_pool pool {first.pool_id!r} already exists with a different specification: ")
    return message


def test_a_shared_pool_with_another_image_version_or_mount_is_reported_not_reused(azbatch_default):
    hook = AzureBatchHook()
    pool_id = _uid("image")

    def image(version: str) -> PoolImage:
        return PoolImage.marketplace(
            "canonical", "ubuntu-24_04-lts", "server", version=version, node_agent_sku_id="batch.node.ubuntu 24.04"
        )

    common = {"max_nodes": 1, "autoscale": False}
    older = BatchPool.shared(pool_id, {"cpus": 1}, image=image("24.04.202610010"), **common)
    newer = BatchPool.shared(pool_id, {"cpus": 1}, image=image("24.04.202611010"), **common)
    assert (
        "virtualMachineConfiguration.imageReference.version is '24.04.202610010', this task wants '24.04.202611010'"
        in _differs(hook, older, newer)
    )
    assert _prepare(hook, older) == (pool_id, None)  # the same pool again is reused
    pool_id = _uid("mount")
    first = BatchPool.shared(pool_id, {"cpus": 1}, mounts=[NfsMount("10.0.0.4:/exports/a", "data")], **common)
    second = BatchPool.shared(pool_id, {"cpus": 1}, mounts=[NfsMount("10.0.0.4:/exports/b", "data")], **common)
    assert "mountConfiguration is [{'nfsMountConfiguration': {'source': '10.0.0.4:/exports/a'" in _differs(
        hook, first, second
    )


@pytest.fixture(scope="module")
def entra_batch():
    """A local service with TLS and its token authority: pools in virtual networks need Microsoft Entra ID."""
    with run_local_batch_service(tls=True) as service:
        yield service


def _entra_connection(service) -> str:
    return json.dumps(
        {
            "conn_type": "azbatch",
            "login": service.account_name,
            "extra": {
                "account_url": service.url,
                "auth_method": "service_principal",
                "tenant_id": service.tenant_id,
                "client_id": service.client_id,
                "client_secret": service.client_secret,
                "cloud": "custom",
                "authority_host": service.url,
                "token_scope": "https://batch.core.windows.net//.default",
                "ca_bundle": service.ca_file,
            },
        }
    )


def _subnet(service, name: str) -> str:
    return (
        f"/subscriptions/{service.subscription_id}/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/"
        f"corp/subnets/{name}"
    )


def test_a_shared_pool_in_another_subnet_is_reported_not_reused(entra_batch, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_ENTRA", _entra_connection(entra_batch))
    hook = AzureBatchHook("azbatch_entra")
    pool_id = _uid("vnet")
    common = {"max_nodes": 1, "autoscale": False}
    first = BatchPool.shared(pool_id, {"cpus": 1}, network=PoolNetwork(_subnet(entra_batch, "a"), "none"), **common)
    second = BatchPool.shared(pool_id, {"cpus": 1}, network=PoolNetwork(_subnet(entra_batch, "b"), "none"), **common)
    message = _differs(hook, first, second)
    assert f"networkConfiguration.subnetId is {_subnet(entra_batch, 'a')!r}, this task wants " in message
    network = hook.get_pool(pool_id).network_configuration
    assert network.public_ip_address_configuration.ip_address_provisioning_type == "nopublicipaddresses"


def test_a_vnet_pool_with_a_shared_key_connection_is_refused_before_anything_is_created(
    airflow_db, azbatch_default, batch_client, local_batch_service
):
    pool_id = _uid("vnet")
    subnet = _subnet(local_batch_service, "a")
    with DAG("vnet_shared_key", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="vnet",
            batch_pool=BatchPool.shared(pool_id, {"cpus": 1}, network=PoolNetwork(subnet)),
            command="true",
        )
    run, logs = run_dag(dag)
    assert run.state == "failed"
    assert (
        "batch_pool network: a pool in a virtual network needs a Microsoft Entra ID connection (auth_method other "
        "than shared_key)" in "\n".join(logs)
    )
    assert pool_id not in {pool.id for pool in batch_client.list_pools()}


# -- Windows --------------------------------------------------------------------------------------
def test_an_existing_windows_pool_is_refused_before_submission(airflow_db, azbatch_default, batch_client):
    pool_id = _uid("win")
    batch_client.create_pool(
        m.BatchPoolCreateOptions(
            id=pool_id,
            vm_size="standard_d2s_v3",
            virtual_machine_configuration=m.VirtualMachineConfiguration(
                image_reference=m.BatchVmImageReference(
                    publisher="microsoftwindowsserver", offer="windowsserver", sku="2022-datacenter"
                ),
                node_agent_sku_id="batch.node.windows amd64",
            ),
            target_dedicated_nodes=0,
        )
    )
    jobs_before = {job.id for job in batch_client.list_jobs()}
    with DAG("windows_pool", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(task_id="win", pool_id=pool_id, command="echo hi")
    run, logs = run_dag(dag)
    assert run.state == "failed"
    assert (
        f"pool_id {pool_id!r} is a Windows pool (batch.node.windows amd64): Windows pools are not supported: this "
        "provider hands every command" in "\n".join(logs)
    )
    assert {job.id for job in batch_client.list_jobs()} == jobs_before


# -- priority -------------------------------------------------------------------------------------
def test_a_higher_priority_job_overtakes_a_queued_backfill_on_a_full_pool(
    airflow_db, azbatch_default, batch_client, tmp_path
):
    pool_id = _uid("full")
    batch_client.create_pool(pool_options(pool_id, nodes=1, slots=1))
    wait_until(lambda: [n.state for n in batch_client.list_nodes(pool_id)] == [m.BatchNodeState.IDLE], what="node")
    backfill = _uid("backfill")
    batch_client.create_job(m.BatchJobCreateOptions(id=backfill, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
    # b0 holds the only slot until the training job is in the queue behind b1 and b2.
    gate = tmp_path / "gate"
    tasks = [m.BatchTaskCreateOptions(id="b0", command_line=sh(f"while [ ! -f {gate} ]; do sleep 0.05; done"))]
    tasks += [m.BatchTaskCreateOptions(id=f"b{i}", command_line="true") for i in (1, 2)]
    batch_client.create_task_collection(backfill, m.BatchTaskGroup(task_values=tasks))
    wait_until(lambda: batch_client.get_task(backfill, "b0").state == m.BatchTaskState.RUNNING, what="b0 running")

    def open_the_gate_once_training_is_queued() -> None:
        wait_until(lambda: any(job.priority == 800 for job in batch_client.list_jobs()), what="training job queued")
        gate.touch()

    opener = threading.Thread(target=open_the_gate_once_training_is_queued)
    opener.start()
    with DAG("nightly_training", schedule=None, start_date=START, params={"priority": 800}) as dag:
        AzureBatchJobOperator(
            task_id="train",
            pool_id=pool_id,
            command="echo training",
            priority="{{ params.priority }}",
            poll_interval=0.2,
        )
    run, logs = run_dag(dag)
    opener.join(timeout=30)
    assert run.state == "success", logs[-20:]
    urgent = _submitted_job(logs)
    assert batch_client.get_job(urgent).priority == 800
    wait_until(
        lambda: all(task.state == m.BatchTaskState.COMPLETED for task in batch_client.list_tasks(backfill)),
        what="backfill done",
    )
    started = {task.id: task.execution_info.start_time for task in batch_client.list_tasks(backfill)}
    trained = batch_client.get_task(urgent, "main").execution_info.start_time
    # Training took the slot b0 freed, before b1 and b2, which had been queued first.
    assert started["b0"] < trained < started["b1"]
    assert trained < started["b2"]


def test_the_readmes_vnet_pool_from_a_gallery_image_with_a_file_share_runs_offline(
    airflow_db, entra_batch, monkeypatch, tmp_path
):
    references = tmp_path / "references"
    references.mkdir()
    (references / "GRCh38.fa").write_text(">chr1\nNNNNACGT\n")
    share = "https://corpgenomics.file.core.windows.net/references"
    entra_batch.set_storage(mount_sources={share: str(references)})
    monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_ENTRA", _entra_connection(entra_batch))
    monkeypatch.setenv(
        "AIRFLOW_CONN_GENOMICS_FILES",
        json.dumps({"conn_type": "generic", "login": "corpgenomics", "password": "file-share-key=="}),
    )
    pool_id = _uid("genomics")
    gallery = (
        f"/subscriptions/{entra_batch.subscription_id}/resourceGroups/images/providers/Microsoft.Compute/galleries/"
        "corp/images/ubuntu-2404-hardened/versions/2026.11.0"
    )
    with DAG("genomics", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="align",
            batch_pool=BatchPool.shared(
                pool_id,
                requirements={"cpus": 8, "memory": "32Gi"},
                vm_size="standard_d8s_v5",
                image=PoolImage.gallery(gallery, node_agent_sku_id="batch.node.ubuntu 24.04"),
                network=PoolNetwork(subnet_id=_subnet(entra_batch, "batch"), public_ips="none"),
                mounts=[FileShareMount(share, "refs", conn_id="genomics_files", options="-o vers=3.0")],
                start_task=StartTask('echo "$AZ_BATCH_TASK_USER_IDENTITY" > "$AZ_BATCH_NODE_SHARED_DIR/installed-by"'),
                max_nodes=1,
                autoscale=False,
                fill="pack",
                metadata={"cost-center": "research"},
            ),
            command='cat "$AZ_BATCH_NODE_MOUNTS_DIR/refs/GRCh38.fa"; '
            'echo "set up by $(cat "$AZ_BATCH_NODE_SHARED_DIR/installed-by")"',
            azbatch_conn_id="azbatch_entra",
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success", logs[-20:]
    assert "[main] NNNNACGT" in logs
    assert "[main] set up by PoolAdmin" in logs
    assert not any("file-share-key==" in line for line in logs)
    pool = AzureBatchHook("azbatch_entra").get_pool(pool_id).as_dict()
    assert pool["virtualMachineConfiguration"]["imageReference"] == {"virtualMachineImageId": gallery}
    assert pool["networkConfiguration"]["subnetId"] == _subnet(entra_batch, "batch")
    assert pool["mountConfiguration"][0]["azureFileShareConfiguration"]["accountName"] == "corpgenomics"
    assert "accountKey" not in pool["mountConfiguration"][0]["azureFileShareConfiguration"]
    assert pool["startTask"]["userIdentity"] == {"autoUser": {"scope": "pool", "elevationLevel": "admin"}}


def test_a_registry_identity_on_a_provider_pool_is_refused_before_anything_is_created(
    airflow_db, azbatch_default, batch_client, monkeypatch
):
    monkeypatch.setenv(
        "AIRFLOW_CONN_ACR",
        json.dumps(
            {
                "conn_type": "generic",
                "host": "corp.azurecr.io",
                "extra": {"identity_reference": "/subscriptions/s/resourceGroups/r/providers/x/puller"},
            }
        ),
    )
    pool_id = _uid("acr")
    with DAG("registry_identity", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="pull",
            batch_pool=BatchPool.shared(pool_id, {"cpus": 1}),
            command="true",
            image="corp.azurecr.io/train:1",
            registry_conn_id="acr",
        )
    run, logs = run_dag(dag)
    assert run.state == "failed"
    assert (
        "registry_conn_id (extra identity_reference) cannot work on a pool this provider creates: a managed identity "
        "reference needs the pool to have that identity" in "\n".join(logs)
    )
    assert pool_id not in {pool.id for pool in batch_client.list_pools()}


def test_a_job_preparation_task_runs_as_it_says(airflow_db, azbatch_default, shared_pool, batch_client):
    with DAG("prep_as_admin", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="prep",
            pool_id=shared_pool,
            job_preparation={
                "command": 'echo "$AZ_BATCH_TASK_USER_IDENTITY" > "$AZ_BATCH_NODE_SHARED_DIR/prep-$AZ_BATCH_JOB_ID"',
                "run_as": "admin",
            },
            command='echo "prepared by $(cat "$AZ_BATCH_NODE_SHARED_DIR/prep-$AZ_BATCH_JOB_ID")"',
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success", logs[-20:]
    assert "[main] prepared by PoolAdmin" in logs
    job = batch_client.get_job(_submitted_job(logs))
    assert job.job_preparation_task.user_identity.auto_user.elevation_level == "admin"
