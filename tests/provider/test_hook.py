"""AzureBatchHook and AzureBatchAsyncHook against the local Batch service: submission, read primitives, and the
one watch core driven by both."""

from __future__ import annotations

import asyncio
import time
import uuid

from azure.batch import models as m

from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.hooks.batch_async import AzureBatchAsyncHook
from airflow_provider_azbatch.model.records import STDOUT, FileEnd
from airflow_provider_azbatch.specs.tasks import TaskSpec
from airflow_provider_azbatch.submission.job import JobSubmission
from airflow_provider_azbatch.submission.reattach import submit
from airflow_provider_azbatch.watching.core import JobWatcher
from airflow_provider_azbatch.watching.drivers import run_async, run_sync
from airflow_provider_azbatch.watching.state import WatchState
from tests.helpers import wait_until


def _submission(pool: str, tasks: list[TaskSpec]) -> JobSubmission:
    return JobSubmission(job_id=f"hook-{uuid.uuid4().hex[:8]}", pool_id=pool, tasks=tasks, metadata={"owner": "tests"})


def test_submit_is_idempotent_and_the_job_ends_by_itself(azbatch_default, shared_pool, batch_client):
    hook = AzureBatchHook()
    tasks = [TaskSpec(id=f"t{i}", command_line=f"echo {i}") for i in range(150)]
    submission = _submission(shared_pool, tasks)
    assert submit(hook, submission) is True
    assert submit(hook, submission) is False  # a re-run after a crash: nothing is duplicated
    assert sum(1 for _ in hook.list_tasks(submission.job_id, select=["id"])) == 150
    wait_until(lambda: hook.get_job_status(submission.job_id).state == "completed", what="job completed by itself")
    counts = hook.get_task_counts(submission.job_id)
    assert (counts.succeeded, counts.failed) == (150, 0)
    job = hook.get_job(submission.job_id)
    assert job.as_dict()["metadata"] == [{"name": "owner", "value": "tests"}]
    assert job.execution_info.termination_reason == "AllTasksComplete"
    assert hook.delete_job(submission.job_id, wait=True) is True
    assert hook.get_job(submission.job_id) is None
    assert hook.delete_job(submission.job_id) is False


def test_terminate_and_its_quirks(azbatch_default, shared_pool):
    hook = AzureBatchHook()
    submission = _submission(shared_pool, [TaskSpec(id="long", command_line="sleep 60")])
    submit(hook, submission)
    wait_until(lambda: hook.get_task_counts(submission.job_id).running == 1, what="running")
    assert hook.terminate_job(submission.job_id, reason="Testing", wait=True) is True
    job = hook.get_job(submission.job_id)
    assert job.state == m.BatchJobState.COMPLETED
    assert job.execution_info.termination_reason == "Testing"
    assert hook.terminate_job(submission.job_id) is False  # already ended
    assert hook.terminate_job("no-such-job") is False


def test_read_primitives(azbatch_default, shared_pool):
    hook = AzureBatchHook()
    submission = _submission(shared_pool, [TaskSpec(id="writer", command_line="printf 'alpha\\nbeta\\ngamma\\ndelta'")])
    submit(hook, submission)
    job_id = submission.job_id
    wait_until(lambda: hook.get_task_counts(job_id).completed == 1, what="completed")
    files = hook.list_task_files(job_id, "writer")
    assert files is not None
    assert files[STDOUT].size == 22
    assert files[STDOUT].created is not None
    assert "wd" not in files  # directories are left out
    assert hook.read_task_file(job_id, "writer", STDOUT, 6, 9) == b"beta"
    assert hook.read_task_file(job_id, "writer", "missing.txt", 0, 3) is None
    assert hook.read_task_file_tail(job_id, "writer", STDOUT, 10) == FileEnd(b"amma\ndelta", whole=False)
    assert hook.read_task_file_tail(job_id, "writer", STDOUT, 100) == FileEnd(b"alpha\nbeta\ngamma\ndelta", whole=True)
    assert hook.read_task_file_tail(job_id, "writer", STDOUT, 100).last_lines(2) == ["gamma", "delta"]
    assert hook.list_task_states(job_id, ["writer", "absent"]) == {"writer": "completed"}
    assert hook.list_task_files(job_id, "absent") is None
    assert hook.get_job_status("no-such-job") is None
    (outcome,) = list(hook.list_task_outcomes(job_id))
    assert (outcome.id, outcome.state, outcome.exit_code, outcome.result) == ("writer", "completed", 0, "success")
    assert outcome.duration_seconds is not None
    assert outcome.node_id


def _watch_lines(job_id: str, *, asynchronous: bool) -> list[str]:
    lines: list[str] = []

    def emit(task_id, line):
        lines.append(line)

    watcher = JobWatcher(WatchState(job_id, expected_tasks=1, streamed=["w"]), emit, poll_interval=0.1)
    if not asynchronous:
        hook = AzureBatchHook()
        while not run_sync(watcher.step(time.time()), hook):
            time.sleep(0.1)
        return lines

    async def watch() -> None:
        hook = AzureBatchAsyncHook()
        async with hook.connected():
            while not await run_async(watcher.step(time.time()), hook):
                await asyncio.sleep(0.1)

    asyncio.run(watch())
    return lines


def test_one_core_both_drivers_same_lines(azbatch_default, shared_pool):
    hook = AzureBatchHook()
    command = "for i in 1 2 3 4 5; do echo line $i; echo err $i >&2; sleep 0.2; done; printf tail"
    jobs = []
    for _ in range(2):
        submission = _submission(shared_pool, [TaskSpec(id="w", command_line=command)])
        submit(hook, submission)
        jobs.append(submission.job_id)
    expected = sorted(
        [f"[w] line {i}" for i in range(1, 6)] + [f"[w:stderr] err {i}" for i in range(1, 6)] + ["[w] tail"]
    )
    sync_lines = _watch_lines(jobs[0], asynchronous=False)
    async_lines = _watch_lines(jobs[1], asynchronous=True)
    for lines in (sync_lines, async_lines):
        output = [line for line in lines if line.startswith("[w")]
        assert sorted(output) == expected
        assert [line for line in lines if line.startswith("Batch job ")][-1].endswith(
            ": 0 active, 0 running, 1 succeeded, 0 failed of 1"
        )


def test_pool_helpers(azbatch_default, shared_pool):
    hook = AzureBatchHook()
    assert hook.get_pool("absent-pool") is None
    assert hook.get_pool(shared_pool).task_slots_per_node == 4
    assert hook.get_pool_snapshot(shared_pool).current_dedicated_nodes == 2
    assert hook.list_nodes_in_states(shared_pool, ("starttaskfailed", "unusable")) == []
