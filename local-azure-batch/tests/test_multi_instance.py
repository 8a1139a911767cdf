"""Multi-instance tasks: coordination on every node, then the application on the primary only."""

from __future__ import annotations

import ipaddress
import os
import shlex
import sys
import textwrap
import uuid

import pytest
from azure.batch import models as m
from azure.core.exceptions import HttpResponseError

from tests import sdk_models
from tests.helpers import sh, wait_until

# Each instance reports its AZ_BATCH_* variables, then when its coordination ended (ns); the pause lets
# a primary that did not wait for the other node start its application before that node's end.
COORDINATION = "env | grep -E '^(AZ_BATCH_|CCP_)' | sed 's/^/coord /'; sleep 0.3; echo coord-end $(date +%s%N)"
APPLICATION = "echo app-start $(date +%s%N); env | grep -E '^(AZ_BATCH_|CCP_)' | sed 's/^/app /'"


@pytest.fixture
def mpi_pool(batch_client):
    """A pool multi-instance tasks run on: inter-node communication, one slot per node."""
    pool_id = f"mpi-{uuid.uuid4().hex[:8]}"
    yield _create_pool(batch_client, pool_id, nodes=2)
    batch_client.begin_delete_pool(pool_id, polling_interval=1).result()


def _create_pool(client, pool_id, nodes):
    client.create_pool(sdk_models.pool(pool_id, nodes=nodes, slots=1, enable_inter_node_communication=True))
    _wait_idle(client, pool_id, nodes)
    return pool_id


def _wait_idle(client, pool_id, count):
    wait_until(
        lambda: sum(1 for node in client.list_nodes(pool_id) if node.state == m.BatchNodeState.IDLE) == count,
        what=f"{count} idle nodes",
    )


def _job(client, pool_id):
    job_id = f"mi-{uuid.uuid4().hex[:8]}"
    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
    return job_id


def _multi_instance_task(task_id, instances, coordination, application, **extra):
    return m.BatchTaskCreateOptions(
        id=task_id,
        command_line=sh(application),
        multi_instance_settings=m.MultiInstanceSettings(
            number_of_instances=instances, coordination_command_line=sh(coordination)
        ),
        **extra,
    )


def _completed(client, job_id, task_id):
    task = client.get_task(job_id, task_id)
    return task.state == m.BatchTaskState.COMPLETED and task


def _lines(chunks, prefix):
    text = b"".join(chunks).decode()
    return dict(line[len(prefix) :].split("=", 1) for line in text.splitlines() if line.startswith(prefix))


def _stamp(chunks, label):
    return next(int(line.split()[1]) for line in b"".join(chunks).decode().splitlines() if line.startswith(label))


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_coordination_on_every_node_then_the_application_on_the_primary(batch_client, mpi_pool):
    client = batch_client
    job_id = _job(client, mpi_pool)
    client.create_task(job_id, _multi_instance_task("mpi", 2, COORDINATION, APPLICATION))
    task = wait_until(lambda: _completed(client, job_id, "mpi"), what="multi-instance task")
    assert task.execution_info.result == m.BatchTaskExecutionResult.SUCCESS
    assert task.execution_info.exit_code == 0

    nodes = {node.id: node for node in client.list_nodes(mpi_pool)}
    primary = nodes[task.node_info.node_id]
    (other,) = (node for node in nodes.values() if node.id != primary.id)
    hosts = [primary.ip_address, other.ip_address]

    [subtask] = list(client.list_subtasks(job_id, "mpi"))
    assert (subtask.id, subtask.node_info.node_id, subtask.node_info.pool_id) == (1, other.id, mpi_pool)
    assert (subtask.exit_code, subtask.state, subtask.result) == (
        0,
        m.BatchSubtaskState.COMPLETED,
        m.BatchTaskExecutionResult.SUCCESS,
    )
    assert subtask.previous_state == m.BatchSubtaskState.RUNNING
    assert subtask.start_time <= subtask.end_time
    assert subtask.node_info.task_root_directory == f"workitems/{job_id}/job-1/mpi/1"
    assert subtask.node_info.task_root_directory_url.endswith(f"/nodes/{other.id}/files/workitems/{job_id}/job-1/mpi/1")

    primary_out = list(client.download_task_file(job_id, "mpi", "stdout.txt"))
    other_out = list(
        client.download_node_file(mpi_pool, other.id, f"{subtask.node_info.task_root_directory}/stdout.txt")
    )
    on_primary, on_other = _lines(primary_out, "coord "), _lines(other_out, "coord ")
    for env in (on_primary, on_other):
        assert env["AZ_BATCH_HOST_LIST"] == ",".join(hosts)
        assert env["AZ_BATCH_NODE_LIST"] == ";".join(hosts)
        assert env["AZ_BATCH_MASTER_NODE"] == f"{primary.ip_address}:6000"
        assert env["CCP_NODES"] == f"2 {primary.ip_address} 1 {other.ip_address} 1"
        assert env["AZ_BATCH_TASK_ID"] == "mpi"
        assert env["AZ_BATCH_JOB_ID"] == job_id
    assert (on_primary["AZ_BATCH_IS_CURRENT_NODE_MASTER"], on_other["AZ_BATCH_IS_CURRENT_NODE_MASTER"]) == (
        "true",
        "false",
    )
    assert (on_primary["AZ_BATCH_NODE_ID"], on_other["AZ_BATCH_NODE_ID"]) == (primary.id, other.id)
    # The shared directory is the task directory on each node; a subtask's own files are below it.
    assert on_primary["AZ_BATCH_TASK_SHARED_DIR"] == on_primary["AZ_BATCH_TASK_DIR"]
    assert on_other["AZ_BATCH_TASK_DIR"] == on_other["AZ_BATCH_TASK_SHARED_DIR"] + "/1"

    # The application ran on the primary only, after the coordination command ended on both nodes.
    application = _lines(primary_out, "app ")
    assert application["AZ_BATCH_IS_CURRENT_NODE_MASTER"] == "true"
    assert application["AZ_BATCH_HOST_LIST"] == ",".join(hosts)
    assert _lines(other_out, "app ") == {}
    started = _stamp(primary_out, "app-start")
    assert _stamp(primary_out, "coord-end") < started
    assert _stamp(other_out, "coord-end") < started

    recent = client.get_node(mpi_pool, other.id).recent_tasks[-1]
    assert (recent.task_id, recent.subtask_id) == ("mpi", 1)
    assert client.get_node(mpi_pool, primary.id).recent_tasks[-1].subtask_id == 0
    counts = client.get_job_task_counts(job_id)
    assert (counts.task_counts.succeeded, counts.task_slot_counts.succeeded) == (1, 1)
    client.begin_delete_job(job_id, polling_interval=1).result()


# The master listens on its node's address (AZ_BATCH_MASTER_NODE's host) and the other node connects to it from
# its own address; the master prints whom it heard from where. The port is a free one the master picked.
MEET = textwrap.dedent(
    """
    import os, pathlib, socket, sys, time
    port_file = pathlib.Path(sys.argv[1])
    master = os.environ["AZ_BATCH_MASTER_NODE"].rsplit(":", 1)[0]
    if os.environ["AZ_BATCH_IS_CURRENT_NODE_MASTER"] == "true":
        with socket.create_server((master, 0)) as server:
            server.settimeout(30)
            port_file.with_suffix(".tmp").write_text(str(server.getsockname()[1]))
            port_file.with_suffix(".tmp").rename(port_file)
            peer, (address, _) = server.accept()
            with peer:
                print(f"{server.getsockname()[0]} heard {peer.recv(200).decode()} from {address}")
    else:
        (own,) = (host for host in os.environ["AZ_BATCH_HOST_LIST"].split(",") if host != master)
        deadline = time.monotonic() + 30
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        port = int(port_file.read_text())
        with socket.create_connection((master, port), timeout=30, source_address=(own, 0)) as client:
            client.sendall(os.environ["AZ_BATCH_NODE_ID"].encode())
    """
)


def test_each_node_has_its_own_loopback_address_and_reaches_the_others_on_it(batch_client, mpi_pool, tmp_path):
    client = batch_client
    addresses = [ipaddress.ip_address(node.ip_address) for node in client.list_nodes(mpi_pool)]
    assert len(set(addresses)) == 2
    assert all(address.is_loopback and address != ipaddress.ip_address("127.0.0.1") for address in addresses)
    script = tmp_path / "meet.py"
    script.write_text(MEET)
    job_id = _job(client, mpi_pool)
    coordination = shlex.join([sys.executable, str(script), str(tmp_path / "port")])
    task = m.BatchTaskCreateOptions(
        id="meet",
        command_line="true",
        multi_instance_settings=m.MultiInstanceSettings(number_of_instances=2, coordination_command_line=coordination),
    )
    client.create_task(job_id, task)
    task = wait_until(lambda: _completed(client, job_id, "meet"), what="multi-instance task")
    assert task.execution_info.exit_code == 0
    nodes = {node.id: node for node in client.list_nodes(mpi_pool)}
    primary = nodes.pop(task.node_info.node_id)
    (other,) = nodes.values()
    stdout = b"".join(client.download_task_file(job_id, "meet", "stdout.txt")).decode()
    assert stdout == f"{primary.ip_address} heard {other.id} from {other.ip_address}\n"
    client.begin_delete_job(job_id, polling_interval=1).result()


@pytest.mark.serial
def test_a_failing_coordination_command_fails_the_task_and_ends_the_others(batch_client, mpi_pool, tmp_path):
    client = batch_client
    job_id = _job(client, mpi_pool)
    marker = tmp_path / "application-ran"
    coordination = '[ "$AZ_BATCH_IS_CURRENT_NODE_MASTER" = true ] && exec sleep 60; exit 3'
    client.create_task(
        job_id,
        _multi_instance_task(
            "broken", 2, coordination, f"touch {marker}", constraints=m.BatchTaskConstraints(max_task_retry_count=1)
        ),
    )
    task = wait_until(lambda: _completed(client, job_id, "broken"), what="failed multi-instance task")
    info = task.execution_info
    assert info.result == m.BatchTaskExecutionResult.FAILURE
    assert info.retry_count == 1  # retried once, like a failed command line
    assert info.failure_info.category == m.BatchErrorSourceCategory.USER_ERROR
    assert info.failure_info.code == "CoordinationCommandFailed"
    details = {item.name: item.value for item in info.failure_info.details}
    [subtask] = list(client.list_subtasks(job_id, "broken"))
    assert details == {"SubtaskId": "1", "NodeId": subtask.node_info.node_id, "ExitCode": "3"}
    assert (subtask.exit_code, subtask.result) == (3, m.BatchTaskExecutionResult.FAILURE)
    assert subtask.failure_info.code == "FailureExitCode"
    # The primary's 60 s coordination command was killed, and the application never ran.
    assert (info.end_time - info.start_time).total_seconds() < 10
    assert not marker.exists()
    client.begin_delete_job(job_id, polling_interval=1).result()


def test_terminate_kills_every_instance_and_what_coordination_left_running(batch_client, mpi_pool, tmp_path):
    client = batch_client
    job_id = _job(client, mpi_pool)
    # Each coordination command leaves a background service behind, as an MPI daemon would.
    coordination = f"sleep 60 & echo $! > {tmp_path}/service-$AZ_BATCH_NODE_ID.pid"
    application = f"echo $$ > {tmp_path}/app.tmp; mv {tmp_path}/app.tmp {tmp_path}/app.pid; exec sleep 60"
    client.create_task(job_id, _multi_instance_task("long", 2, coordination, application))
    wait_until(lambda: (tmp_path / "app.pid").exists(), what="application running")
    pids = [int(path.read_text()) for path in tmp_path.glob("*.pid")]
    assert len(pids) == 3
    assert all(_alive(pid) for pid in pids)
    client.terminate_task(job_id, "long")
    task = wait_until(lambda: _completed(client, job_id, "long"), what="terminated task")
    assert task.execution_info.failure_info.code == "TaskEnded"
    wait_until(lambda: not any(_alive(pid) for pid in pids), what="every process gone")
    [subtask] = list(client.list_subtasks(job_id, "long"))
    assert subtask.state == m.BatchSubtaskState.COMPLETED
    assert all(node.running_tasks_count == 0 for node in client.list_nodes(mpi_pool))
    client.begin_delete_job(job_id, polling_interval=1).result()


def test_waits_active_until_the_pool_has_a_node_for_every_instance(batch_client, mpi_pool):
    client = batch_client
    job_id = _job(client, mpi_pool)
    client.create_task(job_id, _multi_instance_task("three", 3, "true", "echo done"))
    # A task of another job runs meanwhile: the scheduler has looked at the pool and left "three" waiting.
    other_job = _job(client, mpi_pool)
    client.create_task(other_job, m.BatchTaskCreateOptions(id="single", command_line="true"))
    wait_until(lambda: _completed(client, other_job, "single"), what="a single-node task")
    assert client.get_task(job_id, "three").state == m.BatchTaskState.ACTIVE
    client.begin_resize_pool(mpi_pool, m.BatchPoolResizeOptions(target_dedicated_nodes=3), polling_interval=1).result()
    task = wait_until(lambda: _completed(client, job_id, "three"), what="task on three nodes")
    assert task.execution_info.result == m.BatchTaskExecutionResult.SUCCESS
    subtasks = list(client.list_subtasks(job_id, "three"))
    assert [subtask.id for subtask in subtasks] == [1, 2]
    used = {task.node_info.node_id, *(subtask.node_info.node_id for subtask in subtasks)}
    assert used == {node.id for node in client.list_nodes(mpi_pool)}
    client.begin_delete_job(job_id, polling_interval=1).result()
    client.begin_delete_job(other_job, polling_interval=1).result()


def test_never_scheduled_without_inter_node_communication_and_holds_up_nothing(batch_client, shared_pool):
    client = batch_client
    job_id = _job(client, shared_pool)
    client.create_task(job_id, _multi_instance_task("stuck", 2, "true", "true"))
    client.create_task(job_id, m.BatchTaskCreateOptions(id="after", command_line="true"))
    wait_until(lambda: _completed(client, job_id, "after"), what="the task added after it")
    assert client.get_task(job_id, "stuck").state == m.BatchTaskState.ACTIVE
    assert list(client.list_subtasks(job_id, "stuck")) == []
    client.begin_delete_job(job_id, polling_interval=1).result()


def test_a_coordination_command_line_is_required(batch_client, shared_pool):
    job_id = _job(batch_client, shared_pool)
    task = m.BatchTaskCreateOptions(
        id="no-coordination",
        command_line="true",
        multi_instance_settings=m.MultiInstanceSettings({"numberOfInstances": 2}),
    )
    with pytest.raises(HttpResponseError) as caught:
        batch_client.create_task(job_id, task)
    assert caught.value.status_code == 400
    assert caught.value.error.code == "MissingRequiredProperty"
    batch_client.begin_delete_job(job_id, polling_interval=1).result()
