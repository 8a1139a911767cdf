"""What ends the wait when tasks fail, sync and deferrable, against the local Batch service with real Airflow:
tasks blocked by failed dependencies (directly, through a chain, in a fan-in)."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG
from azure.batch import models as m

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from tests.airflow_helpers import run_dag

START = datetime(2026, 1, 1)
POLL = 0.5
MODES = [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")]


def _error(logs: list[str]) -> str:
    return next(line for line in logs if line.startswith("Traceback") or "AirflowException: " in line).split(
        "AirflowException: ", 1
    )[-1]


def _job_id(logs: list[str]) -> str:
    return next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))


def _ended_within(batch_client, job_id: str, failed_task: str, seconds: float) -> float:
    """Seconds from the failed task's end to the job's end (it is terminated once the wait ends)."""
    job = batch_client.get_job(job_id)
    assert job.state == m.BatchJobState.COMPLETED
    assert job.execution_info.termination_reason == "TasksBlockedByFailures"
    failed_end = batch_client.get_task(job_id, failed_task).execution_info.end_time
    took = (job.execution_info.end_time - failed_end).total_seconds()
    assert took <= seconds, f"the wait ended {took:.1f} s after the failure (at most {seconds} s)"
    return took


@pytest.mark.parametrize("deferrable", MODES)
def test_a_task_waiting_on_a_failed_task_ends_the_wait_naming_both(
    airflow_db, azbatch_default, shared_pool, batch_client, deferrable
):
    with DAG(f"blocked_pair_{deferrable}", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="pair",
            pool_id=shared_pool,
            tasks=[
                {"id": "a", "command_line": "echo 'a: cannot read input' >&2; exit 1"},
                {"id": "b", "command_line": "echo b ran", "depends_on": ["a"]},
            ],
            poll_interval=POLL,
            deferrable=deferrable,
        )
    run, logs = run_dag(dag)
    assert run.get_task_instance("pair").state == "failed"
    job_id = _job_id(logs)
    assert f"Batch job {job_id}: nothing more can run: b waits on failed tasks (a)" in logs
    assert _error(logs) == (
        f"Azure Batch job '{job_id}' failed: 1 of 2 tasks failed, 1 did not finish (the rest wait on failed tasks "
        "and can never run: the job was terminated).\n"
        "Task 'a' failed with exit code 1 (FailureExitCode: The task exited with an exit code representing a "
        "failure). Last 1 lines of its stderr:\n    a: cannot read input\n"
        "Blocked by failed dependencies (they can never run): b"
    )
    _ended_within(batch_client, job_id, "a", 2 * POLL + 5)
    assert batch_client.get_task(job_id, "b").state == m.BatchTaskState.ACTIVE  # it never ran


@pytest.mark.parametrize("deferrable", MODES)
def test_a_chain_and_a_fan_in_behind_one_failure_end_the_same_way(
    airflow_db, azbatch_default, shared_pool, batch_client, deferrable
):
    fan_in = [{"id": f"shard-{n:02d}", "command_line": "echo shard", "depends_on": ["root"]} for n in range(50)]
    with DAG(f"blocked_fan_in_{deferrable}", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="fan_in",
            pool_id=shared_pool,
            tasks=[
                {"id": "root", "command_line": "exit 4"},
                {"id": "ok", "command_line": "echo independent"},
                *fan_in,
                # Three levels: root -> shard-00 -> level-2 -> level-3.
                {"id": "level-2", "command_line": "true", "depends_on": ["shard-00"]},
                {"id": "level-3", "command_line": "true", "depends_on": ["level-2", "ok"]},
            ],
            poll_interval=POLL,
            deferrable=deferrable,
        )
    run, logs = run_dag(dag)
    assert run.get_task_instance("fan_in").state == "failed"
    job_id = _job_id(logs)
    error = _error(logs)
    assert error.startswith(
        f"Azure Batch job '{job_id}' failed: 1 of 54 tasks failed, 52 did not finish (the rest wait on failed tasks "
        "and can never run: the job was terminated).\nTask 'root' failed with exit code 4"
    )
    # First few by id, then a count.
    assert error.endswith(
        "Blocked by failed dependencies (they can never run): level-2, level-3, shard-00, shard-01, shard-02, "
        "shard-03, shard-04, shard-05, shard-06, shard-07 and 42 more"
    )
    _ended_within(batch_client, job_id, "root", 2 * POLL + 5)
    states = {task.id: task.state for task in batch_client.list_tasks(job_id)}
    assert states["ok"] == m.BatchTaskState.COMPLETED
    assert sum(state == m.BatchTaskState.ACTIVE for state in states.values()) == 52
