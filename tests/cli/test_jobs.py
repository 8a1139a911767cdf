"""``airflow azbatch jobs list|describe|cancel`` against the local Batch service."""

from __future__ import annotations

import io
import json

import pytest
import yaml
from azure.batch import models as m
from azure.core.exceptions import ResourceNotFoundError

from airflow_provider_azbatch.submission.job_ids import attempt_job_id, default_job_id
from tests.airflow_helpers import azbatch_connection_json
from tests.cli.batch_jobs import create_job, iso, table, task, utc, wait_job_done
from tests.helpers import pool_options, wait_until

CODE_FAILURE = "FailureExitCode: The task exited with an exit code representing a failure"


# -- jobs list -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def listed_jobs(batch_client, shared_pool):
    """Three finished jobs, made one after the other: two carry the operator's task instance metadata; the task of
    the second fails (Batch completes the job as it does the others: AllTasksComplete)."""
    create_job(
        batch_client,
        "cli-list-a",
        shared_pool,
        [task("one", "true")],
        metadata={"airflow_dag_id": "cli_dag_a", "airflow_task_id": "t1", "airflow_run_id": "r1"},
    )
    create_job(
        batch_client,
        "cli-list-b",
        shared_pool,
        [task("one", "exit 3")],
        metadata={
            "airflow_dag_id": "cli_dag_b",
            "airflow_task_id": "t2",
            "airflow_run_id": "r2",
            "airflow_map_index": "3",
        },
    )
    create_job(batch_client, "cli-list-c", shared_pool, [task("one", "true")])
    return {job_id: wait_job_done(batch_client, job_id) for job_id in ("cli-list-a", "cli-list-b", "cli-list-c")}


def test_jobs_list_table_newest_first(cli, azbatch_default, listed_jobs):
    result = cli("jobs", "list", "--prefix", "cli-list-")

    assert result.code == 0, result.err
    header, rows = table(result.lines)
    assert header == [
        "job",
        "outcome",
        "tasks",
        "state",
        "created",
        "pool",
        "dag",
        "task",
        "run",
        "terminate reason",
    ]
    created = {job_id: utc(job.creation_time) for job_id, job in listed_jobs.items()}
    assert rows == [
        [
            "cli-list-c",
            "succeeded",
            "1 succeeded",
            "completed",
            created["cli-list-c"],
            "shared",
            "",
            "",
            "",
            "AllTasksComplete",
        ],
        [
            "cli-list-b",
            "failed",
            "1 failed",
            "completed",
            created["cli-list-b"],
            "shared",
            "cli_dag_b",
            "t2",
            "r2",
            "AllTasksComplete",
        ],
        [
            "cli-list-a",
            "succeeded",
            "1 succeeded",
            "completed",
            created["cli-list-a"],
            "shared",
            "cli_dag_a",
            "t1",
            "r1",
            "AllTasksComplete",
        ],
    ]
    assert result.err == ""


def test_jobs_list_json_filters_on_the_task_instance_metadata(cli, azbatch_default, listed_jobs):
    result = cli("jobs", "list", "--dag-id", "cli_dag_b", "--state", "completed", "-o", "json")

    assert result.code == 0, result.err
    assert json.loads(result.out) == [
        {
            "id": "cli-list-b",
            "state": "completed",
            "created": iso(listed_jobs["cli-list-b"].creation_time),
            "pool_id": "shared",
            "dag_id": "cli_dag_b",
            "task_id": "t2",
            "run_id": "r2",
            "map_index": 3,
            "terminate_reason": "AllTasksComplete",
            "outcome": "failed",
            "tasks": {"active": 0, "running": 0, "completed": 1, "succeeded": 0, "failed": 1},
        }
    ]
    assert json.loads(cli("jobs", "list", "--dag-id", "cli_dag_a", "--task-id", "t2", "-o", "json").out) == []
    assert json.loads(cli("jobs", "list", "--prefix", "cli-list-", "--state", "active", "-o", "json").out) == []


def test_jobs_list_time_window_and_limit(cli, azbatch_default, listed_jobs):
    since = iso(listed_jobs["cli-list-b"].creation_time)
    until = iso(listed_jobs["cli-list-b"].creation_time)

    newer = cli("jobs", "list", "--prefix", "cli-list-", "--since", since, "-o", "json")
    older = cli("jobs", "list", "--prefix", "cli-list-", "--until", until, "-o", "json")
    limited = cli("jobs", "list", "--prefix", "cli-list-", "--limit", "1", "-o", "plain")
    future = cli("jobs", "list", "--prefix", "cli-list-", "--since", "2999-01-01")

    assert [job["id"] for job in json.loads(newer.out)] == ["cli-list-c", "cli-list-b"]
    assert [job["id"] for job in json.loads(older.out)] == ["cli-list-b", "cli-list-a"]
    assert limited.code == 0
    assert limited.lines[0].split() == [
        "job",
        "outcome",
        "tasks",
        "state",
        "created",
        "pool",
        "dag",
        "task",
        "run",
        "terminate",
        "reason",
    ]
    assert [line.split()[0] for line in limited.lines[1:]] == ["cli-list-c"]
    assert limited.error == "Showing the newest 1 of 3 jobs (--limit to see more)"
    assert (future.code, future.lines) == (0, ["No data found"])


def test_jobs_list_answers_which_jobs_failed_since_yesterday(cli, azbatch_default, listed_jobs):
    failed = cli("jobs", "list", "--prefix", "cli-list-", "--state", "failed", "--since", "1d", "-o", "json")
    succeeded = cli("jobs", "list", "--prefix", "cli-list-", "--outcome", "succeeded", "-o", "json")
    either = cli("jobs", "list", "--prefix", "cli-list-", "--outcome", "failed", "--outcome", "succeeded", "-o", "json")
    none = cli("jobs", "list", "--prefix", "cli-list-", "--state", "blocked", "--since", "1d")

    assert failed.code == 0, failed.err
    assert [(job["id"], job["outcome"]) for job in json.loads(failed.out)] == [("cli-list-b", "failed")]
    assert [job["id"] for job in json.loads(succeeded.out)] == ["cli-list-c", "cli-list-a"]
    assert [job["id"] for job in json.loads(either.out)] == ["cli-list-c", "cli-list-b", "cli-list-a"]
    assert (none.code, none.lines) == (0, ["No data found"])
    assert none.error.startswith("No blocked jobs since ")
    assert none.error.endswith(" among the 3 listed")


def test_jobs_list_shows_running_waiting_and_blocked_jobs(
    cli, azbatch_default, batch_client, shared_pool, jobs_to_clean
):
    create_job(batch_client, "cli-outcome-running", shared_pool, [task("long", "sleep 60")], end_with_tasks=False)
    jobs_to_clean.append("cli-outcome-running")
    batch_client.create_job(
        m.BatchJobCreateOptions(
            id="cli-outcome-blocked", pool_info=m.BatchPoolInfo(pool_id=shared_pool), uses_task_dependencies=True
        )
    )
    jobs_to_clean.append("cli-outcome-blocked")
    batch_client.create_tasks(
        "cli-outcome-blocked",
        [task("first", "exit 1"), task("then", "true", depends_on=m.BatchTaskDependencies(task_ids=["first"]))],
    )
    batch_client.create_job(
        m.BatchJobCreateOptions(id="cli-outcome-nowhere", pool_info=m.BatchPoolInfo(pool_id="cli-no-such-pool"))
    )
    jobs_to_clean.append("cli-outcome-nowhere")
    batch_client.create_tasks("cli-outcome-nowhere", [task("one", "true")])

    def outcomes():
        listed = json.loads(cli("jobs", "list", "--prefix", "cli-outcome-", "-o", "json").out)
        return {job["id"]: job["outcome"] for job in listed}

    wanted = {"cli-outcome-running": "running", "cli-outcome-blocked": "blocked", "cli-outcome-nowhere": "waiting"}
    wait_until(lambda: outcomes() == wanted, timeout=60, what=f"outcomes {wanted}")
    running = cli("jobs", "list", "--prefix", "cli-outcome-", "--state", "running", "--state", "blocked", "-o", "json")
    assert [job["id"] for job in json.loads(running.out)] == ["cli-outcome-blocked", "cli-outcome-running"]


def test_jobs_list_bad_arguments(cli, azbatch_default):
    bad_time = cli("jobs", "list", "--since", "yesterday")
    reversed_window = cli("jobs", "list", "--since", "2026-12-02", "--until", "2026-12-01")

    assert bad_time.code == 2
    assert bad_time.error == (
        "--since 'yesterday' is not a time: give an ISO 8601 time (2026-12-01T10:00:00Z) or a duration ago "
        "(90s, 15m, 2h, 3d)"
    )
    assert reversed_window.code == 2
    assert reversed_window.error == "--until (2026-12-01T00:00:00Z) is before --since (2026-12-02T00:00:00Z)"


def test_jobs_list_shows_the_jobs_a_schedule_made(cli, azbatch_default, batch_client, shared_pool):
    from datetime import timedelta

    batch_client.create_job_schedule(
        m.BatchJobScheduleCreateOptions(
            id="cli-schedule",
            schedule=m.BatchJobScheduleConfiguration(recurrence_interval=timedelta(days=1)),
            job_specification=m.BatchJobSpecification(
                pool_info=m.BatchPoolInfo(pool_id=shared_pool),
                job_manager_task=m.BatchJobManagerTask(id="manager", command_line="true"),
            ),
        )
    )
    made = wait_job_done(batch_client, "cli-schedule:job-1")

    result = cli("jobs", "list", "--schedule", "cli-schedule", "-o", "json")
    unknown = cli("jobs", "list", "--schedule", "no-such-schedule")

    assert result.code == 0, result.err
    listed = json.loads(result.out)
    assert [(job["id"], job["state"], job["created"], job["terminate_reason"]) for job in listed] == [
        ("cli-schedule:job-1", "completed", iso(made.creation_time), "JMComplete")
    ]
    assert listed[0]["tasks"] == {"active": 0, "running": 0, "completed": 1, "succeeded": 1, "failed": 0}
    assert unknown.code == 1
    assert unknown.error == "No job schedule 'no-such-schedule' in this Batch account"


# -- connections -----------------------------------------------------------------------------------------
def test_wrong_or_missing_connection_says_what_to_fix(cli, local_batch_service, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_AZBATCH_WRONG_KEY",
        json.dumps(
            {
                "conn_type": "azbatch",
                "login": local_batch_service.account_name,
                "password": "d3Jvbmcga2V5",
                "extra": {"account_url": local_batch_service.url},
            }
        ),
    )
    monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_NO_URL", json.dumps({"conn_type": "azbatch", "login": "a"}))

    wrong_key = cli("jobs", "list", "--conn-id", "azbatch_wrong_key")
    no_url = cli("pools", "list", "--conn-id", "azbatch_no_url")
    missing = cli("jobs", "describe", "some-job", "--conn-id", "azbatch_nowhere")

    assert (wrong_key.code, wrong_key.out) == (1, "")
    assert wrong_key.error == (
        "Connection 'azbatch_wrong_key' was refused by the Batch account (AuthenticationFailed: Server failed to "
        "authenticate the request. Make sure the value of Authorization header is formed correctly including the "
        "signature. (The MAC signature found in the HTTP request is not the same as any computed signature.)): "
        "check login (the Batch account name) and password (one of the account's keys: Azure portal, Batch account, "
        "Keys)"
    )
    assert "d3Jvbmcga2V5" not in wrong_key.err
    assert (no_url.code, no_url.error) == (
        1,
        "Connection 'azbatch_no_url': account_url is missing: set the Batch account URL, e.g. "
        "https://<account>.<region>.batch.azure.com",
    )
    assert (missing.code, missing.error) == (
        1,
        "Connection 'azbatch_nowhere' is not defined: create it (airflow connections add, the UI, or "
        "AIRFLOW_CONN_AZBATCH_NOWHERE) or name another with --conn-id",
    )


def test_default_connection_comes_from_the_azbatch_section(cli, local_batch_service, monkeypatch, listed_jobs):
    monkeypatch.setenv("AIRFLOW_CONN_BATCH_ELSEWHERE", azbatch_connection_json(local_batch_service))
    monkeypatch.setenv("AIRFLOW__AZBATCH__DEFAULT_CONN_ID", "batch_elsewhere")

    result = cli("jobs", "list", "--prefix", "cli-list-a", "-o", "json")

    assert result.code == 0, result.err
    assert [job["id"] for job in json.loads(result.out)] == ["cli-list-a"]


# -- jobs describe ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def described_job(batch_client, shared_pool):
    create_job(
        batch_client,
        "cli-describe",
        shared_pool,
        [
            task("ok", "echo fine"),
            task("bad", "echo 'boom' >&2; exit 3"),
            task("flaky", "exit 1", constraints=m.BatchTaskConstraints(max_task_retry_count=1)),
        ],
        metadata={"airflow_dag_id": "cli_dag", "airflow_task_id": "run", "airflow_run_id": "manual__x"},
    )
    job = wait_job_done(batch_client, "cli-describe")
    return job, {t.id: t for t in batch_client.list_tasks("cli-describe")}


def _task_row(t, failure: str = "") -> list[str]:
    info = t.execution_info
    duration = (info.end_time - info.start_time).total_seconds()
    return [
        t.id,
        "completed",
        getattr(info.result, "value", info.result),
        str(info.exit_code),
        t.node_info.node_id,
        str(info.retry_count),
        utc(info.start_time),
        utc(info.end_time),
        f"{duration:.1f}s",
        failure,
    ]


def test_jobs_describe_table(cli, azbatch_default, described_job):
    job, tasks = described_job

    result = cli("jobs", "describe", "cli-describe")

    assert result.code == 0, result.err
    fields, rest = result.lines[:9], result.lines[9:]
    assert fields == [
        "Job:              cli-describe",
        "State:            completed",
        "Terminate reason: AllTasksComplete",
        "Pool:             shared",
        f"Created:          {utc(job.creation_time)}",
        f"Started:          {utc(job.execution_info.start_time)}",
        f"Ended:            {utc(job.execution_info.end_time)}",
        "Submitted by:     DAG cli_dag, task run, run manual__x",
        "Tasks:            3: 0 active, 0 running, 1 succeeded, 2 failed",
    ]
    assert rest[:2] == ["", "Tasks:"]
    header, rows = table(rest[2:])
    assert header == ["task", "state", "result", "exit code", "node", "retries", "start", "end", "duration", "failure"]
    assert rows == [
        _task_row(tasks["bad"], CODE_FAILURE),
        _task_row(tasks["flaky"], CODE_FAILURE),
        _task_row(tasks["ok"]),
    ]
    assert rows[1][5] == "1"  # retried once by the service


def test_jobs_describe_shows_a_bounded_number_of_tasks(cli, azbatch_default, described_job):
    result = cli("jobs", "describe", "cli-describe", "--limit", "2")

    assert result.code == 0, result.err
    _, rows = table(result.lines[11:])
    assert [row[0] for row in rows] == ["bad", "flaky"]
    assert result.error == "Showing the first 2 of 3 tasks by id (--limit to see more)"
    assert "Tasks:            3: 0 active, 0 running, 1 succeeded, 2 failed" in result.lines


def test_jobs_describe_json(cli, azbatch_default, described_job):
    job, tasks = described_job

    result = cli("jobs", "describe", "cli-describe", "--output", "json")

    assert result.code == 0, result.err

    def expected_task(t):
        info = t.execution_info
        return {
            "id": t.id,
            "state": "completed",
            "result": getattr(info.result, "value", info.result),
            "exit_code": info.exit_code,
            "node_id": t.node_info.node_id,
            "retry_count": info.retry_count,
            "start_time": iso(info.start_time),
            "end_time": iso(info.end_time),
            "duration_seconds": (info.end_time - info.start_time).total_seconds(),
            "failure": None
            if info.exit_code == 0
            else {
                "category": "usererror",
                "code": "FailureExitCode",
                "message": "The task exited with an exit code representing a failure",
            },
        }

    assert json.loads(result.out) == {
        "id": "cli-describe",
        "display_name": None,
        "state": "completed",
        "terminate_reason": "AllTasksComplete",
        "pool_id": "shared",
        "created": iso(job.creation_time),
        "started": iso(job.execution_info.start_time),
        "ended": iso(job.execution_info.end_time),
        "scheduling_error": None,
        "submitted_by": {"dag_id": "cli_dag", "task_id": "run", "run_id": "manual__x", "map_index": None},
        "logs_location": None,
        "metadata": {"airflow_dag_id": "cli_dag", "airflow_task_id": "run", "airflow_run_id": "manual__x"},
        "task_counts": {"active": 0, "running": 0, "completed": 3, "succeeded": 1, "failed": 2},
        "tasks": [expected_task(tasks[name]) for name in ("bad", "flaky", "ok")],
    }


def test_jobs_describe_multi_node_task_with_its_subtasks(cli, azbatch_default, batch_client):
    batch_client.create_pool(pool_options("cli-mpi", nodes=2, slots=1, enable_inter_node_communication=True))
    create_job(
        batch_client,
        "cli-describe-mpi",
        "cli-mpi",
        [
            task(
                "train",
                "echo primary",
                multi_instance_settings=m.MultiInstanceSettings(
                    number_of_instances=2, coordination_command_line="true"
                ),
            )
        ],
    )
    wait_job_done(batch_client, "cli-describe-mpi")
    primary = batch_client.get_task("cli-describe-mpi", "train")
    (subtask,) = batch_client.list_subtasks("cli-describe-mpi", "train")

    result = cli("jobs", "describe", "cli-describe-mpi", "-o", "yaml")
    text = cli("jobs", "describe", "cli-describe-mpi")

    document = yaml.safe_load(result.out)
    assert document["tasks"][0]["id"] == "train"
    assert document["tasks"][0]["node_id"] == primary.node_info.node_id
    assert document["tasks"][0]["subtasks"] == [
        {
            "id": 1,
            "state": "completed",
            "result": "success",
            "exit_code": 0,
            "node_id": subtask.node_info.node_id,
            "start_time": iso(subtask.start_time),
            "end_time": iso(subtask.end_time),
            "duration_seconds": (subtask.end_time - subtask.start_time).total_seconds(),
            "failure": None,
        }
    ]
    assert subtask.node_info.node_id != primary.node_info.node_id
    _, rows = table(text.lines[text.lines.index("Tasks:") + 1 :])
    assert [row[:5] for row in rows] == [
        ["train", "completed", "success", "0", primary.node_info.node_id],
        ["train/1", "completed", "success", "0", subtask.node_info.node_id],
    ]


def test_jobs_describe_unknown_job(cli, azbatch_default):
    result = cli("jobs", "describe", "no-such-job")

    assert (result.code, result.out) == (1, "")
    assert result.error == "Batch job 'no-such-job' does not exist in Batch account 'devbatchaccount1'"


# -- an Airflow task instance's job ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def task_instance_jobs(batch_client, shared_pool):
    base = default_job_id("cli_ti_dag", "train", "manual__1")
    create_job(batch_client, base, shared_pool, [task("a", "exit 1")])
    create_job(batch_client, attempt_job_id(base, 2), shared_pool, [task("a", "echo second attempt")])
    create_job(
        batch_client,
        "cli-explicit-id",
        shared_pool,
        [task("a", "true")],
        metadata={
            "airflow_dag_id": "cli_ti_dag",
            "airflow_task_id": "fixed",
            "airflow_run_id": "manual__1",
            "airflow_map_index": "0",
        },
    )
    return base


def test_task_instance_flags_find_its_latest_attempt(cli, azbatch_default, task_instance_jobs):
    base = task_instance_jobs

    latest = cli("jobs", "describe", "-d", "cli_ti_dag", "-t", "train", "-r", "manual__1", "-o", "json")
    ti_flags = ("--dag-id", "cli_ti_dag", "--task-id", "fixed", "--run-id", "manual__1", "-m", "0")
    explicit = cli("jobs", "describe", *ti_flags, "-o", "json")
    logs = cli("logs", "--dag-id", "cli_ti_dag", "--task-id", "train", "--run-id", "manual__1", "a")

    assert latest.code == 0, latest.err
    assert json.loads(latest.out)["id"] == f"{base}-a2"
    assert json.loads(explicit.out)["id"] == "cli-explicit-id"
    assert (logs.code, logs.lines) == (0, ["second attempt"])


def test_task_instance_flags_errors(cli, azbatch_default, task_instance_jobs):
    unknown = cli("jobs", "describe", "-d", "cli_ti_dag", "-t", "train", "-r", "manual__2")
    partial = cli("jobs", "describe", "--dag-id", "cli_ti_dag")
    both = cli("jobs", "cancel", "some-job", "--dag-id", "d", "--task-id", "t", "--run-id", "r")
    neither = cli("jobs", "describe")

    assert unknown.code == 1
    assert unknown.error == (
        "No Batch job of DAG 'cli_ti_dag', task 'train', run 'manual__2' in Batch account 'devbatchaccount1' "
        f"(looked for job {default_job_id('cli_ti_dag', 'train', 'manual__2')}, its later attempts, and jobs with "
        "that task instance in their metadata)"
    )
    assert (partial.code, partial.error) == (
        2,
        "--task-id and --run-id missing: a task instance is named by --dag-id, --task-id and --run-id (and "
        "--map-index for a mapped task)",
    )
    assert (both.code, both.error) == (2, "give a Batch job id or --dag-id/--task-id/--run-id, not both")
    assert (neither.code, neither.error) == (
        2,
        "give a Batch job id, or the Airflow task instance that submitted it: --dag-id, --task-id and --run-id",
    )


# -- jobs cancel -----------------------------------------------------------------------------------------
def test_jobs_cancel_terminates_then_deletes(
    cli, azbatch_default, batch_client, shared_pool, jobs_to_clean, monkeypatch
):
    create_job(batch_client, "cli-cancel", shared_pool, [task("sleeper", "sleep 60")], end_with_tasks=False)
    jobs_to_clean.append("cli-cancel")
    wait_until(lambda: batch_client.get_task("cli-cancel", "sleeper").state == m.BatchTaskState.RUNNING)

    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    declined = cli("jobs", "cancel", "cli-cancel")
    assert (declined.code, declined.out) == (1, "")
    assert declined.err.splitlines() == [
        "Terminate Batch job cli-cancel (active)? [y/N]",
        "Not confirmed: nothing was done (--yes to skip the question)",
    ]
    assert batch_client.get_job("cli-cancel").state == m.BatchJobState.ACTIVE

    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    cancelled = cli("jobs", "cancel", "cli-cancel", "--reason", "CliTest")
    assert (cancelled.code, cancelled.lines) == (0, ["Batch job cli-cancel terminated (CliTest)"])
    job = batch_client.get_job("cli-cancel")
    assert job.state == m.BatchJobState.COMPLETED
    assert job.execution_info.termination_reason == "CliTest"
    assert batch_client.get_task("cli-cancel", "sleeper").state == m.BatchTaskState.COMPLETED

    again = cli("jobs", "cancel", "cli-cancel", "--yes", "--delete")
    assert (again.code, again.lines) == (
        0,
        ["Batch job cli-cancel had already ended (completed): not terminated", "Batch job cli-cancel deleted"],
    )
    with pytest.raises(ResourceNotFoundError):
        batch_client.get_job("cli-cancel")

    gone = cli("jobs", "cancel", "cli-cancel", "--yes")
    assert (gone.code, gone.error) == (1, "Batch job 'cli-cancel' does not exist in Batch account 'devbatchaccount1'")
