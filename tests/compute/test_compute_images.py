from __future__ import annotations

import pytest

from airflow_provider_azbatch.compute.errors import RetiredImageFamilyError, UnknownImageFamilyError
from airflow_provider_azbatch.compute.images import (
    PoolImage,
    check_image_family,
    known_image_families,
    pool_image,
)

JAMMY = PoolImage("canonical", "0001-com-ubuntu-server-jammy", "22_04-lts", "latest", "batch.node.ubuntu 22.04")
HPC_2204 = PoolImage("microsoft-dsvm", "ubuntu-hpc", "2204", "latest", "batch.node.ubuntu 22.04")
NOBLE = PoolImage("canonical", "ubuntu-24_04-lts", "server", "latest", "batch.node.ubuntu 24.04")
HPC_2404 = PoolImage("microsoft-dsvm", "ubuntu-hpc", "2404", "latest", "batch.node.ubuntu 24.04")


@pytest.mark.parametrize(
    ("family", "containers", "gpu", "expected"),
    [
        ("ubuntu-22.04", False, False, JAMMY),
        ("ubuntu-22.04", True, False, HPC_2204),
        ("ubuntu-22.04", False, True, HPC_2204),
        ("ubuntu-22.04", True, True, HPC_2204),
        ("ubuntu-24.04", False, False, NOBLE),
        ("ubuntu-24.04", True, False, HPC_2404),
        ("ubuntu-24.04", False, True, HPC_2404),
        (" Ubuntu-24.04 ", False, False, NOBLE),
    ],
)
def test_pool_image(family: str, containers: bool, gpu: bool, expected: PoolImage) -> None:
    assert pool_image(family, containers=containers, gpu=gpu) == expected


def test_default_family_is_ubuntu_22_04() -> None:
    assert pool_image() == JAMMY


def test_image_reference_is_the_rest_shape() -> None:
    assert HPC_2204.image_reference() == {
        "publisher": "microsoft-dsvm",
        "offer": "ubuntu-hpc",
        "sku": "2204",
        "version": "latest",
    }


def test_known_image_families() -> None:
    assert known_image_families() == ("ubuntu-22.04", "ubuntu-24.04")
    assert check_image_family("UBUNTU-22.04") == "ubuntu-22.04"


def test_unknown_family_lists_the_known_ones() -> None:
    with pytest.raises(UnknownImageFamilyError) as info:
        pool_image("windows-2022")

    assert str(info.value) == (
        "requirements.os_image 'windows-2022' is not a known image family; use one of: ubuntu-22.04, ubuntu-24.04"
    )


def test_retired_family_says_when_and_what_to_use() -> None:
    with pytest.raises(RetiredImageFamilyError) as info:
        pool_image("ubuntu-20.04", containers=True)

    assert isinstance(info.value, UnknownImageFamilyError)
    assert isinstance(info.value, ValueError)
    assert str(info.value) == (
        "requirements.os_image 'ubuntu-20.04' is retired: Azure Batch ended support for the "
        "batch.node.ubuntu 20.04 node agent on 2025-04-23; use one of: ubuntu-22.04, ubuntu-24.04"
    )
