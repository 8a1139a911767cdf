"""Retries reattach instead of duplicating; the sensor watches jobs submitted elsewhere."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime

import pytest
from airflow.sdk import DAG

from airflow_provider_azbatch.compat import AirflowException
from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.sensors.job import AzureBatchJobSensor
from airflow_provider_azbatch.specs.tasks import TaskSpec
from airflow_provider_azbatch.submission.job import JobSubmission
from airflow_provider_azbatch.submission.reattach import submit
from tests.airflow_helpers import run_dag
from tests.helpers import wait_until

START = datetime(2026, 1, 1)


def _jobs_starting(hook: AzureBatchHook, prefix: str) -> list[str]:
    return sorted(job.id for job in hook.list_jobs(select=["id"]) if job.id.startswith(prefix))


@pytest.mark.parametrize("deferrable", [False, True])
def test_a_later_try_reattaches_to_the_running_job(
    airflow_db, azbatch_default, shared_pool, deferrable, tmp_path, local_batch_service
):
    hook = AzureBatchHook()
    job_id = f"reattach-{uuid.uuid4().hex[:8]}"
    release = tmp_path / "release"
    # The task runs until the test releases it, which it does once the new try has reattached.
    tasks = [
        {
            "id": "work",
            "command_line": f"echo from the first try; while [ ! -f {release} ]; do sleep 0.1; done; echo done",
        }
    ]
    # What an earlier try left behind when its worker died: the job, running.
    submit(hook, JobSubmission(job_id=job_id, pool_id=shared_pool, tasks=[TaskSpec(**tasks[0])]))
    wait_until(lambda: hook.get_task_counts(job_id).running == 1, what="first try running")
    local_batch_service.reset_request_counts()

    def release_after_reattach() -> None:
        # Reattaching re-adds the tasks (TaskExists is success): that request marks the moment. dag.test() has
        # taken over 60 s to get there on a loaded machine (Python 3.10, 2 cores shared).
        try:
            wait_until(
                lambda: local_batch_service.request_counts().get("Tasks_CreateTaskCollection"),
                timeout=300,
                what="the new try to re-add the tasks",
            )
        finally:
            # Never left running: a try that does not reattach fails the assertions below, not a timeout.
            release.touch()

    releaser = threading.Thread(target=release_after_reattach, daemon=True)
    releaser.start()
    with DAG(f"reattach_{deferrable}", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="job", pool_id=shared_pool, job_id=job_id, tasks=tasks, poll_interval=0.3, deferrable=deferrable
        )
    run, logs = run_dag(dag)
    releaser.join(timeout=5)
    assert run.state == "success"
    assert f"Reattaching to Batch job {job_id} (state active) submitted by an earlier try" in logs
    assert _jobs_starting(hook, job_id) == [job_id]
    assert sum(1 for _ in hook.list_tasks(job_id)) == 1
    assert "[work] done" in logs


def test_a_finished_job_is_reported_and_a_failed_one_replaced(airflow_db, azbatch_default, shared_pool):
    hook = AzureBatchHook()
    good, bad = f"ok-{uuid.uuid4().hex[:8]}", f"bad-{uuid.uuid4().hex[:8]}"
    submit(hook, JobSubmission(job_id=good, pool_id=shared_pool, tasks=[TaskSpec(id="w", command_line="true")]))
    submit(hook, JobSubmission(job_id=bad, pool_id=shared_pool, tasks=[TaskSpec(id="w", command_line="exit 1")]))
    wait_until(lambda: hook.get_job_status(good).state == "completed" and hook.get_job_status(bad).state == "completed")
    with DAG("report_or_replace", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(task_id="good", pool_id=shared_pool, job_id=good, command="true", poll_interval=0.3)
        AzureBatchJobOperator(task_id="bad", pool_id=shared_pool, job_id=bad, command="echo fixed", poll_interval=0.3)
    run, logs = run_dag(dag)
    assert run.state == "success"
    assert f"Batch job {good} already finished successfully in an earlier try; not running it again" in logs
    assert f"Batch job {bad} is completed and did not succeed: submitting a new job" in logs
    assert _jobs_starting(hook, good) == [good]
    assert _jobs_starting(hook, bad) == [bad, f"{bad}-a2"]
    assert "[main] fixed" in logs


@pytest.mark.parametrize("deferrable", [False, True])
def test_sensor_waits_and_streams_when_asked(airflow_db, azbatch_default, shared_pool, deferrable):
    hook = AzureBatchHook()
    job_id = f"elsewhere-{uuid.uuid4().hex[:8]}"
    submit(
        hook,
        JobSubmission(
            job_id=job_id,
            pool_id=shared_pool,
            tasks=[TaskSpec(id="a", command_line="for i in 1 2 3; do echo tick $i; sleep 0.3; done")],
        ),
    )
    with DAG(f"sensor_{deferrable}", schedule=None, start_date=START) as dag:
        AzureBatchJobSensor(task_id="wait", job_id=job_id, stream_output=True, poke_interval=0.3, deferrable=deferrable)
    run, logs = run_dag(dag)
    assert run.state == "success"
    assert [line for line in logs if line.startswith("[a] ")] == ["[a] tick 1", "[a] tick 2", "[a] tick 3"]
    assert f"Batch job {job_id} is over: 0 of 1 tasks failed" in logs


def test_sensor_fails_on_a_failed_task_and_rejects_streaming_with_reschedule(airflow_db, azbatch_default, shared_pool):
    hook = AzureBatchHook()
    job_id = f"elsewhere-{uuid.uuid4().hex[:8]}"
    submit(hook, JobSubmission(job_id=job_id, pool_id=shared_pool, tasks=[TaskSpec(id="x", command_line="exit 4")]))
    with DAG("sensor_fails", schedule=None, start_date=START) as dag:
        AzureBatchJobSensor(task_id="wait", job_id=job_id, poke_interval=0.3)
    run, logs = run_dag(dag)
    assert run.state == "failed"
    assert "Task 'x' failed with exit code 4" in "\n".join(logs)
    with pytest.raises(ValueError, match="stream_output needs the sensor to keep its place between pokes"):
        AzureBatchJobSensor(task_id="s", job_id="j", stream_output=True, mode="reschedule")
    with pytest.raises(AirflowException, match="Batch job 'nope' does not exist in account 'devbatchaccount1'"):
        AzureBatchJobSensor(task_id="s2", job_id="nope")._new_state()


@pytest.mark.parametrize("existing", [False, True])
def test_the_job_is_claimed_before_it_is_created_or_added_to(azbatch_default, shared_pool, existing):
    """A kill that lands mid-submission must already know the job id, so on_kill can terminate it."""
    import logging

    from airflow_provider_azbatch.submission.reattach import submit_or_reattach

    hook = AzureBatchHook()
    job_id = f"claim-{uuid.uuid4().hex[:8]}"
    spec = TaskSpec(id="t", command_line="sleep 30")  # still running when the second submission looks
    if existing:
        submit(hook, JobSubmission(job_id=job_id, pool_id=shared_pool, tasks=[spec]))
    seen: list[tuple[str, bool, int]] = []

    def claim(claimed: str) -> None:
        job = hook.get_job(claimed, select=["id"])
        tasks = len(list(hook.client.list_tasks(claimed, select=["id"]))) if job is not None else 0
        seen.append((claimed, job is not None, tasks))

    attachment = submit_or_reattach(
        hook,
        JobSubmission(job_id=job_id, pool_id=shared_pool, tasks=[spec]),
        remembered=None,
        remember=lambda _: None,
        force_new=False,
        log=logging.getLogger("test"),
        claim=claim,
    )
    assert attachment.job_id == job_id
    # Claimed exactly once, before the job existed (new) or before tasks were re-added (reattach).
    assert seen == [(job_id, existing, 1 if existing else 0)]
    hook.terminate_job(job_id, wait=True)
