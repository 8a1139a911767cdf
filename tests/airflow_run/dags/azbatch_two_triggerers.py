"""DAGs of the deployment with two triggerers: many deferred Batch jobs streaming numbered lines (one of
them to be marked failed), a task that waits for the account's job quota to clear, and a warm-up."""

from __future__ import annotations

import math
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch import config
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool

STREAMING_JOBS = 40
POOL = BatchPool.shared(
    "two-triggerers-pool", requirements={"cpus": 1}, max_nodes=6, autoscale=False, task_slots_per_node=8
)
# A numbered line every `pause` seconds (its number is how the test tells a lost or repeated line), at most
# `lines` of them and only until the file `stop_file` exists (the test creates it when its steps are over, however
# long they took: the jobs end together); then how many.
STREAM = (
    'n=0; while [ "$n" -lt {{ params.lines }} ] && [ ! -e "{{ params.stop_file }}" ]; do n=$((n+1)); '
    'echo "line $n"; sleep {{ params.pause }}; done; echo "lines $n"'
)

with DAG(
    "azbatch_many_deferred",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={"lines": 100, "pause": 0.5, "stop_file": ""},
) as many:
    AzureBatchJobOperator.partial(
        task_id="stream", batch_pool=POOL, command=STREAM, deferrable=True, poll_interval=1
    ).expand(environment=[{"PART": str(part)} for part in range(STREAMING_JOBS)])
    AzureBatchJobOperator(task_id="doomed", batch_pool=POOL, command=STREAM, deferrable=True, poll_interval=1)

with DAG("azbatch_quota_wait", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as quota:
    AzureBatchJobOperator(
        task_id="after_quota",
        batch_pool=POOL,
        command="echo the quota cleared",
        deferrable=True,
        poll_interval=1,
    )


# As long as the deployment's [azbatch] min_deferral_seconds: see ReadsItsCheckpointAtOnce.
WARM_UP = f"sleep {math.ceil(config.get_float('min_deferral_seconds'))}; echo warm"


class ReadsItsCheckpointAtOnce(AzureBatchJobOperator):
    """Its trigger reads its checkpoint as soon as it starts, as one resumed on another triggerer does: for a
    triggerer that has not served one yet, that is the first request to its execution API, which starts it
    (seconds, during which the triggerer does not heartbeat). A deployment that has run for a while has
    done that long ago; a fresh test deployment does it before the load.

    Without ``deferred_at`` the trigger does not hold its event for ``[azbatch] min_deferral_seconds`` either, so
    the job outlasts that floor itself (``WARM_UP``): ended sooner, its event could resume the task before the
    scheduler processed the deferring worker's exit, and Airflow would fail the task (apache/airflow#67287)."""

    def defer(self, *, trigger, method_name, kwargs=None, timeout=None):  # type: ignore[no-untyped-def]
        trigger.deferred_at = None
        super().defer(trigger=trigger, method_name=method_name, kwargs=kwargs, timeout=timeout)


with DAG("azbatch_warm_up", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as warm_up:
    ReadsItsCheckpointAtOnce(task_id="warm_up", batch_pool=POOL, command=WARM_UP, deferrable=True, poll_interval=1)
