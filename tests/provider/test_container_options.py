"""``AzureBatchJobOperator``'s container options for PyTorch (``/dev/shm``, InfiniBand) with real Airflow
(``dag.test()``) and the local Batch service: what each task's container is created with, and the refusal of
InfiniBand on a pool size without it when the DAG file is read."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from airflow_provider_azbatch.specs.options import ContainerOptions
from tests.airflow_helpers import run_dag

START = datetime(2026, 1, 1)
INFINIBAND = "--device=/dev/infiniband --ulimit memlock=-1 --cap-add=IPC_LOCK --network=host"


def test_the_containers_get_their_shared_memory_infiniband_and_each_tasks_own_options(
    airflow_db, azbatch_default, batch_client
):
    with DAG("container_options", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="train",
            job_id="container-options",
            batch_pool=BatchPool.auto({"gpus": 8}, max_nodes=2, vm_size="standard_nd96asr_v4"),
            containers=ContainerOptions(image="alpine:3", shm_size="450g", infiniband=True),
            tasks=[
                {"id": "a", "command_line": "echo $NCCL_IB_DISABLE"},
                {"id": "b", "command_line": "true", "container_run_options": "--ulimit nofile=65536:65536"},
            ],
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success", "\n".join(logs[-30:])
    assert "[a] 0" in logs
    options = {
        task.id: task.container_settings.container_run_options for task in batch_client.list_tasks("container-options")
    }
    assert options == {
        "a": f"--shm-size=450g {INFINIBAND}",
        "b": f"--shm-size=450g {INFINIBAND} --ulimit nofile=65536:65536",
    }


def test_infiniband_on_a_pool_size_without_it_fails_the_dag_file():
    with pytest.raises(AzureBatchValidationError) as caught, DAG("container_options_no_ib", start_date=START):
        AzureBatchJobOperator(
            task_id="train",
            batch_pool=BatchPool.auto({"gpus": 1}, max_nodes=1, vm_size="standard_nc24ads_a100_v4"),
            containers=ContainerOptions(image="alpine:3", infiniband=True),
            command="true",
        )
    assert str(caught.value) == (
        "containers.infiniband asks for InfiniBand, but VM size standard_nc24ads_a100_v4 has none: use a size with "
        "InfiniBand (the ND sizes, e.g. standard_nd96asr_v4 or standard_nd96isr_h100_v5), or leave InfiniBand off "
        "(NCCL then uses TCP) (the BatchPool's vm_size=)"
    )
