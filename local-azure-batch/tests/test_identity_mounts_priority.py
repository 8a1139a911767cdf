"""What the service does with identities, mounts and priorities: a task reads who it runs as from its environment,
a pool's mounts are under the node's mount root, and a higher-priority job's tasks start first on a busy pool."""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path

import pytest
from azure.batch import models as m
from azure.storage.blob import BlobServiceClient

from local_azure_batch.testing import run_local_batch_service
from tests import sdk_models
from tests.azurite import ACCOUNT, KEY, run_azurite
from tests.helpers import sh, wait_until


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _stdout(client, job_id: str, task_id: str) -> str:
    return b"".join(client.download_task_file(job_id, task_id, "stdout.txt")).decode()


def _run(client, pool_id: str, *tasks: m.BatchTaskCreateOptions) -> str:
    job_id = _id("job")
    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
    for task in tasks:
        client.create_task(job_id, task)
    wait_until(
        lambda: all(t.state == m.BatchTaskState.COMPLETED for t in client.list_tasks(job_id)), what="tasks completed"
    )
    return job_id


def _pool(client, pool_id: str, **fields) -> None:
    body = sdk_models.pool(pool_id, nodes=1, slots=2).as_dict()
    body.update(fields)
    client.create_pool(m.BatchPoolCreateOptions(body))


def _node(client, pool_id: str, state: str) -> m.BatchNode:
    return wait_until(
        lambda: next((n for n in client.list_nodes(pool_id) if n.state == state), None), what=f"a {state} node"
    )


IDENTITY = sh('echo "$AZ_BATCH_TASK_USER_IDENTITY $AZ_BATCH_TASK_USER"')


def test_a_task_reads_who_it_runs_as_from_its_environment(batch_client):
    pool_id = _id("users")
    _pool(
        batch_client,
        pool_id,
        userAccounts=[{"name": "builder", "password": "pw", "elevationLevel": "admin"}],
        startTask={
            "commandLine": sh('echo "$AZ_BATCH_TASK_USER_IDENTITY" > "$AZ_BATCH_NODE_SHARED_DIR/start-identity"'),
            "userIdentity": {"autoUser": {"scope": "pool", "elevationLevel": "admin"}},
        },
    )

    def task(task_id: str, identity: m.UserIdentity | None) -> m.BatchTaskCreateOptions:
        return m.BatchTaskCreateOptions(id=task_id, command_line=IDENTITY, user_identity=identity)

    auto = m.AutoUserSpecification
    job_id = _run(
        batch_client,
        pool_id,
        task("default", None),
        task("admin", m.UserIdentity(auto_user=auto(elevation_level="admin"))),
        task("task-admin", m.UserIdentity(auto_user=auto(scope="task", elevation_level="admin"))),
        task("task-plain", m.UserIdentity(auto_user=auto(scope="task"))),
        task("named", m.UserIdentity(username="builder")),
        m.BatchTaskCreateOptions(id="start", command_line=sh('cat "$AZ_BATCH_NODE_SHARED_DIR/start-identity"')),
    )
    outputs = {
        task_id: _stdout(batch_client, job_id, task_id).strip()
        for task_id in ("default", "admin", "task-admin", "task-plain", "named", "start")
    }
    assert outputs == {
        "default": "PoolNonAdmin _azbatch",
        "admin": "PoolAdmin _azbatch",
        "task-admin": "TaskAdmin _azbatch",
        "task-plain": "TaskNonAdmin _azbatch",
        "named": "builder builder",
        "start": "PoolAdmin",
    }
    # The node reports its start task as sent: elevated.
    node = next(iter(batch_client.list_nodes(pool_id)))
    assert node.start_task.user_identity.auto_user.elevation_level == "admin"
    batch_client.begin_delete_pool(pool_id, polling_interval=1).result()


def test_a_task_running_as_a_user_the_pool_lacks_fails_without_retries(batch_client, shared_pool):
    job_id = _run(
        batch_client,
        shared_pool,
        m.BatchTaskCreateOptions(
            id="ghost",
            command_line="true",
            user_identity=m.UserIdentity(username="ghost"),
            constraints=m.BatchTaskConstraints(max_task_retry_count=3),
        ),
    )
    task = batch_client.get_task(job_id, "ghost")
    assert task.execution_info.result == "failure"
    assert task.execution_info.retry_count == 0
    failure = task.execution_info.failure_info
    assert (failure.category, failure.code) == ("usererror", "UserAccountNotFound")
    assert failure.message == "The task runs as user 'ghost', which is not one of the pool's userAccounts."


def test_local_directories_stand_for_nfs_and_file_share_mounts(tmp_path: Path):
    exported = tmp_path / "export"
    exported.mkdir()
    (exported / "genome.fa").write_text(">chr1\nACGT\n")
    share = tmp_path / "share"
    share.mkdir()
    (share / "ref.txt").write_text("reference\n")
    url = "https://corpfiles.file.core.windows.net/refs"
    with run_local_batch_service(extra_args=["--mount-source", f"{url}={share}"]) as service:
        from azure.batch import BatchClient
        from azure.core.credentials import AzureNamedKeyCredential

        client = BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))
        _pool(
            client,
            "mounted",
            mountConfiguration=[
                {"nfsMountConfiguration": {"source": f"localhost:{exported}", "relativeMountPath": "nfs/genomes"}},
                {
                    "azureFileShareConfiguration": {
                        "accountName": "corpfiles",
                        "azureFileUrl": url,
                        "accountKey": "key==",
                        "relativeMountPath": "refs",
                    }
                },
            ],
        )
        job_id = _run(
            client,
            "mounted",
            m.BatchTaskCreateOptions(
                id="read",
                command_line=sh(
                    'cat "$AZ_BATCH_NODE_MOUNTS_DIR/nfs/genomes/genome.fa" "$AZ_BATCH_NODE_MOUNTS_DIR/refs/ref.txt"'
                ),
            ),
        )
        assert _stdout(client, job_id, "read") == ">chr1\nACGT\nreference\n"
        client.close()


def test_a_mount_that_cannot_be_made_leaves_the_node_unusable_saying_why(batch_client):
    pool_id = _id("nomount")
    _pool(
        batch_client,
        pool_id,
        mountConfiguration=[
            {
                "azureBlobFileSystemConfiguration": {
                    "accountName": "corpblobs",
                    "containerName": "datasets",
                    "sasKey": "sv=x",
                    "relativeMountPath": "data",
                }
            }
        ],
        startTask={"commandLine": "true"},
    )
    node = _node(batch_client, pool_id, "unusable")
    assert node.start_task_info is None  # the start task does not run on a node whose mounts failed
    [error] = node.errors
    assert error.code == "MountFailed"
    assert error.message == (
        "No Blob endpoint is known for storage account 'corpblobs': start the local Batch service with "
        "--blob-endpoint corpblobs=<url> (or PUT it to /_emulator/storage)."
    )
    assert [(d.name, d.value) for d in error.error_details] == [
        ("RelativeMountPath", "data"),
        ("Source", "corpblobs/datasets"),
    ]
    batch_client.begin_delete_pool(pool_id, polling_interval=1).result()


@pytest.mark.parametrize("auth", ["accountKey", "sasKey"])
def test_an_azurite_container_is_readable_under_the_mount_root(auth):
    from azure.batch import BatchClient
    from azure.core.credentials import AzureNamedKeyCredential
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    with run_azurite() as endpoint, run_local_batch_service() as service:
        blobs = BlobServiceClient(endpoint, credential={"account_name": ACCOUNT, "account_key": KEY})
        container = blobs.create_container("datasets")
        container.upload_blob("train/part-0.csv", b"a,b\n1,2\n")
        service.set_storage(blob_endpoints={ACCOUNT: endpoint})
        secret = {"accountKey": KEY}
        if auth == "sasKey":
            expiry = datetime(2099, 1, 1)
            perms = ContainerSasPermissions(read=True, list=True)
            secret = {
                "sasKey": generate_container_sas(ACCOUNT, "datasets", account_key=KEY, permission=perms, expiry=expiry)
            }
        client = BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))
        config = {"accountName": ACCOUNT, "containerName": "datasets", "relativeMountPath": "data", **secret}
        _pool(client, "blobs", mountConfiguration=[{"azureBlobFileSystemConfiguration": config}])
        job_id = _run(
            client,
            "blobs",
            m.BatchTaskCreateOptions(
                id="read", command_line=sh('cat "$AZ_BATCH_NODE_MOUNTS_DIR/data/train/part-0.csv"')
            ),
        )
        assert _stdout(client, job_id, "read") == "a,b\n1,2\n"
        # The key never comes back.
        assert "accountKey" not in str(client.get_pool("blobs").as_dict())
        client.close()
        blobs.close()


def _start_order(client, job_ids: list[str]) -> list[str]:
    started = [
        (task.execution_info.start_time, f"{job_id}/{task.id}")
        for job_id in job_ids
        for task in client.list_tasks(job_id)
    ]
    return [name for _, name in sorted(started)]


def test_a_higher_priority_job_overtakes_a_queued_backfill_on_a_full_pool(batch_client):
    pool_id = _id("busy")
    batch_client.create_pool(sdk_models.pool(pool_id, nodes=1, slots=1))
    _node(batch_client, pool_id, "idle")
    backfill = _id("backfill")
    batch_client.create_job(
        m.BatchJobCreateOptions(id=backfill, pool_info=m.BatchPoolInfo(pool_id=pool_id), priority=-100)
    )
    tasks = [m.BatchTaskCreateOptions(id=f"b{i}", command_line="sleep 0.5") for i in range(3)]
    batch_client.create_task_collection(backfill, m.BatchTaskGroup(task_values=tasks))
    wait_until(lambda: batch_client.get_task(backfill, "b0").state == m.BatchTaskState.RUNNING, what="b0 running")
    urgent = _id("urgent")
    batch_client.create_job(
        m.BatchJobCreateOptions(id=urgent, pool_info=m.BatchPoolInfo(pool_id=pool_id), priority=500)
    )
    batch_client.create_task(urgent, m.BatchTaskCreateOptions(id="u0", command_line="true"))
    wait_until(
        lambda: all(
            t.state == m.BatchTaskState.COMPLETED for j in (backfill, urgent) for t in batch_client.list_tasks(j)
        ),
        what="both jobs done",
    )
    assert _start_order(batch_client, [backfill, urgent]) == [
        f"{backfill}/b0",
        f"{urgent}/u0",
        f"{backfill}/b1",
        f"{backfill}/b2",
    ]
    batch_client.begin_delete_pool(pool_id, polling_interval=1).result()


@pytest.mark.parametrize(("order", "expected"), [("none", "abab"), ("creationtime", "aabb")])
def test_equal_priority_jobs_share_the_pool_or_go_by_age(batch_client, order, expected):
    pool_id = _id("order")
    body = sdk_models.pool(pool_id, nodes=1, slots=1).as_dict()
    body["taskSchedulingPolicy"] = {"nodeFillType": "spread", "jobDefaultOrder": order}
    batch_client.create_pool(m.BatchPoolCreateOptions(body))
    _node(batch_client, pool_id, "idle")
    # A blocker holds the only slot while both jobs queue their tasks.
    gate = _id("gate")
    batch_client.create_job(m.BatchJobCreateOptions(id=gate, pool_info=m.BatchPoolInfo(pool_id=pool_id), priority=1))
    batch_client.create_task(gate, m.BatchTaskCreateOptions(id="hold", command_line="sleep 1"))
    wait_until(lambda: batch_client.get_task(gate, "hold").state == m.BatchTaskState.RUNNING, what="blocker running")
    jobs = []
    for name in "ab":
        job_id = f"{name}-{uuid.uuid4().hex[:6]}"
        batch_client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
        batch_client.create_tasks(job_id, [m.BatchTaskCreateOptions(id=f"t{i}", command_line="true") for i in range(2)])
        jobs.append(job_id)
    wait_until(
        lambda: all(t.state == m.BatchTaskState.COMPLETED for j in jobs for t in batch_client.list_tasks(j)),
        what="both jobs done",
    )
    assert "".join(name[0] for name in _start_order(batch_client, jobs)) == expected
    batch_client.begin_delete_pool(pool_id, polling_interval=1).result()
