from __future__ import annotations

import math

import pytest

from airflow_provider_azbatch.compute.catalog import VmCatalog, VmSize
from airflow_provider_azbatch.compute.errors import (
    InvalidRequirementsError,
    NoFittingVmSizeError,
    RetiredImageFamilyError,
    UnknownImageFamilyError,
)
from airflow_provider_azbatch.compute.requirements import (
    ResourceRequirements,
    fits,
    parse_memory_gib,
    select_vm_size,
    vm_size_shortfalls,
)


def _size(name: str, vcpus: int, memory: float, usd: float, gpus: int = 0, kind: str | None = None, **kw) -> VmSize:
    return VmSize(name, "test", vcpus, memory, usd, gpus, kind, 16.0 if gpus else None, **kw)


# Prices chosen so each rule decides a different test: cheapest wins, ties go to fewer vCPUs then
# name, low-priority-incapable sizes drop out, explicit_only sizes need their gpu_kind.
CATALOG = VmCatalog(
    [
        _size("standard_small", 2, 4, 0.10),
        _size("standard_mem", 2, 16, 0.12),
        _size("standard_nolp", 4, 8, 0.15, low_priority_capable=False),
        _size("standard_lp", 4, 8, 0.18),
        _size("standard_a_wide", 16, 32, 0.40),
        _size("standard_big_b", 8, 32, 0.40),
        _size("standard_big_a", 8, 32, 0.40),
        _size("standard_t4", 4, 28, 0.50, 1, "T4"),
        _size("standard_a100", 24, 220, 3.60, 1, "A100"),
        _size("standard_a100x2", 48, 440, 7.20, 2, "A100"),
        _size("standard_a10", 36, 440, 0.30, 1, "A10", explicit_only=True),
    ],
    region="testregion",
    retired_gpu_kinds={"V100": "retired for the test"},
)


@pytest.mark.parametrize(
    ("memory", "gib"),
    [
        ("64Gi", 64.0),
        ("64GiB", 64.0),
        ("64gi", 64.0),
        (" 1.5 Gi ", 1.5),
        ("512Mi", 0.5),
        ("1Ti", 1024.0),
        ("1048576Ki", 1.0),
        ("64G", 64 * 1000**3 / 2**30),
        ("64GB", 64 * 1000**3 / 2**30),
        ("500M", 500 * 1000**2 / 2**30),
        (16, 16.0),
        (0.25, 0.25),
    ],
)
def test_parse_memory_gib(memory: str | float, gib: float) -> None:
    assert parse_memory_gib(memory) == gib


@pytest.mark.parametrize("memory", ["64", "64Xi", "", "lots", "-1Gi", "1Gib2"])
def test_parse_memory_gib_rejects_what_it_cannot_read(memory: str) -> None:
    with pytest.raises(InvalidRequirementsError) as info:
        parse_memory_gib(memory)

    assert str(info.value) == (
        f"requirements.memory {memory!r} is not a memory size; write e.g. '64Gi' (GiB), "
        "'64G' or '64GB' (10^9 bytes), or '512Mi'"
    )


def test_parse_memory_gib_rejects_bool() -> None:
    with pytest.raises(InvalidRequirementsError) as info:
        parse_memory_gib(True)

    assert str(info.value) == "requirements.memory must be a size like '64Gi', got True"


def test_with_memory() -> None:
    req = ResourceRequirements.with_memory("512Mi", cpus=0.5, gpus=1, gpu_kind="t4")

    assert req == ResourceRequirements(cpus=0.5, memory_gib=0.5, gpus=1, gpu_kind="T4")


def test_with_memory_refuses_both_memory_forms() -> None:
    with pytest.raises(InvalidRequirementsError) as info:
        ResourceRequirements.with_memory("1Gi", memory_gib=2)

    assert str(info.value) == "pass either memory or memory_gib, not both"


def test_defaults_and_normalisation() -> None:
    assert ResourceRequirements() == ResourceRequirements(1, 1, 0, None, False, "ubuntu-24.04", False)
    req = ResourceRequirements(gpus=2, gpu_kind=" a100 ", os_image="Ubuntu-24.04")
    assert (req.gpu_kind, req.os_image) == ("A100", "ubuntu-24.04")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cpus": -1}, "requirements.cpus must be > 0, got -1"),
        ({"cpus": 0}, "requirements.cpus must be > 0, got 0"),
        ({"cpus": math.inf}, "requirements.cpus must be > 0, got inf"),
        ({"cpus": math.nan}, "requirements.cpus must be a number, got nan"),
        ({"cpus": "2"}, "requirements.cpus must be a number, got '2'"),
        ({"cpus": True}, "requirements.cpus must be a number, got True"),
        ({"memory_gib": 0}, "requirements.memory_gib must be > 0, got 0"),
        (
            {"memory_gib": "64Gi"},
            "requirements.memory_gib must be a number, got '64Gi'; for sizes like '64Gi' use "
            "ResourceRequirements.with_memory",
        ),
        ({"gpus": -1}, "requirements.gpus must be a whole number >= 0, got -1"),
        ({"gpus": 1.5}, "requirements.gpus must be a whole number >= 0, got 1.5"),
        ({"gpus": True}, "requirements.gpus must be a whole number >= 0, got True"),
        (
            {"gpu_kind": "T4"},
            "requirements.gpu_kind='T4' needs gpus >= 1, got gpus=0; set gpus or drop gpu_kind",
        ),
        (
            {"gpus": 1, "gpu_kind": "  "},
            "requirements.gpu_kind must be a GPU model such as 'T4' or None, got '  '",
        ),
        ({"low_priority": "yes"}, "requirements.low_priority must be True or False, got 'yes'"),
        ({"containers": 1}, "requirements.containers must be True or False, got 1"),
        ({"os_image": None}, "requirements.os_image must be an image family name, got None"),
    ],
)
def test_invalid_requirements_name_the_field(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidRequirementsError) as info:
        ResourceRequirements(**kwargs)

    assert str(info.value) == message


def test_unknown_and_retired_os_images_are_rejected_at_construction() -> None:
    with pytest.raises(UnknownImageFamilyError) as unknown:
        ResourceRequirements(os_image="centos-7")
    with pytest.raises(RetiredImageFamilyError) as retired:
        ResourceRequirements(os_image="ubuntu-20.04")

    assert str(unknown.value) == (
        "requirements.os_image 'centos-7' is not a known image family; use one of: ubuntu-22.04, ubuntu-24.04"
    )
    assert str(retired.value) == (
        "requirements.os_image 'ubuntu-20.04' is retired: Azure Batch ended support for the "
        "batch.node.ubuntu 20.04 node agent on 2025-04-23; use one of: ubuntu-22.04, ubuntu-24.04"
    )


def test_describe() -> None:
    assert ResourceRequirements(cpus=0.5, memory_gib=64).describe() == "cpus=0.5, memory=64 GiB, gpus=0"
    assert ResourceRequirements(gpus=2, gpu_kind="h100", low_priority=True).describe() == (
        "cpus=1, memory=1 GiB, gpus=2, gpu_kind=H100, low_priority=True"
    )


@pytest.mark.parametrize(
    ("req", "expected"),
    [
        (ResourceRequirements(), "standard_small"),
        (ResourceRequirements(cpus=2, memory_gib=4), "standard_small"),
        (ResourceRequirements(cpus=2, memory_gib=4.01), "standard_mem"),
        (ResourceRequirements(cpus=3, memory_gib=8), "standard_nolp"),
        (ResourceRequirements(cpus=3, memory_gib=8, low_priority=True), "standard_lp"),
        (ResourceRequirements(cpus=8, memory_gib=32), "standard_big_a"),
        (ResourceRequirements(cpus=9, memory_gib=32), "standard_a_wide"),
        (ResourceRequirements(gpus=1), "standard_t4"),
        (ResourceRequirements(gpus=1, memory_gib=100), "standard_a100"),
        (ResourceRequirements(gpus=1, gpu_kind="a100"), "standard_a100"),
        (ResourceRequirements(gpus=2, gpu_kind="A100"), "standard_a100x2"),
        (ResourceRequirements(gpus=1, gpu_kind="A10"), "standard_a10"),
    ],
)
def test_select_vm_size_picks_the_cheapest_fit(req: ResourceRequirements, expected: str) -> None:
    assert select_vm_size(req, CATALOG).name == expected


def test_cpu_only_work_never_gets_a_gpu_size() -> None:
    with pytest.raises(NoFittingVmSizeError) as info:
        select_vm_size(ResourceRequirements(memory_gib=200), CATALOG)

    assert str(info.value) == (
        "No Azure VM size in the catalog fits cpus=1, memory=200 GiB, gpus=0. Closest: "
        "standard_a_wide (16 vCPU, 32 GiB, 0 GPU), standard_big_a (8 vCPU, 32 GiB, 0 GPU), "
        "standard_big_b (8 vCPU, 32 GiB, 0 GPU)."
    )


def test_no_fit_lists_the_sizes_that_miss_by_least() -> None:
    catalog = VmCatalog(
        [
            _size("standard_d_tiny", 1, 1, 0.01),
            _size("standard_e_mem", 1, 16, 0.02),
            _size("standard_c_cheap", 2, 64, 0.05),
            _size("standard_b_mid", 8, 8, 0.20),
            _size("standard_a_pricey", 12, 4, 0.90),
        ]
    )

    with pytest.raises(NoFittingVmSizeError) as info:
        select_vm_size(ResourceRequirements(cpus=16, memory_gib=16), catalog)

    # Misses: c_cheap 14/16 cpus; e_mem 15/16 cpus; b_mid 8/16 + 8/16 and a_pricey 4/16 + 12/16 tie,
    # so the cheaper b_mid is listed; d_tiny 15/16 + 15/16.
    assert str(info.value) == (
        "No Azure VM size in the catalog fits cpus=16, memory=16 GiB, gpus=0. Closest: "
        "standard_c_cheap (2 vCPU, 64 GiB, 0 GPU), standard_e_mem (1 vCPU, 16 GiB, 0 GPU), "
        "standard_b_mid (8 vCPU, 8 GiB, 0 GPU)."
    )


def test_no_fit_for_gpus_considers_only_the_asked_kind() -> None:
    with pytest.raises(NoFittingVmSizeError) as info:
        select_vm_size(ResourceRequirements(gpus=4, gpu_kind="A100"), CATALOG)

    assert str(info.value) == (
        "No Azure VM size in the catalog fits cpus=1, memory=1 GiB, gpus=4, gpu_kind=A100. Closest: "
        "standard_a100x2 (48 vCPU, 440 GiB, 2 A100 GPU), standard_a100 (24 vCPU, 220 GiB, 1 A100 GPU)."
    )


def test_no_fit_when_nothing_is_eligible() -> None:
    catalog = VmCatalog([_size("standard_nolp", 4, 8, 0.15, low_priority_capable=False)])

    with pytest.raises(NoFittingVmSizeError) as info:
        select_vm_size(ResourceRequirements(low_priority=True), catalog)

    assert str(info.value) == (
        "No Azure VM size in the catalog fits cpus=1, memory=1 GiB, gpus=0, low_priority=True. "
        "Closest: none (no size in the catalog is eligible)."
    )


def test_unknown_gpu_kind_lists_the_kinds_in_the_catalog() -> None:
    with pytest.raises(InvalidRequirementsError) as info:
        select_vm_size(ResourceRequirements(gpus=1, gpu_kind="L4"), CATALOG)

    assert str(info.value) == (
        "requirements.gpu_kind 'L4' is not offered by any VM size in the catalog; use one of: A10, A100, T4"
    )


def test_retired_gpu_kind_says_why() -> None:
    with pytest.raises(InvalidRequirementsError) as info:
        select_vm_size(ResourceRequirements(gpus=1, gpu_kind="v100"), CATALOG)

    assert str(info.value) == (
        "requirements.gpu_kind 'V100' is not offered by any VM size in the catalog; "
        "use one of: A10, A100, T4 (V100: retired for the test)"
    )


@pytest.mark.parametrize(
    ("req", "expected"),
    [
        (ResourceRequirements(gpus=1), "standard_nc4as_t4_v3"),
        (ResourceRequirements(gpus=1, gpu_kind="H100"), "standard_nc40ads_h100_v5"),
        (ResourceRequirements(gpus=8, gpu_kind="H100"), "standard_nd96isr_h100_v5"),
        (ResourceRequirements(gpus=1, gpu_kind="A10"), "standard_nv36ads_a10_v5"),
        (ResourceRequirements(gpus=8, memory_gib=1000, gpu_kind="A100"), "standard_nd96amsr_a100_v4"),
    ],
)
def test_select_vm_size_on_the_packaged_catalog(req: ResourceRequirements, expected: str) -> None:
    assert select_vm_size(req).name == expected


def test_shortfalls_name_each_missing_resource() -> None:
    small = CATALOG.get("standard_small")
    t4 = CATALOG.get("standard_t4")

    assert vm_size_shortfalls(small, ResourceRequirements(cpus=2, memory_gib=4)) == []
    assert vm_size_shortfalls(small, ResourceRequirements(cpus=4, memory_gib=6.5, gpus=1)) == [
        "4 vCPU (has 2)",
        "6.5 GiB memory (has 4)",
        "1 GPU (has 0 GPU)",
    ]
    assert vm_size_shortfalls(t4, ResourceRequirements(gpus=1, gpu_kind="A100")) == ["1 A100 GPU (has 1 T4 GPU)"]
    assert vm_size_shortfalls(small, ResourceRequirements(gpus=2, gpu_kind="A100")) == ["2 A100 GPU (has 0 GPU)"]
    assert fits(t4, ResourceRequirements(cpus=4, memory_gib=28, gpus=1, gpu_kind="t4"))
    assert not fits(t4, ResourceRequirements(cpus=4.5))
