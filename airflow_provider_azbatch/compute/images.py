"""Marketplace images and Batch node agent SKUs per OS image family.

Plain pools use Canonical's Ubuntu Server image. Pools that run containers or use GPUs use
``microsoft-dsvm`` / ``ubuntu-hpc``: Canonical's image has neither a container runtime nor NVIDIA
drivers, and ubuntu-hpc is the Marketplace image the Batch container docs list for Linux container
pools, shipping Docker-compatible Moby, NVIDIA drivers and the NVIDIA container toolkit. ubuntu-hpc
is a Hyper-V generation 2 image; every size in the packaged catalog supports generation 2.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_azbatch.compute.errors import RetiredImageFamilyError, UnknownImageFamilyError


@dataclass(frozen=True)
class PoolImage:
    """A Batch ``imageReference`` plus the node agent SKU that must match it."""

    publisher: str
    offer: str
    sku: str
    version: str
    node_agent_sku_id: str

    def image_reference(self) -> dict[str, str]:
        """The REST ``imageReference`` object."""
        return {"publisher": self.publisher, "offer": self.offer, "sku": self.sku, "version": self.version}


@dataclass(frozen=True)
class _ImageFamily:
    plain: PoolImage
    accelerated: PoolImage


_FAMILIES: dict[str, _ImageFamily] = {
    "ubuntu-22.04": _ImageFamily(
        plain=PoolImage("canonical", "0001-com-ubuntu-server-jammy", "22_04-lts", "latest", "batch.node.ubuntu 22.04"),
        accelerated=PoolImage("microsoft-dsvm", "ubuntu-hpc", "2204", "latest", "batch.node.ubuntu 22.04"),
    ),
    "ubuntu-24.04": _ImageFamily(
        plain=PoolImage("canonical", "ubuntu-24_04-lts", "server", "latest", "batch.node.ubuntu 24.04"),
        accelerated=PoolImage("microsoft-dsvm", "ubuntu-hpc", "2404", "latest", "batch.node.ubuntu 24.04"),
    ),
}

# Kept so that asking for them explains what happened instead of calling the name unknown.
_RETIRED: dict[str, str] = {
    "ubuntu-20.04": "Azure Batch ended support for the batch.node.ubuntu 20.04 node agent on 2025-04-23",
}

DEFAULT_IMAGE_FAMILY = "ubuntu-22.04"


def known_image_families() -> tuple[str, ...]:
    """Image families that can be used today, in sorted order."""
    return tuple(sorted(_FAMILIES))


def check_image_family(name: str) -> str:
    """Return the normalised family name, or raise naming the families that can be used."""
    family = name.strip().lower()
    if family in _FAMILIES:
        return family
    choices = ", ".join(known_image_families())
    if family in _RETIRED:
        raise RetiredImageFamilyError(
            f"requirements.os_image {name!r} is retired: {_RETIRED[family]}; use one of: {choices}"
        )
    raise UnknownImageFamilyError(f"requirements.os_image {name!r} is not a known image family; use one of: {choices}")


def pool_image(os_image: str = DEFAULT_IMAGE_FAMILY, *, containers: bool = False, gpu: bool = False) -> PoolImage:
    """The image for a pool of this family; ``containers`` or ``gpu`` select the ubuntu-hpc variant."""
    family = _FAMILIES[check_image_family(os_image)]
    return family.accelerated if containers or gpu else family.plain
