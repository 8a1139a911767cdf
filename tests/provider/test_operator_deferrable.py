"""The deferrable path with real Airflow (``dag.test()`` runs the trigger in-process)."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta

import pytest
from airflow.sdk import DAG
from azure.batch import models as m

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from tests.airflow_helpers import run_dag
from tests.provider.test_operator_sync import EMIT, expected_lines

START = datetime(2026, 1, 1)
TRIGGER_LOGGER = "airflow_provider_azbatch.triggers.job.AzureBatchJobTrigger"


def _stream(logs: list[str], prefix: str) -> list[str]:
    return [line[len(prefix) + 1 :] for line in logs if line.startswith(prefix + " ")]


def test_deferred_job_shows_each_line_once_across_trigger_and_resume(airflow_db, azbatch_default, shared_pool):
    with DAG("deferred_stream_2000", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="emit",
            pool_id=shared_pool,
            tasks=[{"id": "lines", "command_line": f"{sys.executable} {EMIT}"}],
            poll_interval=0.3,
            deferrable=True,
        )
    run, logs = run_dag(dag)
    assert run.state == "success"
    stdout, stderr = expected_lines()
    assert _stream(logs, "[lines]") == stdout
    assert _stream(logs, "[lines:stderr]") == stderr
    # dag.test() runs the trigger between the deferral and the resumed execute_complete.
    deferred = logs.index("Pausing task as DEFERRED. ")
    resumed = logs.index("Task started", deferred)
    by_trigger = _stream(logs[deferred:resumed], "[lines]") + _stream(logs[deferred:resumed], "[lines:stderr]")
    by_resume = _stream(logs[resumed:], "[lines]") + _stream(logs[resumed:], "[lines:stderr]")
    assert len(by_trigger) + len(by_resume) == 2000
    assert len(by_trigger) > 1000  # streamed while deferred, not only at the end


def test_deferred_failure_reports_exit_code_and_stderr(airflow_db, azbatch_default, shared_pool):
    with DAG("deferred_failure", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="fails",
            pool_id=shared_pool,
            command="echo 'cannot open model.bin' >&2; exit 9",
            poll_interval=0.3,
            deferrable=True,
        )
    run, logs = run_dag(dag)
    assert run.state == "failed"
    assert run.get_task_instance("fails").state == "failed"
    text = "\n".join(logs)
    assert (
        "Task 'main' failed with exit code 9 (FailureExitCode: The task exited with an exit code representing " in text
    )
    assert "Last 1 lines of its stderr:\n    cannot open model.bin" in text


def test_execution_timeout_terminates_the_job(airflow_db, azbatch_default, shared_pool, batch_client):
    with DAG("deferred_timeout", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="slow",
            pool_id=shared_pool,
            command="echo working; sleep 120",
            poll_interval=0.3,
            deferrable=True,
            execution_timeout=timedelta(seconds=4),
        )
    run, logs = run_dag(dag)
    assert run.state == "failed"
    text = "\n".join(logs)
    job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))
    assert f"Batch job {job_id} did not finish within execution_timeout (0:00:04); the Batch job was terminated" in text
    job = batch_client.get_job(job_id)
    assert job.state == m.BatchJobState.COMPLETED
    assert job.execution_info.termination_reason == "AirflowExecutionTimeout"
    assert "[main] working" in logs


def test_deferred_success_returns_results_and_cleans_up(airflow_db, azbatch_default, shared_pool, batch_client):
    with DAG("deferred_cleanup", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="ok",
            pool_id=shared_pool,
            tasks=[{"id": "a", "command_line": "echo A"}, {"id": "b", "command_line": "echo B"}],
            poll_interval=0.3,
            deferrable=True,
            on_finish_action="delete_succeeded_job",
        )
    run, logs = run_dag(dag)
    assert run.state == "success"
    ti = run.get_task_instance("ok")
    job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))
    assert f"Deleting Batch job {job_id} (on_finish_action=delete_succeeded_job)" in logs
    assert {"[a] A", "[b] B"} <= set(logs)
    assert ti.state == "success"


def test_an_auto_pools_last_lines_are_shown_though_its_nodes_are_gone(airflow_db, azbatch_default):
    # The job's end deletes its auto pool, and with it the files of its nodes: the lines of the trigger's last
    # poll come to the task in the event, not read again.
    with DAG("deferred_auto_pool_tail", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="emit",
            batch_pool=BatchPool.auto(requirements={"cpus": 1}),
            command="sleep 2; for n in 1 2 3 4 5; do echo tail $n; done",
            poll_interval=0.3,
            deferrable=True,
        )
    run, logs = run_dag(dag)
    assert run.state == "success"
    assert [line for line in logs if line.startswith("[main] tail ")] == [f"[main] tail {n}" for n in range(1, 6)]


@pytest.mark.serial
def test_no_min_deferral_floor_when_triggers_run_in_line(airflow_db, azbatch_default, shared_pool, monkeypatch):
    # The floor guards against a race of Airflow's scheduler; under dag.test() / `airflow dags test` the trigger
    # runs in the task's own process and there is none: a 3-second job does not wait for the floor (30 s here).
    import time

    monkeypatch.setenv("AIRFLOW__AZBATCH__MIN_DEFERRAL_SECONDS", "30")
    with DAG("deferred_no_floor_in_line", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="short",
            pool_id=shared_pool,
            tasks=[{"id": "t", "command_line": "/bin/sh -c 'sleep 3; echo over'"}],
            poll_interval=0.5,
            deferrable=True,
        )
    started = time.monotonic()
    run, logs = run_dag(dag)
    took = time.monotonic() - started
    assert run.state == "success"
    assert "[t] over" in logs
    assert took < 30
