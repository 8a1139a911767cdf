"""Killing the Airflow task terminates the Batch job it submitted (the worker's on_kill)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from azure.batch import models as m

from tests.airflow_helpers import azbatch_connection_json
from tests.helpers import wait_until


def _job(client):
    jobs = [job for job in client.list_jobs() if job.id.startswith("azbatch_long_job-run_long-")]
    return jobs[0] if jobs else None


def test_sigterm_to_the_task_terminates_its_batch_job(
    airflow_db, local_batch_service, shared_pool, batch_client, tmp_path
):
    env = {
        **os.environ,
        "AIRFLOW_CONN_AZBATCH_DEFAULT": azbatch_connection_json(local_batch_service),
        "PYTHONUNBUFFERED": "1",
    }
    airflow = str(Path(sys.executable).with_name("airflow"))
    # A file, not a pipe: nobody reads a pipe while we wait, and a full one would block the task.
    log_path = tmp_path / "task.log"
    log_file = open(log_path, "w")  # noqa: SIM115 - closed below, after the process ends
    process = subprocess.Popen(
        [airflow, "tasks", "test", "azbatch_long_job", "run_long"],
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        job = wait_until(lambda: _job(batch_client), timeout=60, what="the Batch job")
        wait_until(
            lambda: batch_client.get_task(job.id, "sleeper").state == m.BatchTaskState.RUNNING,
            timeout=30,
            what="the Batch task running",
        )
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the task did not stop within 60 s of SIGTERM:\n{log_path.read_text()[-5000:]}"
            ) from None
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        log_file.close()
    output = log_path.read_text()
    assert f"Terminating Batch job {job.id} (the Airflow task was killed)" in output
    ended = wait_until(
        lambda: (j := batch_client.get_job(job.id)).state == m.BatchJobState.COMPLETED and j, what="job completed"
    )
    assert ended.execution_info.termination_reason == "AirflowTaskKilled"
    task = batch_client.get_task(job.id, "sleeper")
    assert task.state == m.BatchTaskState.COMPLETED
    assert task.execution_info.failure_info.code == "TaskEnded"
