"""Container images a container engine could not parse fail as a failed pull does on Batch (ContainerInvalidImage)."""

from __future__ import annotations

import uuid

import pytest
from azure.batch import models as m

from local_azure_batch.lang.image_reference import reference_problem
from tests import sdk_models
from tests.helpers import wait_until

LOWERCASE = "invalid reference format: repository name must be lowercase"


@pytest.mark.parametrize(
    ("reference", "problem"),
    [
        ("MyRegistry.azurecr.io/Train Image:1", "invalid reference format"),
        ("myregistry.azurecr.io/Train:1", LOWERCASE),
        ("Ubuntu:22.04", LOWERCASE),
        ("ubuntu:", "invalid reference format"),
        ("ubuntu:22.04:1", "invalid reference format"),
        ("x//y", "invalid reference format"),
        ("ubuntu@sha256:abc", "invalid reference format"),
        ("a" * 256, "repository name must not be more than 255 characters"),
        # Valid: a registry may have upper case; tags, digests, ports, nested paths.
        ("MyRegistry.azurecr.io/train:1", None),
        ("myregistry.azurecr.io/team/train:latset", None),
        ("mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04:latest", None),
        ("localhost:5000/a/b__c-d.e:v1.0_rc-1", None),
        ("ubuntu@sha256:" + "ab" * 32, None),
        ("ubuntu", None),
    ],
)
def test_references_are_read_as_distribution_reference_reads_them(reference, problem):
    assert reference_problem(reference) == problem


def _container_pool(pool_id: str, images: list[str] | None = None) -> m.BatchPoolCreateOptions:
    options = sdk_models.pool(pool_id, nodes=1)
    options.virtual_machine_configuration = m.VirtualMachineConfiguration(
        image_reference=m.BatchVmImageReference(
            publisher="microsoft-dsvm", offer="ubuntu-hpc", sku="2204", version="latest"
        ),
        node_agent_sku_id="batch.node.ubuntu 22.04",
        container_configuration=m.BatchContainerConfiguration(
            type=m.ContainerType.DOCKER_COMPATIBLE, container_image_names=images
        ),
    )
    return options


@pytest.fixture(scope="module")
def container_pool(batch_client):
    batch_client.create_pool(_container_pool("containers"))
    wait_until(
        lambda: [node.state for node in batch_client.list_nodes("containers")] == [m.BatchNodeState.IDLE],
        what="container pool node idle",
    )
    yield "containers"
    batch_client.begin_delete_pool("containers", polling_interval=1).result()


def _run(client, pool_id: str, image: str) -> m.BatchTask:
    job_id = f"img-{uuid.uuid4().hex[:8]}"
    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
    client.create_task(
        job_id,
        m.BatchTaskCreateOptions(
            id="train",
            command_line="echo trained",
            container_settings=m.BatchTaskContainerSettings(image_name=image),
            constraints=m.BatchTaskConstraints(max_task_retry_count=2),
        ),
    )
    return wait_until(
        lambda: (task := client.get_task(job_id, "train")).state == m.BatchTaskState.COMPLETED and task,
        what="task completed",
    )


def test_a_malformed_image_fails_the_task_as_a_failed_pull(batch_client, container_pool):
    task = _run(batch_client, container_pool, "MyRegistry.azurecr.io/Train Image:1")
    info = task.execution_info
    assert (info.result, info.exit_code, info.retry_count) == (m.BatchTaskExecutionResult.FAILURE, None, 0)
    failure = info.failure_info
    assert (failure.category, failure.code, failure.message) == (
        m.BatchErrorSourceCategory.USER_ERROR,
        "ContainerInvalidImage",
        "One or more container images specified are invalid",
    )
    assert [(detail.name, detail.value) for detail in failure.details] == [
        ("ContainerImage", "MyRegistry.azurecr.io/Train Image:1"),
        ("Message", "invalid reference format"),
    ]


def test_a_well_formed_image_runs_even_with_a_tag_no_registry_has(batch_client, container_pool):
    # Whether :latset exists only a registry can tell: offline, the command runs on the host.
    task = _run(batch_client, container_pool, "myregistry.azurecr.io/train:latset")
    assert (task.execution_info.result, task.execution_info.exit_code) == (m.BatchTaskExecutionResult.SUCCESS, 0)


def test_a_pool_prefetching_a_malformed_image_has_unusable_nodes(batch_client):
    batch_client.create_pool(_container_pool("prefetch", images=["ubuntu:22.04", "Ubuntu:22.04"]))
    node = wait_until(
        lambda: next(
            (node for node in batch_client.list_nodes("prefetch") if node.state == m.BatchNodeState.UNUSABLE), None
        ),
        what="prefetching node unusable",
    )
    [error] = node.errors
    assert (error.code, error.message) == (
        "ContainerInvalidImage",
        "One or more container images specified are invalid",
    )
    assert [(detail.name, detail.value) for detail in error.error_details] == [
        ("ContainerImage", "Ubuntu:22.04"),
        ("Message", LOWERCASE),
    ]
    batch_client.begin_delete_pool("prefetch", polling_interval=1).result()
