"""System test: a multi-node task. Both nodes run the coordination command, the primary runs the command with the
environment a torchrun or MPI launcher needs; the teardown deletes the job and the pool."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from tests.system.azbatch_system import delete_run_resources, get_test_run, resource_name, watcher

DAG_ID = "example_azbatch_system_multi_node"
POOL_ID = resource_name("two-nodes")

with DAG(dag_id=DAG_ID, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, tags=["system-test"]) as dag:
    launch = AzureBatchJobOperator(
        task_id="launch",
        # A pool created for a multi-node task gets inter-node communication and one task slot per node.
        batch_pool=BatchPool.shared(POOL_ID, requirements={"cpus": 1}, max_nodes=2, autoscale=False),
        num_nodes=2,
        coordination_command='echo "ready on $AZ_BATCH_NODE_ID"',
        command='echo "hosts=$AZ_BATCH_HOST_LIST master=$AZ_BATCH_MASTER_NODE '
        'primary=$AZ_BATCH_IS_CURRENT_NODE_MASTER"',
        poll_interval=2,
    )
    launch >> delete_run_resources([POOL_ID])
    list(dag.tasks) >> watcher()


def check(run, logs: list[str]) -> None:  # type: ignore[no-untyped-def]
    (line,) = [line for line in logs if line.startswith("[main] hosts=")]
    fields = dict(part.split("=", 1) for part in line.removeprefix("[main] ").split())
    hosts = fields["hosts"].split(",")
    assert len(set(hosts)) == 2, line
    # The master is one of the hosts; Batch documents no order of AZ_BATCH_HOST_LIST, so not which one.
    assert fields["master"].rsplit(":", 1)[0] in hosts, line
    assert fields["primary"] == "true", line


test_run = get_test_run(dag, check)
