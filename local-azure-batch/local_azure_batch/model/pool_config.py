"""Checks on the parts of a pool specification that say what its nodes are: the image, the network, mounts,
user accounts and data disks, as the Batch REST reference (2025-06-01) states their shapes, ranges and conflicts.

Everything accepted is stored and returned on GET (without secrets). Virtual networks and gallery images are
checked for their form only: there is no network and no image here (see the README).
"""

from __future__ import annotations

import re
from typing import Any

from . import validation as v
from .errors import invalid_property, missing_property

ARM_IMAGE = re.compile(
    r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/"
    r"(galleries/[^/]+/images/[^/]+(/versions/[^/]+)?|images/[^/]+)",
    re.IGNORECASE,
)
SHARED_GALLERY = re.compile(r"/SharedGalleries/[^/]+/Images/[^/]+(/Versions/[^/]+)?", re.IGNORECASE)
COMMUNITY_GALLERY = re.compile(r"/CommunityGalleries/[^/]+/Images/[^/]+(/Versions/[^/]+)?", re.IGNORECASE)
SUBNET = re.compile(
    r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/virtualNetworks/[^/]+/subnets/[^/]+",
    re.IGNORECASE,
)
PUBLIC_IP = re.compile(
    r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/publicIPAddresses/[^/]+",
    re.IGNORECASE,
)
# The reason the service gives for a malformed virtualMachineImageId (recorded).
IMAGE_ID_FORMATS = {
    "virtualMachineImageId": (
        "The specified resource id must be of the format /subscriptions/{subscriptionId}/resourceGroups/"
        "{resourceGroupName}/providers/Microsoft.Compute/images/{imageName}, /subscriptions/{subscriptionId}/"
        "resourceGroups/{resourceGroupName}/providers/Microsoft.Compute/galleries/{galleryName}/images/"
        "{galleryImageName}/versions/{galleryImageVersionName}, or /subscriptions/{subscriptionId}/resourceGroups/"
        "{resourceGroupName}/providers/Microsoft.Compute/galleries/{galleryName}/images/{galleryImageName}"
    ),
}
ELEVATION = ("nonadmin", "admin")
MOUNT_KINDS = (
    "azureBlobFileSystemConfiguration",
    "nfsMountConfiguration",
    "cifsMountConfiguration",
    "azureFileShareConfiguration",
)
# Ports the service keeps for itself (inboundNATPools).
RESERVED_BACKEND_PORTS = (29876, 29877)
RESERVED_FRONTEND_PORTS = range(50000, 55001)
MAX_NAT_POOLS = 5
MIN_FRONTEND_RANGE = 40


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid_property(path, value, "The value must be a JSON object.")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid_property(path, value, "The value must be a JSON array.")
    return value


def _string(body: dict[str, Any], name: str, path: str, *, required: bool = True) -> str | None:
    value = body.get(name)
    if value is None or value == "":
        if required:
            raise missing_property(path)
        return None
    if not isinstance(value, str):
        raise invalid_property(path, value, "The value must be a string.")
    return value


def _boolean(body: dict[str, Any], name: str, path: str) -> None:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise invalid_property(path, value, "The value must be true or false.")


def normalize_image_reference(image: Any, path: str) -> None:
    """A marketplace image (publisher, offer, sku [, version]) or exactly one image id."""
    image = _object(image, path)
    image.pop("exactVersion", None)  # read-only: the service reports it, never takes it
    ids = [
        name for name in ("virtualMachineImageId", "sharedGalleryImageId", "communityGalleryImageId") if image.get(name)
    ]
    marketplace = [name for name in ("publisher", "offer", "sku") if image.get(name)]
    if len(ids) > 1 or (ids and (marketplace or image.get("version"))):
        raise invalid_property(
            f"{path}.{ids[-1] if ids else 'version'}",
            image.get(ids[-1]) if ids else image.get("version"),
            "Specify either publisher, offer, sku and version, or one of virtualMachineImageId, "
            "sharedGalleryImageId and communityGalleryImageId.",
        )
    if ids:
        name = ids[0]
        pattern = {"virtualMachineImageId": ARM_IMAGE, "sharedGalleryImageId": SHARED_GALLERY}.get(
            name, COMMUNITY_GALLERY
        )
        value = _string(image, name, f"{path}.{name}")
        if not pattern.fullmatch(value or ""):
            raise invalid_property(name, value, IMAGE_ID_FORMATS.get(name, f"The value is not a valid {name}."))
        return
    for name in ("publisher", "offer", "sku"):
        _string(image, name, f"{path}.{name}")
    image.setdefault("version", "latest")


def normalize_network(network: Any, path: str, subscription_id: str | None = None) -> None:
    network = _object(network, path)
    subnet = _string(network, "subnetId", f"{path}.subnetId", required=False)
    if subnet is not None:
        if not SUBNET.fullmatch(subnet):
            raise invalid_property(
                "subnetId",
                subnet,
                "The subnet id must be of the form /subscriptions/{subscription}/resourceGroups/{group}/providers/"
                "Microsoft.Network/virtualNetworks/{network}/subnets/{subnet}.",
            )
        _same_subscription("subnetId", subnet, subscription_id)
    v.enum(network, "dynamicVNetAssignmentScope", ("none", "job"), "none", f"{path}.dynamicVNetAssignmentScope")
    _boolean(network, "enableAcceleratedNetworking", f"{path}.enableAcceleratedNetworking")
    network.setdefault("enableAcceleratedNetworking", False)
    public = network.get("publicIPAddressConfiguration")
    provision = "batchmanaged"
    if public is not None:
        where = f"{path}.publicIPAddressConfiguration"
        public = _object(public, where)
        provision = (
            v.enum(
                public,
                "provision",
                ("batchmanaged", "usermanaged", "nopublicipaddresses"),
                "batchmanaged",
                f"{where}.provision",
            )
            or "batchmanaged"
        )
        ids = _list(public.get("ipAddressIds"), f"{where}.ipAddressIds")
        if provision == "usermanaged" and not ids:
            raise missing_property(f"{where}.ipAddressIds")
        if provision != "usermanaged" and ids:
            raise invalid_property(
                f"{where}.ipAddressIds", ids[0], "ipAddressIds can only be given when provision is usermanaged."
            )
        for index, item in enumerate(ids):
            if not isinstance(item, str) or not PUBLIC_IP.fullmatch(item):
                raise invalid_property(
                    f"{where}.ipAddressIds[{index}]", item, "The value is not a public IP address id."
                )
            _same_subscription("ipAddressIds", item, subscription_id)
        if provision != "batchmanaged" and subnet is None:
            raise invalid_property(
                f"{where}.provision",
                public["provision"],
                "A pool without Batch managed public IP addresses must be in a virtual network: specify subnetId.",
            )
        for index, family in enumerate(_list(public.get("ipFamilies"), f"{where}.ipFamilies")):
            if not isinstance(family, str) or family.lower() not in ("ipv4", "ipv6"):
                raise invalid_property(f"{where}.ipFamilies[{index}]", family, "The value must be IPv4 or IPv6.")
    endpoints = network.get("endpointConfiguration")
    if endpoints is not None:
        if provision == "nopublicipaddresses":
            raise invalid_property(
                f"{path}.endpointConfiguration",
                "...",
                "A pool without public IP addresses cannot have an endpoint configuration.",
            )
        _endpoints(endpoints, f"{path}.endpointConfiguration")


def _same_subscription(name: str, resource_id: str, subscription_id: str | None) -> None:
    """A resource of another subscription than the account's is refused, as the service refuses a subnet (recorded)."""
    theirs = resource_id.split("/")[2]
    if subscription_id is not None and theirs.lower() != subscription_id.lower():
        raise invalid_property(
            name,
            resource_id,
            f"The specified {name} is in a different subscription and cannot be used with the current Batch account "
            f"in subscription {subscription_id}",
        )


def _endpoints(endpoints: Any, path: str) -> None:
    endpoints = _object(endpoints, path)
    pools = _list(endpoints.get("inboundNATPools"), f"{path}.inboundNATPools")
    if len(pools) > MAX_NAT_POOLS:
        raise invalid_property(f"{path}.inboundNATPools", len(pools), "A pool can have at most 5 inbound NAT pools.")
    ranges: list[tuple[int, int]] = []
    names: set[str] = set()
    for index, nat in enumerate(pools):
        where = f"{path}.inboundNATPools[{index}]"
        nat = _object(nat, where)
        name = _string(nat, "name", f"{where}.name") or ""
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,76}[A-Za-z0-9_]|[A-Za-z0-9]", name) or name.lower() in names:
            raise invalid_property(
                f"{where}.name",
                name,
                "Names are unique in a pool, up to 77 letters, digits, underscores, periods and hyphens, starting "
                "with a letter or digit and ending with a letter, digit or underscore.",
            )
        names.add(name.lower())
        v.enum(nat, "protocol", ("tcp", "udp"), path=f"{where}.protocol")
        v.require(nat, "protocol", f"{where}.protocol")
        backend = v.integer(nat, "backendPort", minimum=1, maximum=65535, path=f"{where}.backendPort")
        if backend is None:
            raise missing_property(f"{where}.backendPort")
        if backend in RESERVED_BACKEND_PORTS:
            raise invalid_property(f"{where}.backendPort", backend, "Ports 29876 and 29877 are reserved.")
        start = v.integer(
            nat, "frontendPortRangeStart", minimum=1, maximum=65534, path=f"{where}.frontendPortRangeStart"
        )
        end = v.integer(nat, "frontendPortRangeEnd", minimum=1, maximum=65534, path=f"{where}.frontendPortRangeEnd")
        if start is None or end is None:
            raise missing_property(f"{where}.frontendPortRange{'Start' if start is None else 'End'}")
        if end - start + 1 < MIN_FRONTEND_RANGE:
            raise invalid_property(f"{where}.frontendPortRangeEnd", end, "Each range must contain at least 40 ports.")
        if any(port in RESERVED_FRONTEND_PORTS for port in (start, end)) or (start < 50000 and end > 55000):
            raise invalid_property(f"{where}.frontendPortRangeStart", start, "Ports 50000 to 55000 are reserved.")
        if any(start <= other_end and other_start <= end for other_start, other_end in ranges):
            raise invalid_property(f"{where}.frontendPortRangeStart", start, "Ranges within a pool cannot overlap.")
        ranges.append((start, end))
        priorities: set[int] = set()
        for rule_index, rule in enumerate(
            _list(nat.get("networkSecurityGroupRules"), f"{where}.networkSecurityGroupRules")
        ):
            rule_path = f"{where}.networkSecurityGroupRules[{rule_index}]"
            rule = _object(rule, rule_path)
            priority = v.integer(rule, "priority", minimum=150, maximum=4096, path=f"{rule_path}.priority")
            if priority is None:
                raise missing_property(f"{rule_path}.priority")
            if priority in priorities:
                raise invalid_property(
                    f"{rule_path}.priority", priority, "Rule priorities within a pool must be unique."
                )
            priorities.add(priority)
            v.enum(rule, "access", ("allow", "deny"), path=f"{rule_path}.access")
            v.require(rule, "access", f"{rule_path}.access")
            _string(rule, "sourceAddressPrefix", f"{rule_path}.sourceAddressPrefix")
            # Recorded: a rule without source ports comes back with ["*"] (test_batch_compute_node_extensions).
            rule.setdefault("sourcePortRanges", ["*"])


def normalize_mounts(mounts: Any, path: str) -> None:
    seen: set[str] = set()
    for index, mount in enumerate(_list(mounts, path)):
        where = f"{path}[{index}]"
        mount = _object(mount, where)
        kinds = [name for name in MOUNT_KINDS if mount.get(name) is not None]
        if len(kinds) != 1:
            raise invalid_property(
                where,
                ", ".join(kinds) or "none",
                "Each mount configuration specifies exactly one of azureBlobFileSystemConfiguration, "
                "nfsMountConfiguration, cifsMountConfiguration and azureFileShareConfiguration.",
            )
        kind = kinds[0]
        config = _object(mount[kind], f"{where}.{kind}")
        required = {
            "azureBlobFileSystemConfiguration": ("accountName", "containerName", "relativeMountPath"),
            "nfsMountConfiguration": ("source", "relativeMountPath"),
            "cifsMountConfiguration": ("username", "source", "password", "relativeMountPath"),
            "azureFileShareConfiguration": ("accountName", "azureFileUrl", "accountKey", "relativeMountPath"),
        }[kind]
        for name in required:
            _string(config, name, f"{where}.{kind}.{name}")
        if kind == "azureBlobFileSystemConfiguration":
            secrets = [name for name in ("accountKey", "sasKey", "identityReference") if config.get(name)]
            if len(secrets) != 1:
                raise invalid_property(
                    f"{where}.{kind}",
                    ", ".join(secrets) or "none",
                    "accountKey, sasKey and identityReference are mutually exclusive and one of them must be given.",
                )
        relative = str(config["relativeMountPath"]).strip("/")
        if str(config["relativeMountPath"]).startswith("/") or ".." in relative.split("/") or not relative:
            raise invalid_property(
                f"{where}.{kind}.relativeMountPath",
                config["relativeMountPath"],
                "The path is relative to the node's mount directory ($AZ_BATCH_NODE_MOUNTS_DIR).",
            )
        if relative in seen:
            raise invalid_property(
                f"{where}.{kind}.relativeMountPath", relative, "Each mount needs a relativeMountPath of its own."
            )
        seen.add(relative)


def normalize_user_accounts(accounts: Any, path: str, *, windows: bool) -> None:
    names: set[str] = set()
    for index, account in enumerate(_list(accounts, path)):
        where = f"{path}[{index}]"
        account = _object(account, where)
        name = _string(account, "name", f"{where}.name") or ""
        if len(name) > 20:
            raise invalid_property(f"{where}.name", name, "A user name has at most 20 characters.")
        if name.lower() in names:
            raise invalid_property(f"{where}.name", name, "User account names within a pool must be unique.")
        names.add(name.lower())
        _string(account, "password", f"{where}.password")
        v.enum(account, "elevationLevel", ELEVATION, "nonadmin", f"{where}.elevationLevel")
        linux = account.get("linuxUserConfiguration")
        if linux is not None:
            linux = _object(linux, f"{where}.linuxUserConfiguration")
            uid = v.integer(linux, "uid", minimum=0, path=f"{where}.linuxUserConfiguration.uid")
            gid = v.integer(linux, "gid", minimum=0, path=f"{where}.linuxUserConfiguration.gid")
            if (uid is None) != (gid is None):
                raise invalid_property(
                    f"{where}.linuxUserConfiguration", "...", "The uid and gid properties must be specified together."
                )
        windows_config = account.get("windowsUserConfiguration")
        if windows_config is not None:
            v.enum(
                _object(windows_config, f"{where}.windowsUserConfiguration"),
                "loginMode",
                ("batch", "interactive"),
                path=f"{where}.windowsUserConfiguration.loginMode",
            )
        elif windows:
            account["windowsUserConfiguration"] = {"loginMode": "batch"}


def normalize_data_disks(disks: Any, path: str) -> None:
    luns: set[int] = set()
    for index, disk in enumerate(_list(disks, path)):
        where = f"{path}[{index}]"
        disk = _object(disk, where)
        lun = v.integer(disk, "lun", minimum=0, maximum=63, path=f"{where}.lun")
        if lun is None:
            raise missing_property(f"{where}.lun")
        if lun in luns:
            raise invalid_property(f"{where}.lun", lun, "The lun must be unique among the data disks of a pool.")
        luns.add(lun)
        if v.integer(disk, "diskSizeGB", minimum=1, path=f"{where}.diskSizeGB") is None:
            raise missing_property(f"{where}.diskSizeGB")
        v.enum(disk, "caching", ("none", "readonly", "readwrite"), "none", f"{where}.caching")
        managed = disk.setdefault("managedDisk", {})
        v.enum(
            _object(managed, f"{where}.managedDisk"),
            "storageAccountType",
            ("standard_lrs", "premium_lrs", "standardssd_lrs"),
            "standard_lrs",
            f"{where}.managedDisk.storageAccountType",
        )


def user_names(spec: dict[str, Any]) -> set[str]:
    return {str(account.get("name", "")).lower() for account in spec.get("userAccounts") or []}
