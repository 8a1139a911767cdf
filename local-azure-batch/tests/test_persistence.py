"""``--state-dir``: pools, jobs, tasks and the nodes' files survive a restart of the service; what was running is
requeued, as Batch requeues the tasks of a node that restarts."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from azure.batch import BatchClient
from azure.batch import models as m
from azure.core.credentials import AzureNamedKeyCredential

from local_azure_batch.model.persistence import SCHEMA_VERSION, STATE_FILE
from local_azure_batch.testing import LocalBatchService, run_local_batch_service
from tests import sdk_models
from tests.helpers import sh, wait_until

FORMULA = "$TargetDedicatedNodes = 1;"


def _client(service: LocalBatchService) -> BatchClient:
    return BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))


def _state_args(state_dir: Path) -> list[str]:
    return ["--state-dir", str(state_dir), "--autoscale-interval", "1"]


def _stdout(client: BatchClient, job_id: str, task_id: str) -> bytes:
    return b"".join(client.download_task_file(job_id, task_id, "stdout.txt"))


def _task_record(task: m.BatchTask) -> tuple[object, ...]:
    info = task.execution_info
    assert info is not None
    assert task.node_info is not None
    failure = info.failure_info.code if info.failure_info is not None else None
    return (
        task.state,
        task.state_transition_time,
        task.creation_time,
        info.result,
        info.exit_code,
        failure,
        info.start_time,
        info.end_time,
        info.retry_count,
        task.node_info.node_id,
        task.node_info.task_root_directory,
    )


def _subtasks(client: BatchClient) -> list[tuple[object, ...]]:
    return [
        (sub.id, sub.state, sub.exit_code, sub.result, sub.start_time, sub.end_time, sub.node_info.node_id)
        for sub in client.list_subtasks("multi", "t")
    ]


def _job_record(job: m.BatchJob) -> tuple[object, ...]:
    assert job.execution_info is not None
    return (job.id, job.state, job.creation_time, job.execution_info.start_time, job.execution_info.end_time)


def test_pools_jobs_tasks_and_their_files_survive_a_restart_and_running_tasks_are_requeued(tmp_path):
    state_dir = tmp_path / "state"
    with run_local_batch_service(extra_args=_state_args(state_dir)) as service:
        client = _client(service)
        # Its start task, which tasks do not wait for, is still running when the service stops.
        start_task = m.BatchStartTask(command_line=sh("sleep 300"), wait_for_success=False)
        client.create_pool(sdk_models.pool("keep", nodes=1, slots=2, start_task=start_task))
        client.create_pool(
            sdk_models.pool(
                "scaled",
                nodes=None,
                enable_auto_scale=True,
                auto_scale_formula=FORMULA,
                auto_scale_evaluation_interval="PT5M",
            )
        )
        client.create_pool(sdk_models.pool("mpi", nodes=2, slots=1, enable_inter_node_communication=True))
        wait_until(lambda: [n.state for n in client.list_nodes("keep")] == ["idle"], what="an idle node")
        wait_until(lambda: [n.state for n in client.list_nodes("mpi")] == ["idle", "idle"], what="two idle nodes")
        client.create_job(m.BatchJobCreateOptions(id="multi", pool_info=m.BatchPoolInfo(pool_id="mpi")))
        client.create_task(
            "multi",
            m.BatchTaskCreateOptions(
                id="t",
                command_line=sh("echo application"),
                multi_instance_settings=m.MultiInstanceSettings(
                    number_of_instances=2, coordination_command_line=sh("echo coordination")
                ),
            ),
        )
        for job_id, script in (("done", "echo persisted output"), ("broken", "echo about to fail >&2; exit 3")):
            client.create_job(
                m.BatchJobCreateOptions(
                    id=job_id,
                    pool_info=m.BatchPoolInfo(pool_id="keep"),
                    all_tasks_complete_mode=m.BatchAllTasksCompleteMode.TERMINATE_JOB,
                )
            )
            client.create_task(job_id, m.BatchTaskCreateOptions(id="t", command_line=sh(script)))
        client.create_job(m.BatchJobCreateOptions(id="busy", pool_info=m.BatchPoolInfo(pool_id="keep")))
        wait_until(
            lambda: all(client.get_job(job_id).state == "completed" for job_id in ("done", "broken")),
            what="two completed jobs",
        )
        wait_until(lambda: client.get_task("multi", "t").state == "completed", what="the multi-instance task")
        client.create_task("busy", m.BatchTaskCreateOptions(id="slow", command_line=sh("echo started; sleep 300")))
        wait_until(lambda: _stdout(client, "busy", "slow") == b"started\n", what="the slow task running")
        wait_until(lambda: client.get_pool("scaled").auto_scale_run is not None, what="a first autoscale run")

        pool_before = client.get_pool("keep")
        node_before = next(iter(client.list_nodes("keep")))
        assert node_before.start_task_info.state == "running"
        jobs_before = [_job_record(job) for job in client.list_jobs()]
        tasks_before = {job_id: _task_record(client.get_task(job_id, "t")) for job_id in ("done", "broken", "multi")}
        subtasks_before = _subtasks(client)
        failure_before = client.get_task("broken", "t").execution_info.failure_info
        files_before = {job_id: _stdout(client, job_id, "t") for job_id in ("done", "broken")}
        stderr_before = b"".join(client.download_task_file("broken", "t", "stderr.txt"))
        slow_before = client.get_task("busy", "slow")
        autoscale_before = client.get_pool("scaled").auto_scale_run.timestamp
    assert service.process.returncode == 0
    saved = json.loads((state_dir / STATE_FILE).read_text())
    assert saved["schemaVersion"] == SCHEMA_VERSION

    with run_local_batch_service(extra_args=_state_args(state_dir)) as service:
        client = _client(service)
        pool = client.get_pool("keep")
        assert (pool.state, pool.creation_time, pool.etag, pool.current_dedicated_nodes) == (
            pool_before.state,
            pool_before.creation_time,
            pool_before.etag,
            1,
        )
        assert sorted(p.id for p in client.list_pools()) == ["keep", "mpi", "scaled"]
        assert [node.id for node in client.list_nodes("keep")] == [node_before.id]
        assert [_job_record(job) for job in client.list_jobs()] == jobs_before
        assert {
            job_id: _task_record(client.get_task(job_id, "t")) for job_id in ("done", "broken", "multi")
        } == tasks_before
        assert _subtasks(client) == subtasks_before
        assert len(subtasks_before) == 1
        broken = client.get_task("broken", "t").execution_info
        assert (broken.result, broken.exit_code, broken.failure_info.code, broken.failure_info.message) == (
            "failure",
            3,
            failure_before.code,
            failure_before.message,
        )
        assert client.get_job_task_counts("done").task_counts.succeeded == 1
        assert client.get_job_task_counts("broken").task_counts.failed == 1
        assert {job_id: _stdout(client, job_id, "t") for job_id in ("done", "broken")} == files_before
        assert files_before["done"] == b"persisted output\n"
        assert b"".join(client.download_task_file("broken", "t", "stderr.txt")) == stderr_before

        # The task that was running was requeued (not retried) and runs again on the node that came back.
        slow = client.get_task("busy", "slow")
        assert (slow.execution_info.requeue_count, slow.execution_info.retry_count) == (1, 0)
        assert slow.execution_info.last_requeue_time is not None
        assert slow.creation_time == slow_before.creation_time
        wait_until(lambda: client.get_task("busy", "slow").state == "running", what="the requeued task running again")
        assert client.get_task("busy", "slow").node_info.node_id == node_before.id
        assert client.get_node("keep", node_before.id).total_tasks_run == node_before.total_tasks_run + 1

        # The start task that was cut short runs again, as after a reboot.
        wait_until(
            lambda: (
                client.get_node("keep", node_before.id).start_task_info.start_time
                > node_before.start_task_info.start_time
            ),
            what="the start task running again",
        )
        assert client.get_node("keep", node_before.id).start_task_info.state == "running"

        # Autoscale goes on evaluating.
        wait_until(
            lambda: client.get_pool("scaled").auto_scale_run.timestamp > autoscale_before,
            what="an autoscale run after the restart",
        )


def test_a_killed_service_keeps_what_it_saved_last(tmp_path):
    state_dir = tmp_path / "state"
    with run_local_batch_service(extra_args=_state_args(state_dir)) as service:
        client = _client(service)
        client.create_job(m.BatchJobCreateOptions(id="saved", pool_info=m.BatchPoolInfo(pool_id="nowhere")))
        wait_until(
            lambda: (state_dir / STATE_FILE).is_file() and '"saved"' in (state_dir / STATE_FILE).read_text(),
            what="the job in the state file",
        )
        service.process.send_signal(signal.SIGKILL)
        service.process.wait()
    # What a service killed in the middle of a save leaves: a temporary file, never a half-written state file.
    leftover = state_dir / f".{STATE_FILE}.k1ll3d"
    leftover.write_text('{"format": "local-azure-b')
    with run_local_batch_service(extra_args=_state_args(state_dir)) as service:
        assert [job.id for job in _client(service).list_jobs()] == ["saved"]
    assert not leftover.exists()


def _refused(state_dir: Path, text: str) -> str:
    """Start the service on a state file holding ``text``: what it says as it refuses to start."""
    state_file = state_dir / STATE_FILE
    state_file.write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "local_azure_batch", "--quiet", "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert state_file.read_text() == text, "the file is left as it was"
    return result.stderr.strip()


def test_a_state_file_of_an_unknown_schema_version_is_refused(tmp_path):
    text = json.dumps({"format": "local-azure-batch state", "schemaVersion": 99, "pools": [], "jobs": []})
    assert _refused(tmp_path, text) == (
        f"cannot start the local Batch service: {tmp_path / STATE_FILE} has state schema version 99; this local "
        f"Batch service reads version {SCHEMA_VERSION} only. Start the version that wrote it, or move the file away "
        "to start empty."
    )


def test_a_damaged_state_file_is_refused(tmp_path):
    text = json.dumps({"format": "local-azure-batch state", "schemaVersion": SCHEMA_VERSION, "pools": []})
    assert _refused(tmp_path, text) == (
        f"cannot start the local Batch service: {tmp_path / STATE_FILE} has schema version {SCHEMA_VERSION} but "
        "cannot be loaded (KeyError: 'jobs'): it was changed by hand or damaged; move it away to start empty"
    )


def test_without_a_state_dir_nothing_is_written(tmp_path):
    root = tmp_path / "root"
    with run_local_batch_service(task_root=root, extra_args=["--keep"]) as service:
        client = _client(service)
        client.create_job(m.BatchJobCreateOptions(id="ephemeral", pool_info=m.BatchPoolInfo(pool_id="nowhere")))
    assert service.process.returncode == 0
    assert [path.name for path in tmp_path.rglob("*") if "state" in path.name] == []
    with run_local_batch_service() as service:
        assert list(_client(service).list_jobs()) == []
