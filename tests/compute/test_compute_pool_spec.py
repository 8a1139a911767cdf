from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_provider_azbatch.compute.autoscale import AutoscaleSettings, autoscale_formula
from airflow_provider_azbatch.compute.catalog import VmCatalog, VmSize
from airflow_provider_azbatch.compute.errors import (
    InvalidAutoscaleError,
    InvalidPoolSpecError,
    InvalidRequirementsError,
    UnknownVmSizeError,
    VmSizeTooSmallError,
)
from airflow_provider_azbatch.compute.images import PoolImage
from airflow_provider_azbatch.compute.pool_spec import (
    PoolSpec,
    check_vm_size_fits,
    default_task_slots,
    pool_spec_from_requirements,
)
from airflow_provider_azbatch.compute.requirements import ResourceRequirements

SMALL = VmSize("standard_small", "test", 2, 8.0, 0.10, max_data_disks=4)
BIG = VmSize("standard_big", "test", 16, 64.0, 0.80)
T4X4 = VmSize("standard_t4x4", "test", 64, 440.0, 4.00, 4, "T4", 16.0)
CATALOG = VmCatalog([SMALL, BIG, T4X4], region="testregion")

NOBLE = PoolImage("canonical", "ubuntu-24_04-lts", "server", "latest", "batch.node.ubuntu 24.04")
NOBLE_REF = {
    "publisher": "canonical",
    "offer": "ubuntu-24_04-lts",
    "sku": "server",
    "version": "latest",
}
HPC_REF = {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2404", "version": "latest"}


@pytest.mark.parametrize(
    ("vm", "req", "slots"),
    [
        (BIG, ResourceRequirements(cpus=2, memory_gib=4), 8),
        (BIG, ResourceRequirements(cpus=1, memory_gib=16), 4),
        (BIG, ResourceRequirements(cpus=16, memory_gib=64), 1),
        (SMALL, ResourceRequirements(cpus=0.1, memory_gib=0.1), 8),
        (BIG, ResourceRequirements(cpus=0.3, memory_gib=0.3), 53),
        (SMALL, ResourceRequirements(cpus=4, memory_gib=16), 1),
        (VmSize("standard_m", "test", 32, 28.0, 1.0), ResourceRequirements(memory_gib=1.12), 25),
        (T4X4, ResourceRequirements(cpus=1, memory_gib=1, gpus=1), 4),
        (T4X4, ResourceRequirements(cpus=1, memory_gib=1, gpus=3), 1),
    ],
)
def test_default_task_slots(vm: VmSize, req: ResourceRequirements, slots: int) -> None:
    assert default_task_slots(vm, req) == slots


def test_autoscaled_pool_to_rest() -> None:
    spec = pool_spec_from_requirements(ResourceRequirements(cpus=1, memory_gib=2), max_nodes=5, catalog=CATALOG)

    assert spec.vm_size == SMALL
    assert spec.image == NOBLE
    assert spec.to_rest() == {
        "vmSize": "standard_small",
        "virtualMachineConfiguration": {
            "imageReference": NOBLE_REF,
            "nodeAgentSKUId": "batch.node.ubuntu 24.04",
        },
        "taskSlotsPerNode": 2,
        "enableAutoScale": True,
        "autoScaleFormula": autoscale_formula(5, task_slots_per_node=2),
        "autoScaleEvaluationInterval": "PT5M",
    }


def test_autoscaled_low_priority_pool_with_floor_and_interval() -> None:
    spec = pool_spec_from_requirements(
        ResourceRequirements(cpus=2, low_priority=True),
        max_nodes=8,
        min_nodes=1,
        task_slots_per_node=1,
        evaluation_interval=timedelta(minutes=15),
        catalog=CATALOG,
    )

    assert spec.autoscale == AutoscaleSettings(
        autoscale_formula(8, min_nodes=1, low_priority=True), timedelta(minutes=15)
    )
    assert "$TargetLowPriorityNodes = max(1, min($nodes, 8));" in spec.autoscale.formula
    assert spec.to_rest()["autoScaleEvaluationInterval"] == "PT15M"


@pytest.mark.parametrize(
    ("low_priority", "dedicated", "low"),
    [(False, 3, 0), (True, 0, 3)],
)
def test_fixed_pool_to_rest(low_priority: bool, dedicated: int, low: int) -> None:
    spec = pool_spec_from_requirements(
        ResourceRequirements(cpus=8, low_priority=low_priority), max_nodes=3, autoscale=False, catalog=CATALOG
    )

    assert spec.to_rest() == {
        "vmSize": "standard_big",
        "virtualMachineConfiguration": {
            "imageReference": NOBLE_REF,
            "nodeAgentSKUId": "batch.node.ubuntu 24.04",
        },
        "taskSlotsPerNode": 2,
        "enableAutoScale": False,
        "targetDedicatedNodes": dedicated,
        "targetLowPriorityNodes": low,
    }


def test_container_pool_prefetches_images() -> None:
    spec = pool_spec_from_requirements(
        ResourceRequirements(containers=True),
        max_nodes=2,
        autoscale=False,
        container_images=["myacr.azurecr.io/app:1", "python:3.11"],
        catalog=CATALOG,
    )

    assert spec.to_rest()["virtualMachineConfiguration"] == {
        "imageReference": HPC_REF,
        "nodeAgentSKUId": "batch.node.ubuntu 24.04",
        "containerConfiguration": {
            "type": "dockerCompatible",
            "containerImageNames": ["myacr.azurecr.io/app:1", "python:3.11"],
        },
    }


def test_container_pool_without_prefetch_still_has_a_container_configuration() -> None:
    spec = pool_spec_from_requirements(ResourceRequirements(containers=True), max_nodes=2, catalog=CATALOG)

    assert spec.to_rest()["virtualMachineConfiguration"]["containerConfiguration"] == {"type": "dockerCompatible"}


def test_container_images_imply_a_container_pool() -> None:
    spec = pool_spec_from_requirements(
        ResourceRequirements(), max_nodes=1, container_images=("busybox",), catalog=CATALOG
    )

    assert spec.containers is True
    assert spec.container_image_names == ("busybox",)
    assert spec.image.offer == "ubuntu-hpc"


def test_gpu_pool_gets_the_driver_image_without_containers() -> None:
    spec = pool_spec_from_requirements(ResourceRequirements(gpus=1), max_nodes=2, catalog=CATALOG)

    assert spec.vm_size == T4X4
    assert spec.task_slots_per_node == 4
    assert spec.to_rest()["virtualMachineConfiguration"] == {
        "imageReference": HPC_REF,
        "nodeAgentSKUId": "batch.node.ubuntu 24.04",
    }


def test_gpu_pool_on_the_packaged_catalog() -> None:
    rest = pool_spec_from_requirements(
        ResourceRequirements(cpus=8, memory_gib=64, gpus=1, gpu_kind="a100", os_image="ubuntu-24.04"),
        max_nodes=4,
        autoscale=False,
    ).to_rest()

    assert rest == {
        "vmSize": "standard_nc24ads_a100_v4",
        "virtualMachineConfiguration": {
            "imageReference": {
                "publisher": "microsoft-dsvm",
                "offer": "ubuntu-hpc",
                "sku": "2404",
                "version": "latest",
            },
            "nodeAgentSKUId": "batch.node.ubuntu 24.04",
        },
        "taskSlotsPerNode": 1,
        "enableAutoScale": False,
        "targetDedicatedNodes": 4,
        "targetLowPriorityNodes": 0,
    }


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_nodes": 0}, InvalidPoolSpecError, "pool.max_nodes must be a whole number >= 1, got 0"),
        (
            {"max_nodes": 3, "min_nodes": 4},
            InvalidPoolSpecError,
            "pool.min_nodes must be a whole number between 0 and 3, got 4",
        ),
        (
            {"max_nodes": 3, "task_slots_per_node": 9},
            InvalidPoolSpecError,
            "pool.task_slots_per_node must be between 1 and 8 for standard_small "
            "(Batch allows 4 per vCPU, at most 256), got 9",
        ),
        (
            {"max_nodes": 3, "task_slots_per_node": 0, "autoscale": False},
            InvalidPoolSpecError,
            "pool.task_slots_per_node must be between 1 and 8 for standard_small "
            "(Batch allows 4 per vCPU, at most 256), got 0",
        ),
        (
            {"max_nodes": 3, "evaluation_interval": timedelta(minutes=1)},
            InvalidAutoscaleError,
            "autoscale.evaluation_interval must be between 5 minutes and 168 hours "
            "(the range the Batch service accepts), got datetime.timedelta(seconds=60)",
        ),
    ],
)
def test_pool_arguments_are_validated(kwargs: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        pool_spec_from_requirements(ResourceRequirements(), catalog=CATALOG, **kwargs)

    assert str(info.value) == message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"autoscale": AutoscaleSettings("$x = 1;"), "target_dedicated_nodes": 2},
            "pool.target_dedicated_nodes must be 0 when autoscale is set (the formula sets it), got 2",
        ),
        (
            {"target_dedicated_nodes": 2, "target_low_priority_nodes": 2},
            "pool.target_dedicated_nodes + target_low_priority_nodes must be <= max_nodes (3), got 4",
        ),
        (
            {"target_low_priority_nodes": -1},
            "pool.target_low_priority_nodes must be a whole number >= 0, got -1",
        ),
        ({"container_image_names": ("busybox",)}, "pool.container_image_names needs containers=True"),
        (
            {"containers": True, "container_image_names": "busybox"},
            "pool.container_image_names must be a list of image names, got 'busybox'",
        ),
        (
            {"containers": True, "container_image_names": ["ok", ""]},
            "pool.container_image_names must be a list of image names, got ['ok', '']",
        ),
        ({"max_nodes": True}, "pool.max_nodes must be a whole number >= 1, got True"),
    ],
)
def test_pool_spec_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidPoolSpecError) as info:
        PoolSpec(**{"vm_size": SMALL, "image": NOBLE, "max_nodes": 3, **kwargs})

    assert str(info.value) == message


def test_pool_spec_stores_container_image_names_as_a_tuple() -> None:
    spec = PoolSpec(SMALL, NOBLE, 1, containers=True, container_image_names=["a", "b"])  # type: ignore[arg-type]

    assert spec.container_image_names == ("a", "b")


def test_pool_spec_fits() -> None:
    spec = PoolSpec(SMALL, NOBLE, 1)

    assert spec.fits(ResourceRequirements(cpus=2, memory_gib=8))
    assert not spec.fits(ResourceRequirements(cpus=2, memory_gib=9))


def test_check_vm_size_fits_accepts_a_fitting_size() -> None:
    assert check_vm_size_fits("Standard_Big", ResourceRequirements(cpus=16, memory_gib=64), CATALOG) is None


def test_check_vm_size_fits_names_what_is_short() -> None:
    with pytest.raises(VmSizeTooSmallError) as info:
        check_vm_size_fits("standard_small", ResourceRequirements(cpus=4, memory_gib=16, gpus=1), CATALOG)

    assert str(info.value) == (
        "VM size standard_small (2 vCPU, 8 GiB, 0 GPU) does not fit a task with cpus=4, memory=16 GiB, "
        "gpus=1: needs 4 vCPU (has 2), 16 GiB memory (has 8), 1 GPU (has 0 GPU)"
    )


def test_check_vm_size_fits_reports_a_gpu_kind_mismatch() -> None:
    catalog = VmCatalog([T4X4, VmSize("standard_a100", "test", 24, 220.0, 3.6, 1, "A100", 80.0)])

    with pytest.raises(VmSizeTooSmallError) as info:
        check_vm_size_fits("standard_t4x4", ResourceRequirements(gpus=1, gpu_kind="A100"), catalog)

    assert str(info.value) == (
        "VM size standard_t4x4 (64 vCPU, 440 GiB, 4 T4 GPU) does not fit a task with cpus=1, memory=1 GiB, "
        "gpus=1, gpu_kind=A100: needs 1 A100 GPU (has 4 T4 GPU)"
    )


def test_check_vm_size_fits_rejects_unknown_sizes_and_kinds() -> None:
    with pytest.raises(UnknownVmSizeError) as unknown:
        check_vm_size_fits("standard_bigg", ResourceRequirements(), CATALOG)
    with pytest.raises(InvalidRequirementsError) as kind:
        check_vm_size_fits("standard_t4x4", ResourceRequirements(gpus=1, gpu_kind="H100"), CATALOG)

    assert str(unknown.value) == (
        "VM size 'standard_bigg' is not in the VM catalog (3 sizes, prices for testregion); did you mean standard_big?"
    )
    assert str(kind.value) == (
        "requirements.gpu_kind 'H100' is not offered by any VM size in the catalog; use one of: T4"
    )


def test_check_vm_size_fits_uses_the_packaged_catalog_by_default() -> None:
    with pytest.raises(VmSizeTooSmallError) as info:
        check_vm_size_fits("STANDARD_D2S_V3", ResourceRequirements.with_memory("16Gi", cpus=2))

    assert str(info.value) == (
        "VM size standard_d2s_v3 (2 vCPU, 8 GiB, 0 GPU) does not fit a task with cpus=2, memory=16 GiB, "
        "gpus=0: needs 16 GiB memory (has 8)"
    )
