"""Command lines run as on a Linux node: split into a program and its arguments, without a shell.

The service's docs (commandLine): "The command line does not run under a shell, and therefore cannot take
advantage of shell features such as environment variable expansion. If you want to take advantage of such
features, you should invoke the shell in the command line, for example using ... "/bin/sh -c MyCommand" in
Linux."
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from azure.batch import models as m
from azure.batch.models._models import BatchJobTerminateOptions

from tests import sdk_models
from tests.helpers import sh, wait_until


def _new_job(client, pool_id: str = "shared", **options) -> str:
    """A job on the pool, with ``options`` of ``BatchJobCreateOptions``; its id."""
    job_id = f"cmd-{uuid.uuid4().hex[:8]}"
    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id), **options))
    return job_id


@pytest.fixture(scope="module")
def job_id(batch_client, shared_pool):
    job_id = _new_job(batch_client, shared_pool)
    yield job_id
    batch_client.begin_delete_job(job_id, polling_interval=1).result()


def _run(client, job_id: str, command_line: str, **extra) -> m.BatchTask:
    task_id = f"t-{uuid.uuid4().hex[:8]}"
    client.create_task(job_id, m.BatchTaskCreateOptions(id=task_id, command_line=command_line, **extra))
    return wait_until(
        lambda: (task := client.get_task(job_id, task_id)).state == m.BatchTaskState.COMPLETED and task,
        what=f"task {command_line!r}",
    )


def _stdout(client, job_id: str, task: m.BatchTask) -> str:
    return b"".join(client.download_task_file(job_id, task.id, "stdout.txt")).decode()


@pytest.mark.parametrize(
    ("command_line", "printed"),
    [
        ("echo $HOME", "$HOME\n"),  # no variable expansion
        ("echo a; echo b", "a; echo b\n"),  # no command lists
        ("echo a | wc -c > out.txt", "a | wc -c > out.txt\n"),  # no pipes, no redirections
        ("echo a # b", "a # b\n"),  # no comments
        ("echo $(hostname) *", "$(hostname) *\n"),  # no command substitution, no globbing
        ("""echo "one  two" 'three  four' five\\ six""", "one  two three  four five six\n"),  # quotes group
    ],
)
def test_a_command_line_runs_without_a_shell(batch_client, job_id, command_line, printed):
    task = _run(batch_client, job_id, command_line)
    assert task.execution_info.result == m.BatchTaskExecutionResult.SUCCESS
    assert _stdout(batch_client, job_id, task) == printed


def test_a_command_line_invoking_a_shell_gets_its_features(batch_client, job_id):
    task = _run(batch_client, job_id, "/bin/sh -c 'echo $AZ_BATCH_TASK_ID; echo second | tr a-z A-Z; exit 4'")
    assert _stdout(batch_client, job_id, task) == f"{task.id}\nSECOND\n"
    assert task.execution_info.exit_code == 4
    assert task.execution_info.failure_info.code == "FailureExitCode"
    home = _run(batch_client, job_id, sh('echo "$HOME"'))
    assert _stdout(batch_client, job_id, home).endswith(f"/{home.id}/wd\n")


def test_the_program_is_found_on_path_or_by_its_path(batch_client, job_id, tmp_path):
    assert _stdout(batch_client, job_id, _run(batch_client, job_id, "printf %s-%s x y")) == "x-y"
    script = tmp_path / "run.sh"
    script.write_text('#!/bin/sh\necho "from script [$1] [$2]"\n')
    script.chmod(0o755)
    task = _run(batch_client, job_id, f"{script} 'an arg' \"and $another\"")
    assert _stdout(batch_client, job_id, task) == "from script [an arg] [and $another]\n"


def test_a_signal_death_is_reported_as_128_plus_the_signal(batch_client, job_id):
    wall_clock = m.BatchTaskConstraints(max_wall_clock_time=timedelta(seconds=1))
    killed = _run(batch_client, job_id, "sleep 30", constraints=wall_clock)
    assert killed.execution_info.exit_code == 143  # SIGTERM, no shell in between
    assert killed.execution_info.failure_info.code == "MaxWallClockTimeExceeded"
    assert _run(batch_client, job_id, sh("kill -9 $$")).execution_info.exit_code == 137


@pytest.mark.parametrize(
    ("command_line", "reason"),
    [
        ("no-such-program --flag", "no-such-program: No such file or directory"),
        ("./missing.sh", "./missing.sh: No such file or directory"),
        ("/etc/passwd", "/etc/passwd: Permission denied"),  # not executable
        ("echo 'unclosed", "No closing quotation: echo 'unclosed"),
        ("   ", "the command line names no program:    "),
    ],
)
def test_a_program_that_cannot_start_fails_the_task_without_retries(batch_client, job_id, command_line, reason):
    task = _run(batch_client, job_id, command_line, constraints=m.BatchTaskConstraints(max_task_retry_count=2))
    info = task.execution_info
    assert info.result == m.BatchTaskExecutionResult.FAILURE
    assert info.exit_code is None
    assert info.retry_count == 0  # a task that could not start is not retried, unlike a nonzero exit
    failure = info.failure_info
    assert (failure.category, failure.code) == (m.BatchErrorSourceCategory.USER_ERROR, "CommandProgramNotFound")
    assert failure.message == "The specified command program is not found"
    assert [(d.name, d.value) for d in failure.details] == [("Message", reason)]


def test_a_program_that_cannot_start_is_a_pre_processing_error(batch_client):
    client = batch_client
    job_id = _new_job(client, task_failure_mode=m.BatchTaskFailureMode.PERFORM_EXIT_OPTIONS_JOB_ACTION)
    terminate = m.ExitOptions(job_action=m.BatchJobActionKind.TERMINATE)
    _run(client, job_id, "no-such-program", exit_conditions=m.ExitConditions(pre_processing_error=terminate))
    job = wait_until(lambda: (j := client.get_job(job_id)).state == m.BatchJobState.COMPLETED and j, what="job end")
    assert job.execution_info.termination_reason == "TaskFailed"
    client.begin_delete_job(job_id, polling_interval=1).result()


def test_start_and_job_preparation_tasks_run_without_a_shell(batch_client, tmp_path):
    client = batch_client
    pool_id, job_id = f"cmd-{uuid.uuid4().hex[:8]}", f"cmd-{uuid.uuid4().hex[:8]}"
    start_task = m.BatchStartTask(command_line="no-such-program", wait_for_success=True)
    client.create_pool(sdk_models.pool(pool_id, nodes=1, start_task=start_task))
    node = wait_until(
        lambda: [n for n in client.list_nodes(pool_id) if n.state == m.BatchNodeState.START_TASK_FAILED],
        what="start task failed",
    )[0]
    info = node.start_task_info
    assert (info.result, info.exit_code) == (m.BatchTaskExecutionResult.FAILURE, None)
    assert info.failure_info.code == "CommandProgramNotFound"
    client.begin_delete_pool(pool_id, polling_interval=1).result()

    marker = tmp_path / "released"
    client.create_job(
        m.BatchJobCreateOptions(
            id=job_id,
            pool_info=sdk_models.auto_pool_info(),
            job_preparation_task=m.BatchJobPreparationTask(command_line="echo $AZ_BATCH_JOB_ID; exit 1"),
            job_release_task=m.BatchJobReleaseTask(command_line=sh(f"echo $AZ_BATCH_JOB_ID > {marker}")),
        )
    )
    task = _run(client, job_id, "echo ran")
    assert _stdout(client, job_id, task) == "ran\n"
    statuses = list(client.list_job_preparation_and_release_task_status(job_id))
    prep = statuses[0].job_preparation_task_execution_info
    assert (prep.result, prep.exit_code) == (m.BatchTaskExecutionResult.SUCCESS, 0)
    prep_out = b"".join(
        client.download_node_file(statuses[0].pool_id, statuses[0].node_id, f"{prep.task_root_directory}/stdout.txt")
    )
    assert prep_out == b"$AZ_BATCH_JOB_ID; exit 1\n"
    client.begin_terminate_job(job_id, BatchJobTerminateOptions(termination_reason="Done"), polling_interval=1).result()
    wait_until(lambda: marker.exists() and marker.read_text() == f"{job_id}\n", what="release task")
    client.begin_delete_job(job_id, polling_interval=1).result()


def test_a_job_preparation_task_that_cannot_start_fails(batch_client):
    client = batch_client
    job_id = _new_job(client, job_preparation_task=m.BatchJobPreparationTask(command_line="no-such-program"))
    client.create_task(job_id, m.BatchTaskCreateOptions(id="waits", command_line="true"))
    status = wait_until(
        lambda: [
            s
            for s in client.list_job_preparation_and_release_task_status(job_id)
            if s.job_preparation_task_execution_info.state == m.BatchJobPreparationTaskState.COMPLETED
        ],
        what="preparation task completed",
    )[0]
    prep = status.job_preparation_task_execution_info
    assert (prep.result, prep.exit_code) == (m.BatchTaskExecutionResult.FAILURE, None)
    assert prep.failure_info.code == "CommandProgramNotFound"
    assert client.get_task(job_id, "waits").state == m.BatchTaskState.ACTIVE
    client.begin_delete_job(job_id, polling_interval=1).result()
