"""Pool images: marketplace images (families the provider knows, or any, at a pinned version), Azure Compute
Gallery and custom images, each with the Batch node agent SKU that must match it.

Plain pools use Canonical's Ubuntu Server image. Pools that run containers or use GPUs use
``microsoft-dsvm`` / ``ubuntu-hpc``: Canonical's image has neither a container runtime nor NVIDIA
drivers, and ubuntu-hpc is the Marketplace image the Batch container docs list for Linux container
pools, shipping Docker-compatible Moby, NVIDIA drivers and the NVIDIA container toolkit. ubuntu-hpc
is a Hyper-V generation 2 image; every size in the packaged catalog supports generation 2.

The default family is Ubuntu 24.04: Azure Batch ends support for the ``batch.node.ubuntu 22.04`` node agent
on 2027-06-30 (https://github.com/Azure/Batch/issues/200), after which creating or growing such pools may fail
and existing ones may be scaled to zero.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_provider_azbatch.compute.errors import (
    InvalidPoolSpecError,
    RetiredImageFamilyError,
    UnknownImageFamilyError,
)

# /subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Compute/galleries/<g>/images/<def>[/versions/<v>]
# or a managed image: /subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Compute/images/<name>
_ARM_IMAGE = re.compile(
    r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/"
    r"(galleries/[^/]+/images/[^/]+(/versions/[^/]+)?|images/[^/]+)",
    re.IGNORECASE,
)
_SHARED_GALLERY = re.compile(r"/SharedGalleries/[^/]+/Images/[^/]+(/Versions/[^/]+)?", re.IGNORECASE)
_COMMUNITY_GALLERY = re.compile(r"/CommunityGalleries/[^/]+/Images/[^/]+(/Versions/[^/]+)?", re.IGNORECASE)
_NODE_AGENT = re.compile(r"batch\.node\.\S.*", re.IGNORECASE)


@dataclass(frozen=True)
class PoolImage:
    """A Batch ``imageReference`` plus the node agent SKU that must match it.

    Either a marketplace image (``publisher``, ``offer``, ``sku``, ``version``: ``latest`` or a pinned
    version such as ``22.04.202505010``) or an image id (``image_id``): an Azure Compute Gallery image or image
    version, or a managed image, by ARM resource id; a direct shared gallery image (``/SharedGalleries/...``)
    or a community gallery image (``/CommunityGalleries/...``). ``containers``: the image has a
    Docker-compatible container runtime (needed by tasks that run in containers; the provider's container
    images have one).
    """

    publisher: str = ""
    offer: str = ""
    sku: str = ""
    version: str = "latest"
    node_agent_sku_id: str = ""
    image_id: str | None = None
    containers: bool = False

    @classmethod
    def marketplace(
        cls,
        publisher: str,
        offer: str,
        sku: str,
        *,
        node_agent_sku_id: str,
        version: str = "latest",
        containers: bool = False,
    ) -> PoolImage:
        """A marketplace image, e.g. ``PoolImage.marketplace("canonical", "ubuntu-24_04-lts", "server",
        version="24.04.202506030", node_agent_sku_id="batch.node.ubuntu 24.04")``."""
        return cls(publisher, offer, sku, version, node_agent_sku_id, containers=containers)

    @classmethod
    def gallery(cls, image_id: str, *, node_agent_sku_id: str, containers: bool = False) -> PoolImage:
        """An Azure Compute Gallery (or managed, shared or community gallery) image by its id."""
        return cls(node_agent_sku_id=node_agent_sku_id, image_id=image_id, containers=containers)

    def __post_init__(self) -> None:
        if not isinstance(self.node_agent_sku_id, str) or not _NODE_AGENT.fullmatch(self.node_agent_sku_id.strip()):
            raise InvalidPoolSpecError(
                f"image.node_agent_sku_id must be the Batch node agent SKU matching the image, such as "
                f"'batch.node.ubuntu 24.04' (the Batch 'list supported images' call lists them), got "
                f"{self.node_agent_sku_id!r}"
            )
        if not isinstance(self.containers, bool):
            raise InvalidPoolSpecError(f"image.containers must be True or False, got {self.containers!r}")
        if self.image_id is not None:
            if self.publisher or self.offer or self.sku or self.version != "latest":
                raise InvalidPoolSpecError(
                    "image: give either a marketplace image (publisher, offer, sku, version) or image_id, not both"
                )
            if not isinstance(self.image_id, str) or not (
                _ARM_IMAGE.fullmatch(self.image_id)
                or _SHARED_GALLERY.fullmatch(self.image_id)
                or _COMMUNITY_GALLERY.fullmatch(self.image_id)
            ):
                raise InvalidPoolSpecError(
                    f"image.image_id {self.image_id!r} is not an image id: give an Azure Compute Gallery image "
                    "(/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/galleries/<gallery>/"
                    "images/<definition>[/versions/<version>]), a managed image "
                    "(.../providers/Microsoft.Compute/images/<name>), /SharedGalleries/<name>/Images/<image>/"
                    "Versions/<version> or /CommunityGalleries/<name>/Images/<image>/Versions/<version>"
                )
            return
        for name in ("publisher", "offer", "sku", "version"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value):
                raise InvalidPoolSpecError(
                    f"image.{name} must be a marketplace image's {name} (no spaces), got {value!r}"
                )

    @property
    def source(self) -> str:
        """Which ``imageReference`` field names the image: ``marketplace``, ``virtualMachineImageId``, ..."""
        if self.image_id is None:
            return "marketplace"
        if _SHARED_GALLERY.fullmatch(self.image_id):
            return "sharedGalleryImageId"
        if _COMMUNITY_GALLERY.fullmatch(self.image_id):
            return "communityGalleryImageId"
        return "virtualMachineImageId"

    @property
    def is_windows(self) -> bool:
        return self.node_agent_sku_id.strip().lower().startswith("batch.node.windows")

    def image_reference(self) -> dict[str, str]:
        """The REST ``imageReference`` object."""
        if self.image_id is not None:
            return {self.source: self.image_id}
        return {"publisher": self.publisher, "offer": self.offer, "sku": self.sku, "version": self.version}

    def describe(self) -> str:
        if self.image_id is not None:
            return f"{self.image_id} ({self.node_agent_sku_id})"
        return f"{self.publisher}:{self.offer}:{self.sku}:{self.version} ({self.node_agent_sku_id})"


@dataclass(frozen=True)
class _ImageFamily:
    plain: PoolImage
    accelerated: PoolImage


_FAMILIES: dict[str, _ImageFamily] = {
    "ubuntu-22.04": _ImageFamily(
        plain=PoolImage("canonical", "0001-com-ubuntu-server-jammy", "22_04-lts", "latest", "batch.node.ubuntu 22.04"),
        accelerated=PoolImage(
            "microsoft-dsvm", "ubuntu-hpc", "2204", "latest", "batch.node.ubuntu 22.04", containers=True
        ),
    ),
    "ubuntu-24.04": _ImageFamily(
        plain=PoolImage("canonical", "ubuntu-24_04-lts", "server", "latest", "batch.node.ubuntu 24.04"),
        accelerated=PoolImage(
            "microsoft-dsvm", "ubuntu-hpc", "2404", "latest", "batch.node.ubuntu 24.04", containers=True
        ),
    ),
}

# Kept so that asking for them explains what happened instead of calling the name unknown.
_RETIRED: dict[str, str] = {
    "ubuntu-20.04": "Azure Batch ended support for the batch.node.ubuntu 20.04 node agent on 2025-04-23",
}

# Node agents with an announced end of support: pools using them are warned about.
_END_OF_SUPPORT: dict[str, str] = {
    "batch.node.ubuntu 22.04": "2027-06-30",
}

DEFAULT_IMAGE_FAMILY = "ubuntu-24.04"


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


def end_of_support(node_agent_sku_id: str) -> str | None:
    """A warning for a node agent whose Batch support ends (with the date and what to move to), else None."""
    date = _END_OF_SUPPORT.get(node_agent_sku_id.strip().lower())
    if date is None:
        return None
    return (
        f"Azure Batch ends support for the {node_agent_sku_id} node agent on {date}: after that, creating or growing "
        "its pools may fail and existing ones may be scaled to zero (https://github.com/Azure/Batch/issues/200). "
        "Move to ubuntu-24.04"
    )
