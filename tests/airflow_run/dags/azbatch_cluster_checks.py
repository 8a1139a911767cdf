"""DAGs the real-Airflow tests run besides the examples: tasks racing to create one shared pool, a
container task whose private registry credentials come from a connection, a deferral that Airflow's
own timeout ends, and a deferred ``@task.azure_batch`` function whose return value the DAG branches on."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

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


with DAG("azbatch_taskflow", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as taskflow:

    @task
    def threshold() -> float:
        return 0.8

    @task.azure_batch(
        batch_pool=BatchPool.shared("taskflow-pool", requirements={"cpus": 1}, max_nodes=1, autoscale=False),
        deferrable=True,
        poll_interval=0.5,
        multiple_outputs=True,
    )
    def evaluate(limit: float, run: str) -> dict:
        import time

        score = 0.9
        for step in range(1, 9):
            print(f"evaluating step {step}/8", flush=True)
            time.sleep(0.25)
        return {"score": score, "passed": score >= limit, "run": run}

    @task.branch
    def decide(passed: bool) -> str:
        return "ship" if passed else "stop"

    @task
    def ship(score: float) -> str:
        return f"shipping with score {score}"

    @task
    def stop() -> str:
        return "stopped"

    scored = evaluate(threshold(), "{{ run_id }}")
    decide(scored["passed"]) >> [ship(scored["score"]), stop()]
