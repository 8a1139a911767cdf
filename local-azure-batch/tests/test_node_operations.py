"""Every compute node operation the SDK offers, answered by the local service with the status and body the real
service gives (recorded: azure-sdk-assets ``test_batch_compute_nodes``, ``..._compute_node_user``,
``..._compute_node_remote_desktop``, ``..._compute_node_extensions``; the REST reference's examples where nothing
was recorded), through the unmodified SDK, sync and aio. ``uploadbatchservicelogs`` writes the node agent's logs
and the start task's output into an Azurite container."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from azure.batch import BatchClient
from azure.batch import models as m
from azure.batch.aio import BatchClient as AsyncBatchClient
from azure.batch.models import _models as unexported
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import HttpResponseError

from tests import sdk_models
from tests.azurite import run_azurite, writable_container
from tests.helpers import sh, wait_until

# The SDK's node methods -> the REST operation each calls and the status the service answers it with.
NODE_METHODS = {
    "list_nodes": ("Nodes_ListNodes", 200),
    "get_node": ("Nodes_GetNode", 200),
    "list_pool_node_counts": ("Pools_ListPoolNodeCounts", 200),
    "begin_remove_nodes": ("Pools_RemoveNodes", 202),  # recorded
    "begin_reboot_node": ("Nodes_RebootNode", 202),  # recorded
    "begin_reimage_node": ("Nodes_ReimageNode", 202),  # Nodes_NodeReimage.json
    "begin_deallocate_node": ("Nodes_DeallocateNode", 202),
    "begin_start_node": ("Nodes_StartNode", 202),  # Node_StartNode.json
    "disable_node_scheduling": ("Nodes_DisableNodeScheduling", 200),  # recorded
    "enable_node_scheduling": ("Nodes_EnableNodeScheduling", 200),  # recorded
    "get_node_remote_login_settings": ("Nodes_GetNodeRemoteLoginSettings", 200),  # recorded
    "create_node_user": ("Nodes_CreateNodeUser", 201),  # recorded
    "replace_node_user": ("Nodes_ReplaceNodeUser", 200),  # recorded
    "delete_node_user": ("Nodes_DeleteNodeUser", 200),  # recorded
    "list_node_extensions": ("Nodes_ListNodeExtensions", 200),  # recorded
    "get_node_extension": ("Nodes_GetNodeExtension", 200),  # recorded
    "upload_node_logs": ("Nodes_UploadNodeLogs", 200),  # recorded
    "list_node_files": ("Nodes_ListNodeFiles", 200),  # recorded
    "get_node_file_properties": ("Nodes_GetNodeFileProperties", 200),  # recorded
    "download_node_file": ("Nodes_GetNodeFile", 200),  # recorded
    "delete_node_file": ("Nodes_DeleteNodeFile", 200),  # recorded
}
START_TASK = sh("echo preparing the node; echo disk check passed >&2")
EXTENSION = m.VMExtension(
    name="secretext",
    publisher="Microsoft.Azure.KeyVault",
    type="KeyVaultForLinux",
    type_handler_version="1.0",
    auto_upgrade_minor_version=True,
)


def sdk_node_methods(client_class: type) -> set[str]:
    return {
        name
        for name, member in inspect.getmembers(client_class, callable)
        if "node" in name and not name.startswith("_")
    }


def test_every_node_method_of_the_sdk_is_covered_sync_and_aio():
    # A node method a new SDK adds fails this until it is served (and added to NODE_METHODS and the scenario).
    assert sdk_node_methods(BatchClient) == set(NODE_METHODS)
    assert sdk_node_methods(AsyncBatchClient) == set(NODE_METHODS)


@pytest.fixture(scope="module")
def azurite():
    with run_azurite() as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def logs_container(azurite):
    with writable_container(azurite, "node-logs") as made:
        yield made


def _pool(batch_client, pool_id: str, nodes: int = 2) -> list[str]:
    spec = sdk_models.pool(
        pool_id, nodes=nodes, start_task=m.BatchStartTask(command_line=START_TASK, wait_for_success=True)
    )
    config = sdk_models.UBUNTU.as_dict()
    config["extensions"] = [EXTENSION.as_dict()]
    spec.virtual_machine_configuration = m.VirtualMachineConfiguration(config)
    batch_client.create_pool(spec)
    wait_until(
        lambda: [n for n in batch_client.list_nodes(pool_id) if n.state == m.BatchNodeState.IDLE][nodes - 1 :],
        what="idle nodes",
    )
    return sorted(node.id for node in batch_client.list_nodes(pool_id))


def _state(batch_client, pool_id: str, node_id: str) -> str:
    return batch_client.get_node(pool_id, node_id).state.value


def _error(call) -> HttpResponseError:
    with pytest.raises(HttpResponseError) as caught:
        call()
    return caught.value


def test_every_node_operation_answers_as_the_service_does(batch_client, local_batch_service, logs_container):
    pool_id = f"nodes-{uuid.uuid4().hex[:6]}"
    first, second = _pool(batch_client, pool_id)
    local_batch_service.clear_request_log()
    called: set[str] = set()

    def call(method: str, *args, **kwargs):
        called.add(method)
        return getattr(batch_client, method)(*args, **kwargs)

    # Reading nodes.
    assert {node.id for node in call("list_nodes", pool_id)} == {first, second}
    node = call("get_node", pool_id, first)
    assert (node.state, node.scheduling_state) == (m.BatchNodeState.IDLE, m.SchedulingState.ENABLED)
    counts = {c.pool_id: c for c in call("list_pool_node_counts")}
    assert counts[pool_id].dedicated.idle == 2

    # Users: made, replaced, deleted; a second of the same name and an unknown one are refused.
    call(
        "create_node_user",
        pool_id,
        first,
        m.BatchNodeUserCreateOptions(name="support", password="S3cret!", is_admin=True),
    )
    assert (
        _error(
            lambda: batch_client.create_node_user(
                pool_id, first, m.BatchNodeUserCreateOptions(name="SUPPORT", password="x")
            )
        ).error.code
        == "NodeUserExists"
    )
    call(
        "replace_node_user",
        pool_id,
        first,
        "support",
        m.BatchNodeUserReplaceOptions(ssh_public_key="ssh-rsa AAAA test"),
    )
    call("delete_node_user", pool_id, first, "support")
    missing = _error(lambda: batch_client.delete_node_user(pool_id, first, "support"))
    assert (missing.status_code, missing.error.code) == (404, "NodeUserNotFound")

    # Remote login: where SSH would answer, the node's own address.
    login = call("get_node_remote_login_settings", pool_id, first)
    assert (login.remote_login_ip_address, login.remote_login_port) == (node.ip_address, 22)

    # The pool's VM extensions, provisioned on the booted node, and the one the service installs its agent with
    # (recorded beside the pool's own: batchNodeExtension).
    extension, agent = call("list_node_extensions", pool_id, first)
    assert (extension.provisioning_state, extension.vm_extension.name) == ("Succeeded", "secretext")
    assert (agent.vm_extension.name, agent.vm_extension.type) == ("batchNodeExtension", "CustomScript")
    assert call("get_node_extension", pool_id, first, "batchNodeExtension").provisioning_state == "Succeeded"
    assert call("get_node_extension", pool_id, first, "secretext").instance_view.statuses[0].code == (
        "ProvisioningState/succeeded"
    )
    assert _error(lambda: batch_client.get_node_extension(pool_id, first, "nope")).status_code == 404

    # Scheduling off: the node is offline, the pool's other node runs the work; on again: idle.
    call(
        "disable_node_scheduling",
        pool_id,
        first,
        m.BatchNodeDisableSchedulingOptions(node_disable_scheduling_option="taskcompletion"),
    )
    node = batch_client.get_node(pool_id, first)
    assert (node.state, node.scheduling_state) == (m.BatchNodeState.OFFLINE, m.SchedulingState.DISABLED)
    # (SDK 15.1 quirk: with no option, or an empty options model, it fails before sending: content type None.)
    requeue = m.BatchNodeDisableSchedulingOptions(node_disable_scheduling_option="requeue")
    again = _error(lambda: batch_client.disable_node_scheduling(pool_id, first, requeue))
    assert (again.status_code, again.error.code) == (409, "NodeAlreadyInTargetSchedulingState")
    job_id = f"{pool_id}-job"
    batch_client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
    batch_client.create_task_collection(
        job_id,
        m.BatchTaskGroup(task_values=[m.BatchTaskCreateOptions(id=f"t{i}", command_line="true") for i in range(4)]),
    )
    wait_until(lambda: batch_client.get_job_task_counts(job_id).task_counts.completed == 4, what="tasks done")
    assert {t.node_info.node_id for t in batch_client.list_tasks(job_id)} == {second}
    call("enable_node_scheduling", pool_id, first)
    assert _state(batch_client, pool_id, first) == "idle"

    # Node files: the start task's output.
    names = {f.name for f in call("list_node_files", pool_id, first, recursive=True)}
    assert {"startup/stdout.txt", "startup/stderr.txt"} <= names
    assert call("get_node_file_properties", pool_id, first, "startup/stderr.txt").content_length > 0
    assert b"".join(call("download_node_file", pool_id, first, "startup/stdout.txt")) == b"preparing the node\n"

    # The node agent's logs and the start task's output, uploaded to the container.
    container, url = logs_container
    since = datetime.now(timezone.utc) - timedelta(hours=1)
    result = call(
        "upload_node_logs", pool_id, first, m.UploadBatchServiceLogsOptions(container_url=url, start_time=since)
    )
    head, pool_part, node_part, _request_id = result.virtual_directory_name.split("/")
    assert head.startswith("batch-")
    assert (pool_part, node_part) == (pool_id, first)
    assert result.number_of_files_uploaded == 3
    uploaded = wait_until(
        lambda: (
            (b := {blob.name for blob in container.list_blobs(name_starts_with=result.virtual_directory_name)})
            and len(b) == 3
            and b
        ),
        what="the uploaded logs",
    )
    prefix = result.virtual_directory_name + "/"
    assert uploaded == {prefix + "agent.log", prefix + "startup/stdout.txt", prefix + "startup/stderr.txt"}
    agent = container.download_blob(prefix + "agent.log").readall().decode()
    for line in (
        "node state starting -> waitingforstarttask",
        "start task exited with code 0",
        "task scheduling disabled",
        "user support created (admin)",
    ):
        assert line in agent, line
    assert container.download_blob(prefix + "startup/stderr.txt").readall() == b"disk check passed\n"
    # Nothing written after the window's end is uploaded: a window before the node existed has nothing.
    before = m.UploadBatchServiceLogsOptions(container_url=url, start_time=since - timedelta(hours=2), end_time=since)
    assert batch_client.upload_node_logs(pool_id, first, before).number_of_files_uploaded == 0
    bad = _error(
        lambda: batch_client.upload_node_logs(
            pool_id, first, m.UploadBatchServiceLogsOptions(container_url="not a url", start_time=since)
        )
    )
    assert (bad.status_code, bad.error.code) == (400, "InvalidPropertyValue")
    call("delete_node_file", pool_id, first, "startup/stdout.txt")

    # Reboot: the node comes back (its start task runs again); a second reboot meanwhile is refused.
    booted = batch_client.get_node(pool_id, first).last_boot_time
    # SDK 15.1: without an options model (not exported for these) they fail before sending (content type None).
    reboot = unexported.BatchNodeRebootOptions(node_reboot_kind="requeue")
    poller = call("begin_reboot_node", pool_id, first, reboot, polling_interval=1)
    busy = _error(lambda: batch_client.begin_reboot_node(pool_id, first, reboot))
    assert (busy.status_code, busy.error.code) == (409, "NodeBeingRebooted")
    poller.result()
    wait_until(lambda: _state(batch_client, pool_id, first) == "idle", what="rebooted node idle")
    assert batch_client.get_node(pool_id, first).last_boot_time > booted
    assert b"".join(batch_client.download_node_file(pool_id, first, "startup/stdout.txt")) == b"preparing the node\n"

    # Reimage: a fresh disk (the users go), the start task again.
    batch_client.create_node_user(pool_id, first, m.BatchNodeUserCreateOptions(name="gone", password="x"))
    reimage = unexported.BatchNodeReimageOptions(node_reimage_option="terminate")
    call("begin_reimage_node", pool_id, first, reimage, polling_interval=1).result()
    wait_until(lambda: _state(batch_client, pool_id, first) == "idle", what="reimaged node idle")
    batch_client.create_node_user(pool_id, first, m.BatchNodeUserCreateOptions(name="gone", password="x"))

    # Deallocate, then start again; a start of a node that runs is refused.
    refused = _error(lambda: batch_client.begin_start_node(pool_id, first))
    assert (refused.status_code, refused.error.code) == (409, "OperationInvalidForCurrentState")
    deallocate = unexported.BatchNodeDeallocateOptions(node_deallocate_option="requeue")
    call("begin_deallocate_node", pool_id, first, deallocate, polling_interval=1).result()
    assert _state(batch_client, pool_id, first) == "deallocated"
    call("begin_start_node", pool_id, first, polling_interval=1).result()
    wait_until(lambda: _state(batch_client, pool_id, first) == "idle", what="started node idle")

    # Remove one node: the pool shrinks to the other.
    call("begin_remove_nodes", pool_id, m.BatchNodeRemoveOptions(node_ids=[first]), polling_interval=1).result()
    assert [n.id for n in batch_client.list_nodes(pool_id)] == [second]

    assert called == set(NODE_METHODS)
    served = {(r["operation"], r["status"]) for r in local_batch_service.request_log()}
    for method, (operation, status) in NODE_METHODS.items():
        assert (operation, status) in served, f"{method}: {operation} was not answered {status}"
    batch_client.begin_delete_pool(pool_id, polling_interval=1).result()


def test_the_aio_client_reboots_and_uploads_too(batch_client, local_batch_service, logs_container):
    pool_id = f"aio-nodes-{uuid.uuid4().hex[:6]}"
    (node_id,) = _pool(batch_client, pool_id, nodes=1)
    container, url = logs_container

    async def scenario() -> m.UploadBatchServiceLogsResult:
        credential = AzureNamedKeyCredential(local_batch_service.account_name, local_batch_service.account_key)
        async with AsyncBatchClient(local_batch_service.url, credential) as client:
            reboot = unexported.BatchNodeRebootOptions(node_reboot_kind="requeue")
            await (await client.begin_reboot_node(pool_id, node_id, reboot, polling_interval=1)).result()
            options = m.UploadBatchServiceLogsOptions(
                container_url=url, start_time=datetime.now(timezone.utc) - timedelta(minutes=5)
            )
            return await client.upload_node_logs(pool_id, node_id, options)

    result = asyncio.run(scenario())
    assert result.number_of_files_uploaded == 3
    wait_until(
        lambda: len(list(container.list_blobs(name_starts_with=result.virtual_directory_name))) == 3,
        what="the uploaded logs",
    )
    agent = container.download_blob(f"{result.virtual_directory_name}/agent.log").readall().decode()
    assert "reboot requested (nodeRebootOption requeue)" in agent
    assert agent.count("start task exited with code 0") == 2
    batch_client.begin_delete_pool(pool_id, polling_interval=1).result()
