from __future__ import annotations

import pytest

from airflow_provider_azbatch.compute.errors import (
    InvalidPoolSpecError,
    RetiredImageFamilyError,
    UnknownImageFamilyError,
)
from airflow_provider_azbatch.compute.images import (
    PoolImage,
    check_image_family,
    end_of_support,
    known_image_families,
    pool_image,
)

JAMMY = PoolImage("canonical", "0001-com-ubuntu-server-jammy", "22_04-lts", "latest", "batch.node.ubuntu 22.04")
HPC_2204 = PoolImage("microsoft-dsvm", "ubuntu-hpc", "2204", "latest", "batch.node.ubuntu 22.04", containers=True)
NOBLE = PoolImage("canonical", "ubuntu-24_04-lts", "server", "latest", "batch.node.ubuntu 24.04")
HPC_2404 = PoolImage("microsoft-dsvm", "ubuntu-hpc", "2404", "latest", "batch.node.ubuntu 24.04", containers=True)


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


def test_default_family_is_ubuntu_24_04_as_22_04_support_ends_in_2027() -> None:
    assert pool_image() == NOBLE
    assert end_of_support("batch.node.ubuntu 24.04") is None
    assert end_of_support("batch.node.ubuntu 22.04") == (
        "Azure Batch ends support for the batch.node.ubuntu 22.04 node agent on 2027-06-30: after that, creating or "
        "growing its pools may fail and existing ones may be scaled to zero "
        "(https://github.com/Azure/Batch/issues/200). Move to ubuntu-24.04"
    )


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


GALLERY = (
    "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/images/providers/Microsoft.Compute/"
    "galleries/corp/images/ubuntu-hardened/versions/2026.11.0"
)


def test_a_marketplace_image_at_a_pinned_version() -> None:
    image = PoolImage.marketplace(
        "canonical",
        "ubuntu-24_04-lts",
        "server",
        version="24.04.202611010",
        node_agent_sku_id="batch.node.ubuntu 24.04",
    )
    assert image.source == "marketplace"
    assert image.image_reference() == {
        "publisher": "canonical",
        "offer": "ubuntu-24_04-lts",
        "sku": "server",
        "version": "24.04.202611010",
    }


@pytest.mark.parametrize(
    ("image_id", "field"),
    [
        (GALLERY, "virtualMachineImageId"),
        (GALLERY.rsplit("/versions/", 1)[0], "virtualMachineImageId"),
        (
            "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/images/providers/Microsoft.Compute/"
            "images/golden",
            "virtualMachineImageId",
        ),
        ("/SharedGalleries/corp-1234/Images/ubuntu/Versions/latest", "sharedGalleryImageId"),
        ("/CommunityGalleries/public-5678/Images/ubuntu/Versions/1.0.0", "communityGalleryImageId"),
    ],
)
def test_gallery_and_custom_images_by_id(image_id: str, field: str) -> None:
    image = PoolImage.gallery(image_id, node_agent_sku_id="batch.node.ubuntu 24.04", containers=True)
    assert image.image_reference() == {field: image_id}
    assert image.containers is True
    assert not image.is_windows


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"image_id": "/subscriptions/x/images/y", "node_agent_sku_id": "batch.node.ubuntu 24.04"},
            "image.image_id '/subscriptions/x/images/y' is not an image id: give an Azure Compute Gallery image",
        ),
        (
            {"image_id": GALLERY, "node_agent_sku_id": "ubuntu 24.04"},
            "image.node_agent_sku_id must be the Batch node agent SKU matching the image, such as "
            "'batch.node.ubuntu 24.04'",
        ),
        (
            {
                "publisher": "canonical",
                "offer": "x",
                "sku": "y",
                "image_id": GALLERY,
                "node_agent_sku_id": "batch.node.ubuntu 24.04",
            },
            "image: give either a marketplace image (publisher, offer, sku, version) or image_id, not both",
        ),
        (
            {
                "publisher": "canonical",
                "offer": "ubuntu 24",
                "sku": "y",
                "node_agent_sku_id": "batch.node.ubuntu 24.04",
            },
            "image.offer must be a marketplace image's offer (no spaces), got 'ubuntu 24'",
        ),
    ],
)
def test_bad_images_are_refused_naming_the_field(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidPoolSpecError) as info:
        PoolImage(**kwargs)
    assert str(info.value).startswith(message)


def test_a_windows_node_agent_is_recognised() -> None:
    image = PoolImage.marketplace(
        "microsoftwindowsserver", "windowsserver", "2022-datacenter", node_agent_sku_id="batch.node.windows amd64"
    )
    assert image.is_windows
