"""The run's life cycle on its own, without an operator or Airflow's task runner: what the operator, the
decorator and the sensor drive (submit, watch, results, clean up, kill), against the local Batch service."""

from __future__ import annotations

import threading
from pathlib import Path

import structlog

from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.pools import BatchPool
from airflow_provider_azbatch.runs import Expectations, JobRun, RunSettings, TaskInstanceRef
from airflow_provider_azbatch.submission.request import JobRequest
from tests.helpers import wait_until


def _run(**settings):
    hook = AzureBatchHook()
    return JobRun(hook, RunSettings.from_parameters(poll_interval=0.3, **settings), structlog.get_logger("test.run"))


def _where(run_id: str) -> TaskInstanceRef:
    return TaskInstanceRef(dag_id="lifecycle", task_id="job", run_id=run_id, dag_folder=Path(__file__).parent)


def _submitted(run: JobRun, request: JobRequest, run_id: str):
    submission = run.prepare(request, _where(run_id))
    attachment = run.attach(submission, remembered=None, remember=lambda job_id: None)
    return submission, attachment


def test_a_run_submits_watches_reads_results_and_deletes_its_job(azbatch_default, shared_pool, batch_client):
    run = _run(on_finish_action="delete_succeeded_job")
    request = JobRequest(
        pool=BatchPool.existing(shared_pool),
        tasks=[
            {"id": "a", "command_line": "echo '{\"n\": 1}' > out.json"},
            {"id": "b", "command_line": "echo '{\"n\": 2}' > out.json", "depends_on": ["a"]},
        ],
        result_file="out.json",
    )
    with structlog.testing.capture_logs() as logs:
        submission, attachment = _submitted(run, request, "r1")
        assert run.job_id == attachment.job_id  # claimed before it was created: a kill would find it
        watcher = run.watcher(run.watch_state(attachment.job_id, submission))
        run.wait(watcher, execution_timeout=None)
        result = run.finish(watcher, Expectations.of(request))
    assert result.succeeded
    assert result.xcom["results"] == {"a": {"n": 1}, "b": {"n": 2}}
    assert result.deleted
    assert f"Batch job {attachment.job_id}: 2 of 2 tasks succeeded" in [entry["event"] for entry in logs]
    wait_until(lambda: attachment.job_id not in {job.id for job in batch_client.list_jobs()}, what="job deleted")


def test_a_run_killed_from_another_thread_ends_its_job(azbatch_default, shared_pool, batch_client):
    run = _run()
    request = JobRequest(pool=BatchPool.existing(shared_pool), command="sleep 120")
    submission, attachment = _submitted(run, request, "r2")
    watcher = run.watcher(run.watch_state(attachment.job_id, submission))
    wait_until(lambda: batch_client.get_job_task_counts(attachment.job_id).task_counts.running == 1, what="running")
    threading.Timer(0.5, run.on_kill).start()  # as Airflow's SIGTERM handler calls it, during the wait
    run.wait(watcher, execution_timeout=None)
    result = run.finish(watcher)
    assert result.failure is not None
    assert "the job was terminated: AirflowTaskKilled" in result.failure
    assert batch_client.get_job(attachment.job_id).execution_info.termination_reason == "AirflowTaskKilled"
