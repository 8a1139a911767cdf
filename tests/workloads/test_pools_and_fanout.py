"""Pool strategies, fan-out and dependencies through the operator, against the local Batch service."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import datetime

import pytest
from airflow.sdk import DAG
from azure.batch import models as m

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from airflow_provider_azbatch.pools.ready import prepare_pool
from airflow_provider_azbatch.submission import TaskSpec
from tests.airflow_helpers import run_dag

START = datetime(2026, 1, 1)


def _submitted_job(logs: list[str]) -> str:
    return next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))


def test_two_creators_of_one_shared_pool_get_one_pool(azbatch_default, batch_client):
    pool_id = f"race-{uuid.uuid4().hex[:6]}"
    strategy = BatchPool.shared(pool_id, requirements={"cpus": 1}, max_nodes=1, autoscale=False)
    body = strategy.pool_body(containers=False, multi_node=1)
    results: list[object] = []
    barrier = threading.Barrier(2)

    def create() -> None:
        hook = AzureBatchHook()  # each "Airflow task" has its own hook and client
        barrier.wait()
        try:
            results.append(hook.create_pool(pool_id, body))
        except Exception as exc:
            results.append(exc)

    threads = [threading.Thread(target=create) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(results, key=str) == [False, True]
    assert [pool.id for pool in batch_client.list_pools() if pool.id == pool_id] == [pool_id]


def test_an_existing_pool_with_another_spec_is_reported(azbatch_default, batch_client):
    pool_id = f"other-{uuid.uuid4().hex[:6]}"
    tasks = [TaskSpec(id="t", command_line="true")]
    small = BatchPool.shared(pool_id, requirements={"cpus": 1}, max_nodes=1, autoscale=False)
    log = logging.getLogger("test")
    assert prepare_pool(AzureBatchHook(), small, tasks, job_image=None, registry=None, log=log) == (pool_id, None)
    bigger = BatchPool.shared(pool_id, requirements={"cpus": 16, "memory": "64Gi"}, max_nodes=1, autoscale=False)
    with pytest.raises(AzureBatchValidationError) as info:
        prepare_pool(AzureBatchHook(), bigger, tasks, job_image=None, registry=None, log=log)
    message = str(info.value)
    assert info.value.field == "batch_pool"
    assert message.startswith(f"batch_pool pool {pool_id!r} already exists with a different specification: vmSize is ")
    assert "Use another pool id, or delete the pool so that it is created again" in message


def test_existing_pool_is_checked_against_the_requirements(airflow_db, azbatch_default, shared_pool):
    with DAG("pool_too_small", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="big",
            batch_pool=BatchPool.existing(shared_pool, requirements={"cpus": 64, "memory": "256Gi"}),
            command="true",
        )
    run, logs = run_dag(dag)
    assert run.state == "failed"
    text = "\n".join(logs)
    assert f"pool '{shared_pool}' does not fit this job: VM size standard_d2s_v3 (2 vCPU" in text
    assert "needs" in text


def test_ten_thousand_tasks_from_a_template(airflow_db, azbatch_default, batch_client):
    pool_id = f"wide-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    with DAG("fan_out_10000", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="fan",
            batch_pool=BatchPool.shared(
                pool_id, requirements={"cpus": 1}, max_nodes=4, autoscale=False, task_slots_per_node=8
            ),
            command_template="echo item {value}",
            parameters=list(range(10_000)),
            task_id_prefix="item",
            poll_interval=1,
        )
    run, logs = run_dag(dag)
    elapsed = time.monotonic() - started
    assert run.state == "success", logs[-20:]
    job_id = _submitted_job(logs)
    counts = batch_client.get_job_task_counts(job_id).task_counts
    assert (counts.completed, counts.succeeded, counts.failed) == (10_000, 10_000, 0)
    # Output streaming stays bounded: the first 20 tasks (submission order) only.
    streamed = {line.split("]")[0][1:] for line in logs if line.startswith("[item-")}
    assert streamed == {f"item-{i:04d}" for i in range(20)}
    assert f"Batch job {job_id}: 10000 of 10000 tasks succeeded" in logs
    print(f"10,000 tasks: {elapsed:.1f} s")


def test_dependency_chain_runs_in_order(airflow_db, azbatch_default, shared_pool, tmp_path):
    order = tmp_path / "order"
    tasks = [
        {"id": "c", "command_line": f"echo c >> {order}", "depends_on": ["b"]},
        {"id": "b", "command_line": f"sleep 0.3; echo b >> {order}", "depends_on": ["a"]},
        {"id": "a", "command_line": f"sleep 0.3; echo a >> {order}"},
        {"id": "d", "command_line": f"echo d >> {order}", "depends_on": ["a", "b", "c"]},
    ]
    with DAG("dependency_chain", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(task_id="chain", pool_id=shared_pool, tasks=tasks, poll_interval=0.3)
    run, _ = run_dag(dag)
    assert run.state == "success"
    assert order.read_text() == "a\nb\nc\nd\n"


def test_max_parallel_tasks_limits_the_job(airflow_db, azbatch_default, shared_pool, batch_client):
    stamp = "echo start $(date +%s%N); sleep 0.3; echo end $(date +%s%N)"
    with DAG("parallel_limit", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="limited",
            pool_id=shared_pool,
            command_template=stamp,
            parameters=[{}] * 6,
            max_parallel_tasks=2,
            stream_output=False,
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success"
    job_id = _submitted_job(logs)
    events = []
    for task in batch_client.list_tasks(job_id):
        out = b"".join(batch_client.download_task_file(job_id, task.id, "stdout.txt")).decode().split()
        events += [(int(out[1]), 1), (int(out[3]), -1)]
    running = peak = 0
    for _, delta in sorted(events):
        running += delta
        peak = max(peak, running)
    assert peak == 2


def test_dynamic_task_mapping_gets_one_job_per_mapped_task(airflow_db, azbatch_default, shared_pool, batch_client):
    with DAG("mapped_jobs", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator.partial(task_id="mapped", pool_id=shared_pool, poll_interval=0.3).expand(
            command=["echo first", "echo second", "echo third"]
        )
    run, logs = run_dag(dag)
    assert run.state == "success"
    jobs = sorted({line.split()[3] for line in logs if line.startswith("Submitting Batch job")})
    assert len(jobs) == 3
    assert {"[main] first", "[main] second", "[main] third"} <= set(logs)
    for job_id in jobs:
        assert batch_client.get_job(job_id).state == m.BatchJobState.COMPLETED


def test_a_pool_whose_start_task_fails_fails_the_job_with_the_cause(airflow_db, azbatch_default, batch_client):
    pool_id = f"broken-{uuid.uuid4().hex[:6]}"
    with DAG("start_task_fails", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="never",
            batch_pool=BatchPool.shared(
                pool_id,
                requirements={"cpus": 1},
                max_nodes=1,
                autoscale=False,
                start_task="echo cannot mount the dataset >&2; exit 5",
            ),
            command="echo never runs",
            poll_interval=0.3,
            deferrable=True,
        )
    run, logs = run_dag(dag)
    assert run.state == "failed"
    text = "\n".join(logs)
    assert f"Pool {pool_id} has no usable node: node tvmps_" in text
    assert "is starttaskfailed; its start task exited with code 5 (FailureExitCode: " in text
    assert "Last lines of the start task's stderr:\n    cannot mount the dataset" in text
    assert "; the job was terminated" in text
