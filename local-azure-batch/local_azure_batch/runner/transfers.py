"""Resource-file downloads and output-file uploads, done against Blob storage as the service does.

Containers are reached through the SAS URLs the task names (``storageContainerUrl``,
``destination.container.containerUrl``); Azurite works like the real storage service here.
"""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, urlsplit, urlunsplit

import aiohttp
from azure.core.exceptions import AzureError
from azure.storage.blob import ContentSettings
from azure.storage.blob.aio import BlobClient, ContainerClient

_UNSUPPORTED_IDENTITY = (
    "identityReference (managed identity) cannot be used with the local Batch service: give a SAS URL instead."
)


class TransferError(Exception):
    def __init__(self, category: str, code: str, message: str, details: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.failure_info: dict[str, Any] = {"category": category, "code": code, "message": message}
        if details:
            self.failure_info["details"] = [{"name": name, "value": value} for name, value in details]


class TransferAgent(Protocol):
    async def download_resource_files(self, resource_files: Sequence[Mapping[str, Any]], working_dir: Path) -> None: ...

    async def upload_output_files(
        self, output_files: Sequence[Mapping[str, Any]], task_dir: Path, *, succeeded: bool
    ) -> None: ...

    async def upload_blobs(self, container_url: str, directory: str, files: Sequence[tuple[str, bytes]]) -> None: ...


class BlobTransfers:
    async def download_resource_files(self, resource_files: Sequence[Mapping[str, Any]], working_dir: Path) -> None:
        for item in resource_files:
            if item.get("identityReference"):
                raise TransferError("usererror", "ResourceFileIdentityNotSupported", _UNSUPPORTED_IDENTITY)
            if item.get("autoStorageContainerName"):
                raise TransferError(
                    "usererror",
                    "AutoStorageNotConfigured",
                    "autoStorageContainerName needs a linked auto-storage account, which the local Batch service "
                    "does not have: use storageContainerUrl with a SAS URL.",
                )
            target = _inside(working_dir, item.get("filePath") or "")
            if item.get("httpUrl"):
                if not item.get("filePath"):
                    raise TransferError(
                        "usererror",
                        "ResourceFileMissingFilePath",
                        "A resource file with httpUrl needs filePath.",
                    )
                await _download_url(item["httpUrl"], target)
                _chmod(target, item.get("fileMode"))
            elif item.get("storageContainerUrl"):
                await _download_container(
                    item["storageContainerUrl"], item.get("blobPrefix") or "", target, item.get("fileMode")
                )
            else:
                raise TransferError(
                    "usererror",
                    "ResourceFileSourceMissing",
                    "A resource file needs httpUrl or storageContainerUrl.",
                )

    async def upload_output_files(
        self, output_files: Sequence[Mapping[str, Any]], task_dir: Path, *, succeeded: bool
    ) -> None:
        working_dir = task_dir / "wd"
        for item in output_files:
            condition = (item.get("uploadOptions") or {}).get("uploadCondition", "tasksuccess").lower()
            if (condition == "tasksuccess" and not succeeded) or (condition == "taskfailure" and succeeded):
                continue
            container = ((item.get("destination") or {}).get("container")) or {}
            if container.get("identityReference"):
                raise TransferError("usererror", "FileUploadIdentityNotSupported", _UNSUPPORTED_IDENTITY)
            container_url = container.get("containerUrl")
            if not container_url:
                raise TransferError(
                    "usererror",
                    "FileUploadMissingDestination",
                    "An output file needs destination.container.containerUrl.",
                )
            headers = {h["name"].lower(): h.get("value") for h in container.get("uploadHeaders") or [] if h.get("name")}
            for local, blob_name in _match_outputs(working_dir, item.get("filePattern") or "", container.get("path")):
                await _upload(container_url, blob_name, local, headers)

    async def upload_blobs(self, container_url: str, directory: str, files: Sequence[tuple[str, bytes]]) -> None:
        """``files`` (name, content) as blobs ``<directory>/<name>`` of the container (a node's service logs)."""
        for name, data in files:
            await _upload_bytes(container_url, f"{directory.rstrip('/')}/{name}", data)


def _inside(base: Path, relative: str) -> Path:
    target = (base / relative).resolve()
    if not str(target).startswith(str(base.resolve())):
        raise TransferError(
            "usererror", "ResourceFilePathInvalid", f"filePath {relative!r} leaves the working directory."
        )
    return target


def _chmod(path: Path, mode: str | None) -> None:
    if mode:
        os.chmod(path, int(mode, 8))


async def _download_url(url: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            if response.status != 200:
                raise TransferError(
                    "usererror",
                    "BlobDownloadMiscError",
                    f"Downloading a resource file failed with HTTP {response.status}.",
                    [("FilePath", str(target.name)), ("HttpStatusCode", str(response.status))],
                )
            with open(target, "wb") as out:
                async for chunk in response.content.iter_chunked(1 << 16):
                    out.write(chunk)
    except aiohttp.ClientError as exc:
        raise TransferError(
            "usererror", "BlobDownloadMiscError", f"Downloading a resource file failed: {exc}"
        ) from None


async def _download_container(container_url: str, prefix: str, target_dir: Path, mode: str | None) -> None:
    try:
        async with ContainerClient.from_container_url(container_url, retry_total=2) as container:
            async for blob in container.list_blobs(name_starts_with=prefix or None):
                local = _inside(target_dir, blob.name)
                local.parent.mkdir(parents=True, exist_ok=True)
                stream = await container.download_blob(blob.name)
                with open(local, "wb") as out:
                    async for chunk in stream.chunks():
                        out.write(chunk)
                _chmod(local, mode)
    except AzureError as exc:
        status = getattr(exc, "status_code", None)
        code = "ResourceContainerAccessDenied" if status == 403 else "ResourceContainerListMiscError"
        raise TransferError(
            "usererror",
            code,
            f"Reading the resource container failed: {exc.message if hasattr(exc, 'message') else exc}".split("\n")[0],
            [("ContainerUrl", _without_query(container_url))],
        ) from None


def _match_outputs(working_dir: Path, pattern: str, path: str | None) -> list[tuple[Path, str]]:
    """Pairs of (local file, blob name) the way the service maps an output file pattern."""
    has_wildcard = any(ch in pattern for ch in "*?[")
    full = os.path.normpath(os.path.join(working_dir, pattern))
    if not has_wildcard:
        local = Path(full)
        if not local.is_file():
            return []
        return [(local, path or local.name)]
    root = Path(full.split("*")[0].split("?")[0].split("[")[0])
    if not str(root).endswith(os.sep) and not root.is_dir():
        root = root.parent
    matches = [Path(m) for m in glob.glob(full, recursive=True) if Path(m).is_file()]
    out = []
    for local in sorted(matches):
        relative = local.relative_to(root).as_posix() if local.is_relative_to(root) else local.name
        out.append((local, f"{path.rstrip('/')}/{relative}" if path else relative))
    return out


async def _upload(container_url: str, blob_name: str, local: Path, headers: Mapping[str, str | None]) -> None:
    parts = urlsplit(container_url)
    blob_url = urlunsplit(
        (parts.scheme, parts.netloc, parts.path.rstrip("/") + "/" + quote(blob_name), parts.query, "")
    )
    content_settings = ContentSettings(
        content_type=headers.get("content-type") or _guess_type(local.name),
        content_encoding=headers.get("content-encoding"),
    )
    try:
        async with BlobClient.from_blob_url(blob_url, retry_total=2) as blob:
            with open(local, "rb") as data:
                await blob.upload_blob(data, overwrite=True, content_settings=content_settings)
    except AzureError as exc:
        raise TransferError(
            "usererror",
            "FileUploadMiscError",
            f"Uploading output file {local.name} failed: {str(exc).splitlines()[0]}",
            [("FilePattern", local.name), ("ContainerUrl", _without_query(container_url))],
        ) from None


async def _upload_bytes(container_url: str, blob_name: str, data: bytes) -> None:
    parts = urlsplit(container_url)
    blob_url = urlunsplit(
        (parts.scheme, parts.netloc, parts.path.rstrip("/") + "/" + quote(blob_name), parts.query, "")
    )
    try:
        async with BlobClient.from_blob_url(blob_url, retry_total=2) as blob:
            content_settings = ContentSettings(content_type=_guess_type(blob_name))
            await blob.upload_blob(data, overwrite=True, content_settings=content_settings)
    except AzureError as exc:
        raise TransferError(
            "usererror",
            "FileUploadMiscError",
            f"Uploading {blob_name} failed: {str(exc).splitlines()[0]}",
            [("ContainerUrl", _without_query(container_url))],
        ) from None


def _guess_type(name: str) -> str:
    if fnmatch.fnmatch(name, "*.txt") or fnmatch.fnmatch(name, "*.log"):
        return "text/plain"
    return "application/octet-stream"


def _without_query(url: str) -> str:
    """Never echo a SAS token into task failure details."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
