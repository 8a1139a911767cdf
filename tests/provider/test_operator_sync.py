"""The synchronous operator against the local Batch service, run by real Airflow (``dag.test()``)."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import pytest
from airflow.sdk import DAG
from azure.batch import models as m

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from tests.airflow_helpers import run_dag

EMIT = Path(__file__).with_name("emit_lines.py")
START = datetime(2026, 1, 1)


def expected_lines(count: int = 2000) -> tuple[list[str], list[str]]:
    stdout, stderr = [], []
    for number in range(1, count + 1):
        if number % 100 == 0:
            text = f"line {number} part-a part-b"
        elif number == 777:
            text = "line 777 bad byte \ufffd here"
        else:
            text = f"line {number}"
        (stdout if number % 2 else stderr).append(text)
    return stdout, stderr


def _stream(logs: list[str], prefix: str) -> list[str]:
    return [line[len(prefix) + 1 :] for line in logs if line.startswith(prefix + " ")]


def test_every_line_appears_exactly_once_in_order(airflow_db, azbatch_default, shared_pool, batch_client):
    with DAG("sync_stream_2000", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="emit",
            pool_id=shared_pool,
            tasks=[{"id": "lines", "command_line": f"{sys.executable} {EMIT}"}],
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success"
    stdout, stderr = expected_lines()
    assert _stream(logs, "[lines]") == stdout
    assert _stream(logs, "[lines:stderr]") == stderr
    # Output was shown while the task ran, not only at the end.
    progress = [i for i, line in enumerate(logs) if " 1 running," in line]
    first_line = logs.index("[lines] line 1")
    finished = next(i for i, line in enumerate(logs) if "0 running, 1 succeeded" in line)
    assert progress
    assert progress[0] < first_line < finished
    job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))
    assert batch_client.get_job(job_id).state == m.BatchJobState.COMPLETED


def test_failed_task_fails_the_airflow_task_with_exit_code_and_stderr(airflow_db, azbatch_default, shared_pool):
    with DAG("sync_failure", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="fails",
            pool_id=shared_pool,
            tasks=[
                {"id": "good", "command_line": "echo fine"},
                {"id": "bad", "command_line": "echo about to fail; echo 'boom: disk full' >&2; exit 3"},
            ],
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "failed"
    assert run.get_task_instance("fails").state == "failed"
    error = next(line for line in logs if "failed: 1 of 2 tasks failed" in line and "AirflowException: " in line)
    error = error.split("AirflowException: ", 1)[1]
    assert error.startswith("Azure Batch job 'sync_failure-fails-")
    assert (
        "Task 'bad' failed with exit code 3 (FailureExitCode: The task exited with an exit code representing a "
        "failure). Last 1 lines of its stderr:\n    boom: disk full"
    ) in error
    assert "[bad:stderr] boom: disk full" in logs


def test_invalid_input_fails_before_anything_is_submitted(airflow_db, azbatch_default, shared_pool, batch_client):
    # (tests/provider/test_bad_input.py goes through every rule; here: one at definition, one at run.)
    before = {job.id for job in batch_client.list_jobs()}
    with pytest.raises(AzureBatchValidationError, match=r"tasks\[0\]\.depends_on names 'b', which is not a task"):
        AzureBatchJobOperator(
            task_id="typo", pool_id=shared_pool, tasks=[{"id": "a", "command_line": "true", "depends_on": ["b"]}]
        )
    with DAG("sync_bad_input", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(task_id="no_pool", pool_id="no-such-pool", command="true")
    run, logs = run_dag(dag)
    assert run.state == "failed"
    assert (
        "pool_id 'no-such-pool' does not exist in Batch account 'devbatchaccount1': create the pool first or give "
        "the id of an existing one"
    ) in "\n".join(logs)
    assert {job.id for job in batch_client.list_jobs()} == before
