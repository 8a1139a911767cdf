"""What ends the wait when tasks fail, sync and deferrable, against the local Batch service with real Airflow:
tasks blocked by failed dependencies (directly, through a chain, in a fan-in), fail-fast, exit codes that
satisfy dependents, skip codes, and a failing job preparation task."""

from __future__ import annotations

import re
from collections import Counter
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


@pytest.mark.serial
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


@pytest.mark.serial
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


@pytest.mark.serial
@pytest.mark.parametrize("deferrable", MODES)
def test_fail_fast_ends_a_200_task_job_at_its_first_failure(
    airflow_db, azbatch_default, shared_pool, batch_client, deferrable, tmp_path
):
    # The first task to start fails (tasks are added in concurrent collections: any of them may be first); the
    # others would run for a minute each, 8 at a time.
    first = tmp_path / "first"
    script = (
        f'if mkdir {first} 2>/dev/null; then sleep 0.5; echo "$AZ_BATCH_TASK_ID: bad shard" >&2; exit 7; '
        "else sleep 60; fi"
    )
    tasks = [{"id": f"t-{n:03d}", "command_line": script} for n in range(200)]
    with DAG(f"fail_fast_{deferrable}", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="shards",
            pool_id=shared_pool,
            tasks=tasks,
            fail_fast=True,
            poll_interval=POLL,
            deferrable=deferrable,
        )
    run, logs = run_dag(dag)
    assert run.get_task_instance("shards").state == "failed"
    job_id = _job_id(logs)
    (failed,) = [
        task.id
        for task in batch_client.list_tasks(job_id)
        if task.execution_info.failure_info is not None and task.execution_info.failure_info.code == "FailureExitCode"
    ]
    error = _error(logs)
    match = re.match(
        rf"Azure Batch job '{job_id}' failed: 1 of 200 tasks failed, (\d+) ended with the job, (\d+) did not finish "
        rf"\(fail_fast: task '{failed}' failed and the job was terminated\)\.\n"
        rf"Task '{failed}' failed with exit code 7 \(FailureExitCode: [^)]*\)\. Last 1 lines of its stderr:\n"
        rf"    {failed}: bad shard\n"
        r"Ended with the job: t-\d\d\d",
        error,
    )
    assert match, error
    ended, unfinished = int(match.group(1)), int(match.group(2))
    assert ended >= 1
    assert ended + unfinished == 199
    job = batch_client.get_job(job_id)
    assert job.execution_info.termination_reason == "TaskFailed"
    states = Counter(task.state for task in batch_client.list_tasks(job_id))
    assert states[m.BatchTaskState.RUNNING] == 0
    # Terminated by the service at the failure, not after the siblings' minute of sleep.
    failed_end = batch_client.get_task(job_id, failed).execution_info.end_time
    assert (job.execution_info.end_time - failed_end).total_seconds() < 20


@pytest.mark.parametrize("deferrable", MODES)
def test_an_exit_code_mapped_to_satisfy_lets_dependents_run_and_the_task_succeeds(
    airflow_db, azbatch_default, shared_pool, deferrable
):
    with DAG(f"satisfy_{deferrable}", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="incremental",
            pool_id=shared_pool,
            tasks=[
                {
                    "id": "fetch",
                    "command_line": "echo 'no new data'; exit 3",
                    "exit_conditions": {"exit_codes": {3: {"dependency_action": "satisfy"}}},
                },
                {"id": "report", "command_line": "echo report ran", "depends_on": ["fetch"]},
            ],
            fail_fast=True,  # an accepted exit code does not end the job
            poll_interval=POLL,
            deferrable=deferrable,
        )
    run, logs = run_dag(dag)
    ti = run.get_task_instance("incremental")
    assert ti.state == "success"
    assert "[report] report ran" in logs
    tasks = ti.xcom_pull(task_ids="incremental")["tasks"]
    assert tasks["fetch"]["outcome"] == "accepted"
    assert (tasks["fetch"]["exit_code"], tasks["fetch"]["result"]) == (3, "failure")
    assert tasks["report"]["outcome"] == "succeeded"
    assert any(line.startswith("fetch ") and " accepted " in line for line in logs)


@pytest.mark.parametrize("deferrable", MODES)
def test_skip_on_exit_code_skips_the_airflow_task_and_a_mixed_failure_still_fails(
    airflow_db, azbatch_default, shared_pool, deferrable
):
    with DAG(f"skip_codes_{deferrable}", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="nothing_to_do",
            pool_id=shared_pool,
            command="echo 'no input today'; exit 42",
            skip_on_exit_code=[42, 43],
            poll_interval=POLL,
            deferrable=deferrable,
        )
        AzureBatchJobOperator(
            task_id="mixed",
            pool_id=shared_pool,
            tasks=[
                {"id": "quiet", "command_line": "exit 42"},
                {"id": "broken", "command_line": "exit 1"},
                {"id": "own_code", "command_line": "exit 5", "skip_on_exit_code": 5},
            ],
            skip_on_exit_code=42,
            poll_interval=POLL,
            deferrable=deferrable,
        )
    run, logs = run_dag(dag)
    assert run.get_task_instance("nothing_to_do").state == "skipped"
    job_id = next(
        line.split()[3] for line in logs if line.startswith("Submitting Batch job") and "nothing_to_do" in line
    )
    assert f"Batch job {job_id}: its only failed task exited with skip_on_exit_code: main (exit code 42)" in logs
    assert run.get_task_instance("mixed").state == "failed"
    error = next(line for line in logs if "failed: 3 of 3 tasks failed" in line)
    assert "Task 'broken' failed with exit code 1" in error


@pytest.mark.parametrize("deferrable", MODES)
def test_a_failing_preparation_task_ends_the_wait_naming_it_and_its_stderr(
    airflow_db, azbatch_default, shared_pool, batch_client, deferrable
):
    with DAG(f"failing_preparation_{deferrable}", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="prepared",
            pool_id=shared_pool,
            tasks=[{"id": f"work-{n}", "command_line": "echo should not run"} for n in range(3)],
            job_preparation={"command": "echo fetching; echo 'prep: dataset missing' >&2; exit 2", "max_retries": 1},
            poll_interval=POLL,
            deferrable=deferrable,
        )
    run, logs = run_dag(dag)
    assert run.get_task_instance("prepared").state == "failed"
    job_id = _job_id(logs)
    error = _error(logs)
    assert error.startswith(
        f"Azure Batch job '{job_id}' failed: 0 of 3 tasks failed, 3 did not finish (its job preparation task failed "
        f"on every node of pool {shared_pool}: the job was terminated).\n"
    )
    failures = re.findall(
        r"The job preparation task failed on node (\S+) with exit code 2 \(FailureExitCode: [^)]*\) after 1 retries\. "
        r"Last 1 lines of its stderr:\n    prep: dataset missing",
        error,
    )
    assert len(failures) == 2  # both nodes of the pool
    assert error.endswith("Blocked by the failed job preparation task: work-0, work-1, work-2")
    job = batch_client.get_job(job_id)
    assert job.execution_info.termination_reason == "JobPreparationFailed"
    assert {task.state for task in batch_client.list_tasks(job_id)} == {m.BatchTaskState.ACTIVE}
