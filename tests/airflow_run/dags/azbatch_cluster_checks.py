"""DAGs the real-Airflow tests run besides the examples: tasks racing to create one shared pool, a
container task whose private registry credentials come from a connection, and a deferral that Airflow's
own timeout ends."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool

with DAG("azbatch_shared_pool_race", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as race:
    for name in ("first", "second"):
        AzureBatchJobOperator(
            task_id=name,
            batch_pool=BatchPool.shared("race-pool", requirements={"cpus": 1}, max_nodes=1, autoscale=False),
            command=f"echo {name} ran",
            poll_interval=0.5,
        )

with DAG("azbatch_registry_secret", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as registry:
    AzureBatchJobOperator(
        task_id="private_image",
        batch_pool=BatchPool.shared("container-pool", requirements={"cpus": 1}, max_nodes=1, autoscale=False),
        image="registry.example.test/team/trainer:1.0",
        registry_conn_id="test_registry",
        container_run_options="--shm-size 1g",
        command="for i in $(seq 1 12); do echo container step $i; sleep 0.5; done",
        deferrable=True,
        poll_interval=0.5,
    )


class DeferralTimesOutFirst(AzureBatchJobOperator):
    """Airflow's own deferral timeout without the padding the operator gives it: it ends the deferral before
    the trigger could fire its timeout event (as a triggerer too busy to run the trigger in time would)."""

    def defer(self, *, trigger, method_name, kwargs=None, timeout=None):  # type: ignore[no-untyped-def]
        trigger.deadline = None
        super().defer(trigger=trigger, method_name=method_name, kwargs=kwargs, timeout=timedelta(seconds=3))


with DAG("azbatch_deferral_timeout", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as timeout:
    DeferralTimesOutFirst(
        task_id="long",
        batch_pool=BatchPool.shared("timeout-pool", requirements={"cpus": 1}, max_nodes=1, autoscale=False),
        command="sleep 600",
        deferrable=True,
        poll_interval=0.5,
    )
