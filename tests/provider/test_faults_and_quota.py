"""Production trouble against the local Batch service: dropped connections and server errors during
submission and waiting, an account at its quota, and a job ended from outside."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from datetime import datetime

import pytest
from airflow.sdk import DAG
from azure.batch import BatchClient
from azure.batch import models as m
from azure.batch.models._models import BatchJobTerminateOptions
from azure.core.credentials import AzureNamedKeyCredential

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from local_azure_batch.testing import run_local_batch_service
from tests.airflow_helpers import azbatch_connection_json, run_dag
from tests.helpers import pool_options, wait_until

START = datetime(2026, 1, 1)
LINES = 300


@pytest.fixture(scope="module")
def faulty():
    """A service of its own (the faults and quotas must not reach other tests), with an 8-slot pool."""
    with run_local_batch_service(extra_args=["--quiet", "--fault-seed", "20261201"]) as service:
        client = BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))
        client.create_pool(pool_options("faulty-pool", nodes=2, slots=4))
        wait_until(
            lambda: sum(1 for n in client.list_nodes("faulty-pool") if n.state == m.BatchNodeState.IDLE) == 2,
            what="pool nodes",
        )
        service.client = client
        yield service
        client.close()


@pytest.fixture
def faulty_conn(faulty, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_DEFAULT", azbatch_connection_json(faulty))
    faulty.set_faults("")
    faulty.set_quota(jobs=None, pools=None)
    yield faulty
    faulty.set_faults("")
    faulty.set_quota(jobs=None, pools=None)


def _jobs(service) -> list[m.BatchJob]:
    return list(service.client.list_jobs())


# About 10 % of requests fail: throttling and server errors everywhere, connections dropped before and
# after the service acted on create-job, add-task-collection and update-job, and on the reads of a poll.
CAMPAIGN = ";".join(
    [
        "*:503/retry-after=0.2@0.03",
        "*:429/retry-after=0.2@0.02",
        "*:500@0.02",
        "Jobs_CreateJob|Tasks_CreateTaskCollection|Jobs_UpdateJob:drop@0.15",
        "Jobs_CreateJob|Tasks_CreateTaskCollection|Jobs_UpdateJob:drop-after@0.15",
        "Jobs_GetJobTaskCounts|Tasks_ListTaskFiles|Tasks_GetTaskFile|Jobs_GetJob:drop@0.03",
    ]
)


def test_fault_campaign_every_line_once_one_job_each_none_left_active(airflow_db, faulty_conn):
    service = faulty_conn
    before = {job.id for job in _jobs(service)}
    command = 'for i in $(seq 1 {lines}); do echo "job{n} line $i"; done; exit {code}'
    # 20 Airflow tasks (10 waiting on a worker, 10 deferred), 2 of each kind with a failing Batch task.
    runs = [(n, 3 if n in (4, 9, 14, 19) else 0) for n in range(20)]
    with DAG("fault_campaign", schedule=None, start_date=START) as dag:
        for n, code in runs:
            AzureBatchJobOperator(
                task_id=f"t{n:02d}",
                pool_id="faulty-pool",
                command=command.format(lines=LINES, n=n, code=code),
                deferrable=n >= 10,
                poll_interval=0.3,
                failure_tail_lines=0,
            )
    service.set_faults(CAMPAIGN)
    try:
        run, logs = run_dag(dag)
    finally:
        service.set_faults("")
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {f"t{n:02d}": ("failed" if code else "success") for n, code in runs}
    seen = Counter(match.groups() for line in logs if (match := re.fullmatch(r"\[main\] job(\d+) line (\d+)", line)))
    assert seen == Counter({(str(n), str(i)): 1 for n, _ in runs for i in range(1, LINES + 1)})
    jobs = [job for job in _jobs(service) if job.id not in before]
    assert len(jobs) == 20  # exactly one Batch job per Airflow task: no second attempt, no duplicate
    assert {job.state for job in jobs} == {m.BatchJobState.COMPLETED}
    stats = service.request_counts()
    print(f"fault campaign: {sum(stats.values())} requests")


def _quota_dag(dag_id: str, *, deferrable: bool) -> DAG:
    with DAG(dag_id, schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="job", pool_id="faulty-pool", command="echo quota cleared", deferrable=deferrable, poll_interval=0.3
        )
    return dag


QUOTA_LINE = (
    "Batch account 'devbatchaccount1' is at its quota of active jobs and job schedules "
    "(ActiveJobAndScheduleQuotaReached: Active job and schedule quota for the account has been reached). "
    "Waiting for it to clear: trying again every 1 s for at most 60 s"
)


@pytest.mark.parametrize("deferrable", [False, True])
def test_quota_that_clears(airflow_db, faulty_conn, monkeypatch, deferrable):
    service = faulty_conn
    monkeypatch.setenv("AIRFLOW__AZBATCH__QUOTA_RETRY_SECONDS", "1")
    monkeypatch.setenv("AIRFLOW__AZBATCH__QUOTA_WAIT_SECONDS", "60")
    active = sum(1 for job in _jobs(service) if job.state == m.BatchJobState.ACTIVE)
    blocker = f"blocker-{deferrable}"
    service.client.create_job(m.BatchJobCreateOptions(id=blocker, pool_info=m.BatchPoolInfo(pool_id="faulty-pool")))
    service.set_quota(jobs=active + 1)
    service.reset_request_counts()

    def clear_when_refused() -> None:
        wait_until(lambda: service.request_counts().get("Jobs_CreateJob", 0) >= 2, timeout=60, what="refused twice")
        service.client.begin_terminate_job(blocker, BatchJobTerminateOptions(termination_reason="x"))

    clearer = threading.Thread(target=clear_when_refused)
    clearer.start()
    run, logs = run_dag(_quota_dag(f"quota_clears_{deferrable}", deferrable=deferrable))
    clearer.join()
    assert run.state == "success"
    assert QUOTA_LINE in logs
    assert "[main] quota cleared" in logs


def test_quota_that_never_clears(airflow_db, faulty_conn, monkeypatch):
    service = faulty_conn
    monkeypatch.setenv("AIRFLOW__AZBATCH__QUOTA_RETRY_SECONDS", "1")
    monkeypatch.setenv("AIRFLOW__AZBATCH__QUOTA_WAIT_SECONDS", "3")
    before = {job.id for job in _jobs(service)}
    service.set_quota(jobs=0)
    run, logs = run_dag(_quota_dag("quota_never_clears", deferrable=False))
    assert run.state == "failed"
    assert (
        "Batch account 'devbatchaccount1' is at its quota of active jobs and job schedules "
        "(ActiveJobAndScheduleQuotaReached: Active job and schedule quota for the account has been reached). "
        "Waiting for it to clear: trying again every 1 s for at most 3 s"
    ) in logs
    failure = next(line for line in logs if "did not clear within" in line)
    assert re.search(
        r"\(ActiveJobAndScheduleQuotaReached: Active job and schedule quota for the account has been reached\)\. "
        r"It did not clear within 3 s \(\[azbatch\] quota_wait_seconds = 3\): ask for a higher quota, or run fewer "
        r"jobs at once",
        failure,
    )
    assert {job.id for job in _jobs(service)} == before


def test_pool_quota_is_named_too(airflow_db, faulty_conn, monkeypatch):
    service = faulty_conn
    monkeypatch.setenv("AIRFLOW__AZBATCH__QUOTA_RETRY_SECONDS", "1")
    monkeypatch.setenv("AIRFLOW__AZBATCH__QUOTA_WAIT_SECONDS", "2")
    service.set_quota(pools=0)
    with DAG("pool_quota", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="job",
            batch_pool=BatchPool.shared("never-created", requirements={"cpus": 1}, autoscale=False),
            command="true",
        )
    run, logs = run_dag(dag)
    assert run.state == "failed"
    assert any(
        "Batch account 'devbatchaccount1' is at its quota of pools (PoolQuotaReached: Pool quota for the account has "
        "been reached). It did not clear within 2 s" in line
        for line in logs
    )


@pytest.mark.serial
@pytest.mark.parametrize("deferrable", [False, True])
def test_a_job_terminated_from_outside_while_its_tasks_wait_ends_the_task_soon(airflow_db, faulty_conn, deferrable):
    service = faulty_conn
    service.client.create_pool(pool_options(f"no-nodes-{deferrable}", nodes=0))
    poll = 0.5
    with DAG(f"ended_outside_{deferrable}", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="waits", pool_id=f"no-nodes-{deferrable}", command="true", deferrable=deferrable, poll_interval=poll
        )
    ended: list[float] = []

    def terminate_when_submitted() -> None:
        job = wait_until(
            lambda: next((j for j in _jobs(service) if j.pool_info.pool_id == f"no-nodes-{deferrable}"), None),
            timeout=60,
            what="the job",
        )
        # The operator polls the waiting job: now end it from outside.
        wait_until(lambda: service.request_counts().get("Jobs_GetJobTaskCounts", 0) >= 2, what="polls")
        service.client.begin_terminate_job(job.id, BatchJobTerminateOptions(termination_reason="ByHand"))
        ended.append(time.time())

    service.reset_request_counts()
    terminator = threading.Thread(target=terminate_when_submitted)
    terminator.start()
    run, logs = run_dag(dag)
    terminator.join()
    ti = run.get_task_instance("waits")
    assert ti.state == "failed"
    assert any(
        "failed: 0 of 1 tasks failed, 1 did not finish (the job was terminated: ByHand)." in line for line in logs
    )
    noticed = ti.end_date.timestamp() - ended[0]
    print(f"terminated from outside: the task ended {noticed:.2f} s later (poll interval {poll} s)")
    assert noticed < 3 * poll + 2
