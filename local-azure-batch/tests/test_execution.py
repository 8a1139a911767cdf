"""Task execution semantics: slots really limit concurrency, wall clock kills, retries re-run."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from azure.batch import models as m

from tests import sdk_models
from tests.helpers import sh, wait_until

# Each task records when it started and ended (nanoseconds) on its stdout.
TIMED = sh("echo start $(date +%s%N); sleep 0.4; echo end $(date +%s%N)")


def _job(client, pool_info, **extra):
    job_id = f"exec-{uuid.uuid4().hex[:8]}"
    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=pool_info, **extra))
    return job_id


def _completed(client, job_id, count):
    counts = client.get_job_task_counts(job_id).task_counts
    return counts.completed == count and counts


def test_two_nodes_with_two_slots_never_run_more_than_four_tasks(batch_client):
    client = batch_client
    job_id = _job(client, sdk_models.auto_pool_info(nodes=2, slots=2))
    client.create_tasks(job_id, [m.BatchTaskCreateOptions(id=f"t{i}", command_line=TIMED) for i in range(12)])
    wait_until(lambda: _completed(client, job_id, 12), timeout=60, what="12 tasks")
    events = []
    nodes = {}
    for i in range(12):
        lines = b"".join(client.download_task_file(job_id, f"t{i}", "stdout.txt")).decode().split()
        events += [(int(lines[1]), +1), (int(lines[3]), -1)]
        node = client.get_task(job_id, f"t{i}").node_info.node_id
        nodes[node] = nodes.get(node, 0) + 1
    running = peak = 0
    for _, delta in sorted(events, key=lambda event: (event[0], event[1])):
        running += delta
        peak = max(peak, running)
    assert peak == 4
    assert len(nodes) == 2
    client.begin_delete_job(job_id, polling_interval=1).result()


@pytest.mark.serial
def test_wall_clock_kills_the_task_and_reports_it(batch_client):
    client = batch_client
    job_id = _job(client, sdk_models.auto_pool_info())
    client.create_task(
        job_id,
        m.BatchTaskCreateOptions(
            id="slow",
            command_line=sh("echo started; sleep 30; echo never"),
            constraints=m.BatchTaskConstraints(max_wall_clock_time=timedelta(seconds=1)),
        ),
    )
    task = wait_until(
        lambda: (t := client.get_task(job_id, "slow")).state == m.BatchTaskState.COMPLETED and t,
        what="killed task",
    )
    info = task.execution_info
    assert info.result == m.BatchTaskExecutionResult.FAILURE
    assert info.failure_info.code == "MaxWallClockTimeExceeded"
    assert info.failure_info.category == m.BatchErrorSourceCategory.USER_ERROR
    assert info.exit_code == 143  # SIGTERM, as a shell would report it
    assert info.retry_count == 0
    assert (info.end_time - info.start_time) < timedelta(seconds=5)
    assert b"".join(client.download_task_file(job_id, "slow", "stdout.txt")) == b"started\n"
    client.begin_delete_job(job_id, polling_interval=1).result()


def test_failed_task_is_retried_up_to_the_limit(batch_client, tmp_path):
    client = batch_client
    marker = tmp_path / "attempts"
    job_id = _job(client, sdk_models.auto_pool_info())
    client.create_task(
        job_id,
        m.BatchTaskCreateOptions(
            id="flaky",
            # fails twice, then succeeds: the third attempt is the second retry
            command_line=sh(f"echo x >> {marker}; test $(wc -l < {marker}) -ge 3"),
            constraints=m.BatchTaskConstraints(max_task_retry_count=3),
        ),
    )
    client.create_task(
        job_id,
        m.BatchTaskCreateOptions(
            id="hopeless", command_line=sh("exit 7"), constraints=m.BatchTaskConstraints(max_task_retry_count=2)
        ),
    )
    wait_until(lambda: _completed(client, job_id, 2), what="both tasks")
    flaky = client.get_task(job_id, "flaky").execution_info
    assert (flaky.result, flaky.retry_count, flaky.exit_code) == (m.BatchTaskExecutionResult.SUCCESS, 2, 0)
    assert flaky.last_retry_time is not None
    assert marker.read_text() == "x\nx\nx\n"
    hopeless = client.get_task(job_id, "hopeless").execution_info
    assert (hopeless.result, hopeless.retry_count, hopeless.exit_code) == (
        m.BatchTaskExecutionResult.FAILURE,
        2,
        7,
    )
    assert hopeless.failure_info.code == "FailureExitCode"
    assert hopeless.failure_info.message == "The task exited with an exit code representing a failure"
    client.begin_delete_job(job_id, polling_interval=1).result()


def test_environment_and_layout_match_a_linux_node(batch_client):
    client = batch_client
    job_id = _job(
        client,
        sdk_models.auto_pool_info(),
        common_environment_settings=[m.EnvironmentSetting(name="FROM_JOB", value="j")],
    )
    names = [
        "AZ_BATCH_TASK_ID",
        "AZ_BATCH_JOB_ID",
        "AZ_BATCH_POOL_ID",
        "AZ_BATCH_NODE_ID",
        "AZ_BATCH_TASK_DIR",
        "AZ_BATCH_TASK_WORKING_DIR",
        "AZ_BATCH_NODE_ROOT_DIR",
        "AZ_BATCH_ACCOUNT_NAME",
        "FROM_JOB",
        "FROM_TASK",
    ]
    command = "; ".join(f'echo "{name}=${name}"' for name in names) + '; echo "PWD=$(pwd)"'
    client.create_task(
        job_id,
        m.BatchTaskCreateOptions(
            id="env",
            command_line=sh(command),
            environment_settings=[m.EnvironmentSetting(name="FROM_TASK", value="t")],
        ),
    )
    wait_until(lambda: _completed(client, job_id, 1), what="env task")
    task = client.get_task(job_id, "env")
    out = dict(
        line.split("=", 1)
        for line in b"".join(client.download_task_file(job_id, "env", "stdout.txt")).decode().splitlines()
    )
    root = out["AZ_BATCH_NODE_ROOT_DIR"]
    assert out["AZ_BATCH_TASK_ID"] == "env"
    assert out["AZ_BATCH_JOB_ID"] == job_id
    assert out["AZ_BATCH_POOL_ID"] == task.node_info.pool_id
    assert out["AZ_BATCH_NODE_ID"] == task.node_info.node_id
    assert out["AZ_BATCH_TASK_DIR"] == f"{root}/workitems/{job_id}/job-1/env"
    assert out["AZ_BATCH_TASK_WORKING_DIR"] == out["PWD"] == f"{root}/workitems/{job_id}/job-1/env/wd"
    assert out["AZ_BATCH_ACCOUNT_NAME"] == "devbatchaccount1"
    assert (out["FROM_JOB"], out["FROM_TASK"]) == ("j", "t")
    assert task.node_info.task_root_directory == f"workitems/{job_id}/job-1/env"
    client.begin_delete_job(job_id, polling_interval=1).result()


def test_terminate_job_kills_running_and_never_starts_active_tasks(batch_client):
    from azure.batch.models._models import BatchJobTerminateOptions

    client = batch_client
    job_id = _job(client, sdk_models.auto_pool_info(nodes=1, slots=1))
    client.create_task(job_id, m.BatchTaskCreateOptions(id="running", command_line="sleep 30"))
    client.create_task(job_id, m.BatchTaskCreateOptions(id="waiting", command_line="echo should not run"))
    wait_until(lambda: client.get_task(job_id, "running").state == m.BatchTaskState.RUNNING, what="task running")
    client.begin_terminate_job(job_id, BatchJobTerminateOptions(termination_reason="Stop"), polling_interval=1).result()
    job = client.get_job(job_id)
    assert job.state == m.BatchJobState.COMPLETED
    killed = client.get_task(job_id, "running")
    assert killed.state == m.BatchTaskState.COMPLETED
    assert killed.execution_info.failure_info.code == "TaskEnded"
    assert client.get_task(job_id, "waiting").state == m.BatchTaskState.ACTIVE
    client.begin_delete_job(job_id, polling_interval=1).result()


def test_dependencies_and_exit_conditions(batch_client, tmp_path):
    client = batch_client
    order = tmp_path / "order"
    job_id = _job(
        client,
        sdk_models.auto_pool_info(nodes=1, slots=4),
        uses_task_dependencies=True,
        task_failure_mode=m.BatchTaskFailureMode.PERFORM_EXIT_OPTIONS_JOB_ACTION,
    )
    tasks = [
        m.BatchTaskCreateOptions(
            id="3", command_line=sh(f"echo 3 >> {order}"), depends_on=m.BatchTaskDependencies(task_ids=["2"])
        ),
        m.BatchTaskCreateOptions(
            id="2",
            command_line=sh(f"sleep 0.3; echo 2 >> {order}"),
            depends_on=m.BatchTaskDependencies(task_ids=["1"]),
        ),
        m.BatchTaskCreateOptions(id="1", command_line=sh(f"sleep 0.3; echo 1 >> {order}")),
        m.BatchTaskCreateOptions(
            id="after-range",
            command_line=sh(f"echo range >> {order}"),
            depends_on=m.BatchTaskDependencies(task_id_ranges=[m.BatchTaskIdRange(start=1, end=3)]),
        ),
    ]
    client.create_tasks(job_id, tasks)
    wait_until(lambda: _completed(client, job_id, 4), what="chain")
    assert order.read_text() == "1\n2\n3\nrange\n"
    client.create_task(
        job_id,
        m.BatchTaskCreateOptions(
            id="fatal",
            command_line=sh("exit 3"),
            exit_conditions=m.ExitConditions(
                exit_codes=[
                    m.ExitCodeMapping(code=3, exit_options=m.ExitOptions(job_action=m.BatchJobActionKind.TERMINATE))
                ]
            ),
        ),
    )
    job = wait_until(lambda: (j := client.get_job(job_id)).state == m.BatchJobState.COMPLETED and j, what="job end")
    assert job.execution_info.termination_reason == "TaskFailed"
    client.begin_delete_job(job_id, polling_interval=1).result()
