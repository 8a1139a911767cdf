"""AzureBatchHook operations against the local Batch service."""

from __future__ import annotations

import uuid

from azure.batch import models as m

from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.utils.job_spec import JobSubmission, TaskSpec
from airflow_provider_azbatch.utils.log_tail import STDOUT, StreamCursor, last_lines, tail_file
from tests.helpers import wait_until


def _submission(pool: str, tasks: list[TaskSpec]) -> JobSubmission:
    return JobSubmission(job_id=f"hook-{uuid.uuid4().hex[:8]}", pool_id=pool, tasks=tasks, metadata={"owner": "tests"})


def test_submit_is_idempotent_and_the_job_ends_by_itself(azbatch_default, shared_pool, batch_client):
    hook = AzureBatchHook()
    tasks = [TaskSpec(id=f"t{i}", command_line=f"echo {i}") for i in range(150)]
    submission = _submission(shared_pool, tasks)
    assert hook.submit_job(submission) is True
    assert hook.submit_job(submission) is False  # a re-run after a crash: nothing is duplicated
    assert sum(1 for _ in hook.list_tasks(submission.job_id, select=["id"])) == 150
    wait_until(lambda: hook.get_job_state(submission.job_id) == "completed", what="job completed by itself")
    counts = hook.get_task_counts(submission.job_id)
    assert (counts.succeeded, counts.failed) == (150, 0)
    described = hook.describe_job(submission.job_id)
    assert described["metadata"] == [{"name": "owner", "value": "tests"}]
    assert described["taskCounts"]["succeeded"] == 150
    assert described["executionInfo"]["terminateReason"] == "AllTasksComplete"
    assert hook.delete_job(submission.job_id, wait=True) is True
    assert hook.get_job(submission.job_id) is None
    assert hook.delete_job(submission.job_id) is False


def test_terminate_and_its_quirks(azbatch_default, shared_pool):
    hook = AzureBatchHook()
    submission = _submission(shared_pool, [TaskSpec(id="long", command_line="sleep 60")])
    hook.submit_job(submission)
    wait_until(lambda: hook.get_task_counts(submission.job_id).running == 1, what="running")
    assert hook.terminate_job(submission.job_id, reason="Testing", wait=True) is True
    job = hook.get_job(submission.job_id)
    assert job.state == m.BatchJobState.COMPLETED
    assert job.execution_info.termination_reason == "Testing"
    assert hook.terminate_job(submission.job_id) is False  # already ended
    assert hook.terminate_job("no-such-job") is False


def test_reading_files_from_an_offset_and_tailing(azbatch_default, shared_pool):
    hook = AzureBatchHook()
    submission = _submission(
        shared_pool,
        [TaskSpec(id="writer", command_line="printf 'alpha\\nbeta\\ngam'; sleep 1; printf 'ma\\ndelta'")],
    )
    hook.submit_job(submission)
    job_id = submission.job_id
    wait_until(lambda: hook.get_task_counts(job_id).running == 1, what="running")
    first = wait_until(
        lambda: (r := tail_file(hook.client, job_id, "writer", STDOUT, StreamCursor())).lines and r, what="output"
    )
    assert first.lines == ["alpha", "beta"]  # "gam" waits for the rest of its line
    assert first.cursor.offset == len("alpha\nbeta\n")
    wait_until(lambda: hook.get_task_counts(job_id).completed == 1, what="completed")
    rest = tail_file(hook.client, job_id, "writer", STDOUT, first.cursor, final=True)
    assert rest.lines == ["gamma", "delta"]
    assert rest.cursor.done is True
    assert hook.read_task_file(job_id, "writer", STDOUT, offset=6, length=4) == b"beta"
    assert hook.read_task_file(job_id, "writer", STDOUT, offset=17) == b"delta"
    assert last_lines(hook.client, job_id, "writer", STDOUT, 2) == ["gamma", "delta"]


def test_tail_notices_a_retry_starting_the_output_over(azbatch_default, shared_pool, tmp_path):
    hook = AzureBatchHook()
    marker = tmp_path / "tries"
    # The first attempt fails after a pause; the second writes the same number of bytes, so only
    # the file's creation time tells the two apart.
    command = (
        f"echo try >> {marker}; n=$(wc -l < {marker}); echo attempt $n; if [ $n -lt 2 ]; then sleep 1.5; exit 1; fi"
    )
    submission = _submission(shared_pool, [TaskSpec(id="flaky", command_line=command, max_retries=1)])
    hook.submit_job(submission)
    job_id = submission.job_id
    first = wait_until(
        lambda: (r := tail_file(hook.client, job_id, "flaky", STDOUT, StreamCursor())).lines and r, what="attempt 1"
    )
    assert first.lines == ["attempt 1"]
    wait_until(lambda: hook.get_task_counts(job_id).completed == 1, what="done after a retry")
    second = tail_file(hook.client, job_id, "flaky", STDOUT, first.cursor, final=True)
    assert second.restarted is True
    assert second.lines == ["attempt 2"]


def test_pool_helpers(azbatch_default, shared_pool):
    hook = AzureBatchHook()
    assert hook.pool_exists(shared_pool) is True
    assert hook.pool_exists("absent-pool") is False
    assert hook.get_pool("absent-pool") is None
    assert hook.get_pool(shared_pool).task_slots_per_node == 4
