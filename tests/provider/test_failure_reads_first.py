"""A failed run's report (task, exit code, stderr tail) is the last line the task log shows before Airflow's
traceback, said once, and it is the exception's message: for the operator and ``@task.azure_batch``, waiting
in the worker and deferred, in a real ``dag.test()`` against the local Batch service."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG, task

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from tests.airflow_helpers import run_dag

pytestmark = pytest.mark.azurite
START = datetime(2026, 1, 1)
FAILED = "Task failed with exception"
EXIT_CODE = "FailureExitCode: The task exited with an exit code representing a failure"


def _failures(logs: list[str]) -> list[tuple[str, str]]:
    """(the line logged just before each of Airflow's failure lines, the exception's message)."""
    found = []
    for index, line in enumerate(logs):
        if line == FAILED:
            traceback = logs[index + 1]
            found.append((logs[index - 1], traceback.split("airflow.sdk.exceptions.AirflowException: ", 1)[1]))
    return found


def _job_id(logs: list[str], task_id: str) -> str:
    return next(line.split()[3] for line in logs if line.startswith("Submitting Batch job ") and f"-{task_id}-" in line)


@pytest.mark.parametrize("deferrable", [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")])
def test_the_failure_report_is_the_last_line_before_the_traceback(
    airflow_db, azbatch_with_storage, shared_pool, deferrable
):
    with DAG(f"failure_reads_first_{deferrable}", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="fails",
            pool_id=shared_pool,
            command="echo working; echo 'reading input.csv' >&2; echo 'boom: disk full' >&2; exit 3",
            poll_interval=0.3,
            deferrable=deferrable,
        )

        @task.azure_batch(pool_id=shared_pool, poll_interval=0.3, deferrable=deferrable)
        def check(rows: int):
            if rows < 10:
                raise ValueError(f"only {rows} rows: need at least 10")
            return rows

        check(3)
    run, logs = run_dag(dag)

    assert run.state == "failed"
    operator_report = (
        f"Azure Batch job '{_job_id(logs, 'fails')}' failed: 1 of 1 tasks failed.\n"
        f"Task 'main' failed with exit code 3 ({EXIT_CODE}). Last 2 lines of its stderr:\n"
        "    reading input.csv\n"
        "    boom: disk full"
    )
    (operator_failure,) = [failure for failure in _failures(logs) if "exit code 3" in failure[0]]
    (decorator_failure,) = [failure for failure in _failures(logs) if failure[0].startswith("ValueError")]
    # The report is the last line before Airflow's traceback, and the exception's message.
    assert operator_failure == (operator_report, operator_report)
    decorator_report, message = decorator_failure
    assert message == decorator_report
    lines = decorator_report.split("\n")
    assert lines[:3] == [
        'ValueError: only 3 rows: need at least 10 (in check(), check.py line 3: raise ValueError(f"only {rows} rows: '
        'need at least 10"))',
        f"Azure Batch job '{_job_id(logs, 'check')}' failed: 1 of 1 tasks failed.",
        f"Task 'main' failed with exit code 1 ({EXIT_CODE}). Last 6 lines of its stderr:",
    ]
    assert lines[3] == "    Traceback (most recent call last):"
    assert lines[-1] == '        raise ValueError(f"only {rows} rows: need at least 10")'
    # Said once: no line of the report repeats another, and each report is logged once.
    assert len(set(lines)) == len(lines)
    assert logs.count(operator_report) == 1
    assert logs.count(decorator_report) == 1
    # The output streamed while the job ran comes first, each line once.
    assert logs.count("[main:stderr] boom: disk full") == 1
    assert logs.index("[main:stderr] boom: disk full") < logs.index(operator_report)
