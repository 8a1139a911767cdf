"""Autoscaled shared pools give their nodes back, multi-node ones included, against the local Batch service (it
samples every second and evaluates formulas every few seconds)."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime

from airflow.sdk import DAG
from azure.batch import models as m

from airflow_provider_azbatch.compute.autoscale import autoscale_formula
from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from airflow_provider_azbatch.pools.comparison import SPEC_METADATA_KEY, recorded_hash, with_spec_hash
from airflow_provider_azbatch.pools.ready import prepare_pool
from airflow_provider_azbatch.submission import TaskSpec
from tests.airflow_helpers import run_dag
from tests.helpers import wait_until

START = datetime(2026, 1, 1)


def _targets(run: m.AutoScaleRun | None) -> dict[str, str]:
    results = (run.results or "") if run is not None else ""
    return dict(item.split("=", 1) for item in results.split(";") if "=" in item)


def test_a_shared_pool_gives_a_queued_multi_node_task_all_its_nodes_and_none_once_it_is_done(
    airflow_db, azbatch_default, batch_client
):
    pool_id = f"mpi-scaled-{uuid.uuid4().hex[:6]}"
    with DAG("multi_node_scaled", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="mpi",
            batch_pool=BatchPool.shared(pool_id, requirements={"cpus": 1}, max_nodes=4),
            num_nodes=3,
            coordination_command="true",
            command='echo "on $AZ_BATCH_HOST_LIST"',
            poll_interval=0.3,
        )
    try:
        run, logs = run_dag(dag)
        assert run.state == "success"
        # Created with no node (nothing was pending); the queued 3-instance task got all three.
        hosts = next(line for line in logs if line.startswith("[main] on ")).removeprefix("[main] on ").split(",")
        assert len(hosts) == 3
        pool = batch_client.get_pool(pool_id)
        assert "$tasks = $tasks > 0 ? max($tasks, 3) : 0;" in pool.auto_scale_formula
        job = batch_client.get_job(run.get_task_instance("mpi").xcom_pull(task_ids="mpi")["job_id"])
        ended = job.execution_info.end_time
        # The first evaluation whose two-sample window lies wholly after the job's end targets no node.
        after = wait_until(
            lambda: (
                (run_ := batch_client.get_pool(pool_id).auto_scale_run) is not None
                and (run_.timestamp - ended).total_seconds() > 2.5
                and run_
            ),
            timeout=60,
            what="an evaluation after the job",
        )
        assert _targets(after)["$TargetDedicatedNodes"] == "0"
        wait_until(lambda: not list(batch_client.list_nodes(pool_id)), timeout=60, what="the nodes to go")
    finally:
        batch_client.begin_delete_pool(pool_id, polling_interval=1)


def test_a_pool_an_older_version_made_for_multi_node_tasks_gets_this_versions_formula(azbatch_default, batch_client):
    pool_id = f"mpi-older-{uuid.uuid4().hex[:6]}"
    strategy = BatchPool.shared(pool_id, requirements={"cpus": 1}, max_nodes=3)
    body = strategy.pool_body(containers=False, multi_node=2)
    # What 0.4 created for the same task: 2 nodes as the formula's minimum, the specification hash of that body.
    older = {key: value for key, value in body.items() if key != "metadata"}
    older["autoScaleFormula"] = autoscale_formula(3, min_nodes=2)
    older = with_spec_hash(older)
    batch_client.create_pool(m.BatchPoolCreateOptions({"id": pool_id, **older}))
    try:
        # It keeps two nodes with nothing to run.
        wait_until(lambda: len(list(batch_client.list_nodes(pool_id))) == 2, what="the older pool's idle nodes")
        records: list[str] = []

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                records.append(record.getMessage())

        log = logging.getLogger(f"test.{pool_id}")
        log.addHandler(Collect())
        log.setLevel(logging.INFO)
        tasks = [TaskSpec(id="t", command_line="true", num_nodes=2, coordination_command="true")]
        prepare_pool(AzureBatchHook(), strategy, tasks, job_image=None, registry=None, log=log)
        assert records[0] == (
            f"Shared pool {pool_id} was made by a version of this provider before 0.5.0, whose autoscale formula kept "
            "the nodes of its multi-node tasks allocated with nothing to run: it now scales with this version's "
            "formula (those nodes only while tasks are pending, down to min_nodes otherwise)"
        )
        assert records[-1] == f"Using shared pool {pool_id}"
        pool = batch_client.get_pool(pool_id)
        assert pool.auto_scale_formula == body["autoScaleFormula"]
        assert recorded_hash(pool.as_dict()) == recorded_hash(body)
        # Evaluated at once: with nothing pending, its nodes go.
        wait_until(lambda: not list(batch_client.list_nodes(pool_id)), timeout=60, what="the idle nodes to go")
        # A second run finds it as this version makes it: nothing more to say.
        records.clear()
        prepare_pool(AzureBatchHook(), strategy, tasks, job_image=None, registry=None, log=log)
        assert records == [f"Using shared pool {pool_id}"]
        assert [item.name for item in pool.metadata] == [SPEC_METADATA_KEY]
    finally:
        batch_client.begin_delete_pool(pool_id, polling_interval=1)
