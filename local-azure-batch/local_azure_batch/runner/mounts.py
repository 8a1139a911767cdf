"""A node's mounts (``mountConfiguration``) under its mount root, ``$AZ_BATCH_NODE_MOUNTS_DIR/<relativeMountPath>``.

There is no blobfuse, NFS or SMB client here, so each mount is stood in for by what is on this machine:

- a Blob container (``azureBlobFileSystemConfiguration``) is **copied** into the mount directory when the node
  starts, from the storage account's Blob endpoint (``--blob-endpoint ACCOUNT=URL``, e.g. Azurite's) with the
  mount's account key or SAS token: a snapshot, so what tasks write there is not uploaded and blobs added later
  do not appear;
- an NFS export, Azure Files share or CIFS share is a **symbolic link** to a local directory given for its source
  (``--mount-source SOURCE=DIR``); an NFS export on this machine (``localhost:/path`` or ``127.0.0.1:/path``) needs
  none.

A mount that cannot be stood in for fails the node as a failed mount fails a Batch node: it becomes unusable,
with an error saying which mount and why.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from azure.core.exceptions import AzureError
from azure.storage.blob.aio import ContainerClient

LOCAL_HOSTS = ("localhost", "127.0.0.1")


class MountError(Exception):
    """A mount the node could not make; ``details`` name it (its path and source)."""

    def __init__(self, message: str, details: Sequence[tuple[str, str]]) -> None:
        super().__init__(message)
        self.message = message
        self.details = list(details)


async def mount_all(
    configurations: Sequence[Mapping[str, Any]],
    mounts_dir: Path,
    *,
    blob_endpoints: Mapping[str, str],
    mount_sources: Mapping[str, str],
) -> None:
    mounts_dir.mkdir(parents=True, exist_ok=True)
    for configuration in configurations:
        kind, config = next(iter(configuration.items()))
        target = mounts_dir / str(config["relativeMountPath"]).strip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "azureBlobFileSystemConfiguration":
            await _copy_container(config, target, blob_endpoints)
        else:
            source = str(config.get("azureFileUrl") or config.get("source"))
            _link(source, target, _details(config, source), mount_sources, kind == "nfsMountConfiguration")


def _details(config: Mapping[str, Any], source: str) -> list[tuple[str, str]]:
    return [("RelativeMountPath", str(config["relativeMountPath"])), ("Source", source)]


async def _copy_container(config: Mapping[str, Any], target: Path, endpoints: Mapping[str, str]) -> None:
    account, container = str(config["accountName"]), str(config["containerName"])
    details = _details(config, f"{account}/{container}")
    if config.get("identityReference"):
        raise MountError(
            "identityReference (managed identity) cannot be used with the local Batch service: give accountKey or "
            "sasKey.",
            details,
        )
    endpoint = endpoints.get(account)
    if endpoint is None:
        raise MountError(
            f"No Blob endpoint is known for storage account {account!r}: start the local Batch service with "
            f"--blob-endpoint {account}=<url> (or PUT it to /_emulator/storage).",
            details,
        )
    endpoint = endpoint.rstrip("/")
    if config.get("sasKey"):
        client = ContainerClient.from_container_url(f"{endpoint}/{container}?{str(config['sasKey']).lstrip('?')}")
    else:
        credential = {"account_name": account, "account_key": str(config.get("accountKey"))}
        client = ContainerClient(endpoint, container, credential=credential)
    target.mkdir(parents=True, exist_ok=True)
    try:
        async with client:
            async for blob in client.list_blobs():
                local = (target / blob.name).resolve()
                if not local.is_relative_to(target.resolve()):
                    continue  # a blob name that climbs out of the mount is not one a file system would show
                local.parent.mkdir(parents=True, exist_ok=True)
                stream = await client.download_blob(blob.name)
                with open(local, "wb") as out:
                    async for chunk in stream.chunks():
                        out.write(chunk)
    except AzureError as exc:
        shutil.rmtree(target, ignore_errors=True)
        first_line = str(getattr(exc, "message", None) or exc).split("\n")[0]
        raise MountError(f"Mounting the Blob container failed: {first_line}", details) from None


def _link(source: str, target: Path, details: list[tuple[str, str]], sources: Mapping[str, str], nfs: bool) -> None:
    local = sources.get(source)
    if local is None and nfs:
        host, _, path = source.partition(":")
        if host in LOCAL_HOSTS and path.startswith("/"):
            local = path
    if local is None:
        raise MountError(
            f"{source} cannot be reached from this machine: start the local Batch service with "
            f"--mount-source {source}=<local directory> (or PUT it to /_emulator/storage).",
            details,
        )
    if not Path(local).is_dir():
        raise MountError(f"The local directory {local} standing for {source} does not exist.", details)
    if target.is_symlink() or target.exists():
        target.unlink()
    target.symlink_to(Path(local).resolve(), target_is_directory=True)
