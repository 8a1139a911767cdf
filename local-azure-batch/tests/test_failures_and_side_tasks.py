"""What a task's failure does, as the REST reference says: dependency actions (``block`` keeps dependents
active for good), exit options with job actions under ``onTaskFailure``, pre-processing and upload errors,
and job preparation/release tasks per node with their retries and failure states."""

from __future__ import annotations

import uuid

import pytest
from azure.batch import models as m
from azure.core.exceptions import HttpResponseError

from tests import sdk_models
from tests.helpers import sh, wait_until

ACTS = m.BatchTaskFailureMode.PERFORM_EXIT_OPTIONS_JOB_ACTION


def _job(client, pool_id, **extra):
    job_id = f"fail-{uuid.uuid4().hex[:8]}"
    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id), **extra))
    return job_id


def _task(task_id, script, **extra):
    return m.BatchTaskCreateOptions(id=task_id, command_line=sh(script), **extra)


def _completed(client, job_id, task_id):
    task = client.get_task(job_id, task_id)
    return task.state == m.BatchTaskState.COMPLETED and task


def _after(task_id):
    return m.BatchTaskDependencies(task_ids=[task_id])


def test_dependents_of_a_failure_stay_active_for_good_and_the_job_never_completes(batch_client, shared_pool):
    client = batch_client
    job_id = _job(
        client,
        shared_pool,
        uses_task_dependencies=True,
        all_tasks_complete_mode=m.BatchAllTasksCompleteMode.TERMINATE_JOB,
    )
    client.create_tasks(job_id, [_task("a", "exit 1"), _task("b", "echo b", depends_on=_after("a"))])
    wait_until(lambda: _completed(client, job_id, "a"), what="a to fail")
    # A task added after the failure runs (there are free slots) while b still waits.
    client.create_task(job_id, _task("later", "true"))
    wait_until(lambda: _completed(client, job_id, "later"), what="the later task")
    assert client.get_task(job_id, "b").state == m.BatchTaskState.ACTIVE
    counts = client.get_job_task_counts(job_id).task_counts
    assert (counts.active, counts.running, counts.failed) == (1, 0, 1)
    assert client.get_job(job_id).state == m.BatchJobState.ACTIVE


def test_an_exit_code_or_a_default_that_satisfies_lets_dependents_run(batch_client, shared_pool):
    client = batch_client
    job_id = _job(client, shared_pool, uses_task_dependencies=True)
    satisfy = m.ExitOptions(dependency_action=m.DependencyAction.SATISFY)
    client.create_tasks(
        job_id,
        [
            _task(
                "coded",
                "exit 3",
                exit_conditions=m.ExitConditions(exit_codes=[m.ExitCodeMapping(code=3, exit_options=satisfy)]),
            ),
            _task(
                "ranged",
                "exit 12",
                exit_conditions=m.ExitConditions(
                    exit_code_ranges=[m.ExitCodeRangeMapping(start=10, end=19, exit_options=satisfy)]
                ),
            ),
            _task("any", "exit 9", exit_conditions=m.ExitConditions(default=satisfy)),
            _task("after-coded", "true", depends_on=_after("coded")),
            _task("after-ranged", "true", depends_on=_after("ranged")),
            _task("after-any", "true", depends_on=_after("any")),
        ],
    )
    for task_id in ("after-coded", "after-ranged", "after-any"):
        assert wait_until(lambda t=task_id: _completed(client, job_id, t), what=task_id).execution_info.exit_code == 0
    for task_id, code in (("coded", 3), ("ranged", 12), ("any", 9)):
        info = client.get_task(job_id, task_id).execution_info
        assert (info.exit_code, info.result) == (code, m.BatchTaskExecutionResult.FAILURE)


def test_on_task_failure_terminates_at_the_first_failure_ending_running_tasks(batch_client, shared_pool):
    client = batch_client
    job_id = _job(client, shared_pool, task_failure_mode=ACTS)
    client.create_tasks(job_id, [_task("slow", "sleep 60"), _task("bad", "sleep 0.5; exit 2")])
    job = wait_until(lambda: (j := client.get_job(job_id)).state == m.BatchJobState.COMPLETED and j, what="the end")
    assert job.execution_info.termination_reason == "TaskFailed"
    slow = client.get_task(job_id, "slow")
    assert slow.execution_info.failure_info.code == "TaskEnded"


def test_job_actions_apply_to_a_mapped_success_and_disable_holds_the_tasks(batch_client, shared_pool):
    client = batch_client
    terminate = m.ExitOptions(job_action=m.BatchJobActionKind.TERMINATE)
    job_id = _job(client, shared_pool, task_failure_mode=ACTS)
    client.create_task(
        job_id,
        _task(
            "done",
            "exit 0",
            exit_conditions=m.ExitConditions(exit_codes=[m.ExitCodeMapping(code=0, exit_options=terminate)]),
        ),
    )
    job = wait_until(lambda: (j := client.get_job(job_id)).state == m.BatchJobState.COMPLETED and j, what="the end")
    assert job.execution_info.termination_reason == "TaskFailed"  # the service's one reason for a task's job action

    disable = m.ExitOptions(job_action=m.BatchJobActionKind.DISABLE)
    job_id = _job(client, shared_pool, task_failure_mode=ACTS, uses_task_dependencies=True)
    client.create_tasks(
        job_id,
        [
            _task("pause", "exit 5", exit_conditions=m.ExitConditions(default=disable)),
            _task("next", "true", depends_on=m.BatchTaskDependencies(task_ids=["gate"])),
        ],
    )
    wait_until(lambda: client.get_job(job_id).state == m.BatchJobState.DISABLED, what="the job disabled")
    client.create_task(job_id, _task("gate", "true"))
    counts = client.get_job_task_counts(job_id).task_counts
    assert (counts.active, counts.running) == (2, 0)
    client.begin_enable_job(job_id, polling_interval=1).result()
    wait_until(lambda: _completed(client, job_id, "next"), what="tasks once enabled")


def test_a_job_action_needs_on_task_failure(batch_client, shared_pool):
    client = batch_client
    job_id = _job(client, shared_pool)
    terminate = m.ExitOptions(job_action=m.BatchJobActionKind.TERMINATE)
    with pytest.raises(HttpResponseError) as info:
        client.create_task(job_id, _task("t", "exit 1", exit_conditions=m.ExitConditions(default=terminate)))
    assert info.value.status_code == 400
    assert "onTaskFailure" in str(info.value)


def test_pre_processing_and_upload_errors_take_their_own_options(batch_client, shared_pool, local_batch_service):
    client = batch_client
    job_id = _job(client, shared_pool, uses_task_dependencies=True)
    satisfy = m.ExitOptions(dependency_action=m.DependencyAction.SATISFY)
    # Both refused at once (a 404 of this very service), not retried like an unreachable host.
    missing = m.ResourceFile(http_url=f"{local_batch_service.url}/nothing", file_path="input.bin")
    unreachable = m.OutputFile(
        file_pattern="out.txt",
        destination=m.OutputFileDestination(
            container=m.OutputFileBlobContainerDestination(container_url=f"{local_batch_service.url}/no-such-container")
        ),
        upload_options=m.OutputFileUploadConfiguration(upload_condition=m.OutputFileUploadCondition.TASK_COMPLETION),
    )
    client.create_tasks(
        job_id,
        [
            _task(
                "no-input",
                "true",
                resource_files=[missing],
                exit_conditions=m.ExitConditions(pre_processing_error=satisfy),
            ),
            _task(
                "no-upload",
                "echo x > out.txt",
                output_files=[unreachable],
                exit_conditions=m.ExitConditions(file_upload_error=satisfy),
            ),
            _task("after-input", "true", depends_on=_after("no-input")),
            _task("after-upload", "true", depends_on=_after("no-upload")),
        ],
    )
    wait_until(lambda: _completed(client, job_id, "after-input"), what="the pre-processing error's dependent")
    wait_until(lambda: _completed(client, job_id, "after-upload"), what="the upload error's dependent")
    no_input = client.get_task(job_id, "no-input").execution_info
    assert no_input.exit_code is None
    assert no_input.failure_info.code == "BlobDownloadMiscError"
    assert client.get_task(job_id, "no-upload").execution_info.failure_info.code == "FileUploadMiscError"


def test_a_failed_preparation_task_is_retried_then_its_node_runs_none_of_the_job(batch_client):
    client = batch_client
    pool_id = f"prep-{uuid.uuid4().hex[:6]}"
    client.create_pool(sdk_models.pool(pool_id, nodes=1, slots=2))
    prep = m.BatchJobPreparationTask(
        command_line=sh("echo try >> tries.txt; echo 'no dataset' >&2; exit 4"),
        constraints=m.BatchTaskConstraints(max_task_retry_count=2),
    )
    job_id = _job(client, pool_id, job_preparation_task=prep)
    client.create_tasks(job_id, [_task("t1", "echo t1"), _task("t2", "echo t2")])

    def failed_status():
        statuses = list(client.list_job_preparation_and_release_task_status(job_id))
        info = statuses[0].job_preparation_task_execution_info if statuses else None
        return info is not None and info.state == m.BatchJobPreparationTaskState.COMPLETED and info

    info = wait_until(failed_status, what="the preparation task to fail")
    assert (info.exit_code, info.retry_count, info.result) == (4, 2, m.BatchTaskExecutionResult.FAILURE)
    assert info.failure_info.code == "FailureExitCode"
    assert info.last_retry_time is not None
    (node,) = client.list_nodes(pool_id)

    def node_file(path):
        return b"".join(client.download_node_file(pool_id, node.id, f"{info.task_root_directory}/{path}"))

    assert node_file("wd/tries.txt") == b"try\ntry\ntry\n"
    assert node_file("stderr.txt") == b"no dataset\n"  # each run starts its output over, as a task's retry does
    # The task that was waiting for the preparation goes back to active, and no task runs there again.
    wait_until(
        lambda: {task.state for task in client.list_tasks(job_id)} == {m.BatchTaskState.ACTIVE}, what="tasks active"
    )
    assert client.get_job_task_counts(job_id).task_counts.running == 0
    client.begin_delete_pool(pool_id, polling_interval=1)


def test_release_runs_on_each_node_that_prepared_once_the_job_ends(batch_client, shared_pool):
    client = batch_client
    prep = m.BatchJobPreparationTask(command_line=sh("echo prepared"), wait_for_success=True)
    release = m.BatchJobReleaseTask(command_line=sh("echo 'cleanup failed' >&2; exit 6"))
    job_id = _job(
        client,
        shared_pool,
        job_preparation_task=prep,
        job_release_task=release,
        all_tasks_complete_mode=m.BatchAllTasksCompleteMode.TERMINATE_JOB,
    )
    client.create_tasks(job_id, [_task(f"t{n}", "sleep 0.2") for n in range(8)])
    wait_until(lambda: client.get_job(job_id).state == m.BatchJobState.COMPLETED, what="the job to complete")
    statuses = list(client.list_job_preparation_and_release_task_status(job_id))
    assert statuses
    for status in statuses:
        assert status.job_preparation_task_execution_info.result == m.BatchTaskExecutionResult.SUCCESS
        done = status.job_release_task_execution_info
        assert (done.state, done.exit_code) == (m.BatchJobReleaseTaskState.COMPLETED, 6)
        assert done.failure_info.code == "FailureExitCode"
        assert done.task_root_directory.endswith("/jobrelease")


def test_a_preparation_task_not_waited_for_does_not_hold_the_tasks(batch_client, shared_pool):
    client = batch_client
    prep = m.BatchJobPreparationTask(command_line=sh("exit 1"), wait_for_success=False)
    job_id = _job(client, shared_pool, job_preparation_task=prep)
    client.create_task(job_id, _task("t", "echo ran"))
    assert wait_until(lambda: _completed(client, job_id, "t"), what="the task").execution_info.exit_code == 0
