"""Task and node files: list, properties (HEAD), download with ``ocp-range``, delete."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp import web

from local_azure_batch.model.clock import iso, rfc1123
from local_azure_batch.model.errors import BatchServiceError, conflict, not_found
from local_azure_batch.model.service import BatchService
from local_azure_batch.runner.process import creation_time

from . import wire
from .routing import NODE, TASK, RouteTable

_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
CHUNK = 256 * 1024


def _resolve(base: Path, relative: str) -> Path:
    relative = relative.replace("\\", "/").strip("/")
    target = (base / relative).resolve() if relative else base.resolve()
    if target != base.resolve() and base.resolve() not in target.parents:
        raise not_found("File")
    if not target.exists():
        raise not_found("File")
    return target


def _properties(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {
        "creationTime": iso(datetime.fromtimestamp(creation_time(path, st), timezone.utc)),
        "lastModified": iso(datetime.fromtimestamp(st.st_mtime, timezone.utc)),
        "contentLength": str(st.st_size),
        "contentType": _content_type(path),
        "fileMode": format(st.st_mode, "o"),
    }


def _content_type(path: Path) -> str:
    return "text/plain" if path.suffix in (".txt", ".log") else "application/octet-stream"


def _listing(base: Path, prefix_url: str, recursive: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if recursive:
        for root, dirs, files in os.walk(base):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                full = Path(root) / name
                out.append(_entry(base, full, prefix_url))
    else:
        for full in sorted(base.iterdir()):
            out.append(_entry(base, full, prefix_url))
    return out


def _entry(base: Path, full: Path, prefix_url: str) -> dict[str, Any]:
    name = full.relative_to(base).as_posix()
    entry: dict[str, Any] = {"name": name, "url": f"{prefix_url}/{name}", "isDirectory": full.is_dir()}
    if not full.is_dir():
        try:
            entry["properties"] = _properties(full)
        except FileNotFoundError:  # deleted between listing and stat
            entry["properties"] = {"contentLength": "0"}
    return entry


def _file_headers(request: web.Request, path: Path, url_path: str) -> dict[str, str]:
    st = path.stat()
    url = f"{wire.base_url(request)}{url_path}"
    headers = {
        "Content-Type": _content_type(path) if path.is_file() else "application/octet-stream",
        "Last-Modified": rfc1123(datetime.fromtimestamp(st.st_mtime, timezone.utc)),
        "ocp-creation-time": rfc1123(datetime.fromtimestamp(creation_time(path, st), timezone.utc)),
        "ocp-batch-file-isdirectory": "True" if path.is_dir() else "False",
        "ocp-batch-file-url": quote(url, safe=""),
        "ocp-batch-file-mode": format(st.st_mode, "o"),
    }
    return {**wire.common_headers(request), **headers}


async def _list(request: web.Request, base: Path, prefix: str) -> web.Response:
    recursive = request.query.get("recursive", "false").lower() == "true"
    items = _listing(base, f"{wire.base_url(request)}{prefix}", recursive)
    return wire.list_response(request, items, wire.plain, "files")


async def _head(request: web.Request, base: Path, prefix: str, relative: str) -> web.StreamResponse:
    path = _resolve(base, relative)
    headers = _file_headers(request, path, f"{prefix}/{relative}")
    size = path.stat().st_size if path.is_file() else 0
    return await wire.headers_only(request, 200, headers, size)


async def _get(request: web.Request, base: Path, prefix: str, relative: str) -> web.StreamResponse:
    path = _resolve(base, relative)
    if path.is_dir():
        raise conflict(
            "FileIsDirectory",
            "The specified path is a directory; list it with the files API instead of downloading it.",
        )
    size = path.stat().st_size
    start, length = 0, size
    range_header = request.headers.get("ocp-range")
    if range_header:
        match = _RANGE.match(range_header.strip())
        if not match:
            raise BatchServiceError(400, "InvalidRange", "The ocp-range header must look like bytes=<start>-<end>.")
        start = int(match.group(1))
        end = int(match.group(2)) if match.group(2) else size - 1
        if start >= size or end < start:
            raise BatchServiceError(
                416,
                "InvalidRange",
                "The range specified is invalid for the current size of the resource.",
                [("RequestedRange", range_header), ("FileSize", str(size))],
            )
        length = min(end, size - 1) - start + 1
    response = web.StreamResponse(status=200, headers=_file_headers(request, path, f"{prefix}/{relative}"))
    response.content_length = length
    await response.prepare(request)
    with open(path, "rb") as handle:
        handle.seek(start)
        remaining = length
        while remaining > 0:
            chunk = handle.read(min(CHUNK, remaining))
            if not chunk:  # the file shrank under us; close short rather than pad
                break
            remaining -= len(chunk)
            await response.write(chunk)
    await response.write_eof()
    return response


async def _delete(request: web.Request, base: Path, relative: str) -> web.Response:
    path = _resolve(base, relative)
    if path.is_dir():
        if request.query.get("recursive", "false").lower() != "true" and any(path.iterdir()):
            raise conflict(
                "DirectoryNotEmpty",
                "The directory is not empty; delete it with recursive=true to delete its contents.",
            )
        shutil.rmtree(path)
    else:
        path.unlink()
    return wire.empty(request, 200)


def _file_routes(group: str, owner: str, prefix: str, locate: Callable[[BatchService, dict[str, str]], Path]) -> None:
    """The four file operations of a task or a node (``Tasks_ListTaskFiles``, ``Nodes_GetNodeFile``, ...)."""

    def base(service: BatchService, params: dict[str, str]) -> tuple[Path, str]:
        return locate(service, params), prefix.format(**params) + "/files"

    async def list_files(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
        return await _list(request, *base(service, params))

    async def properties(request: web.Request, service: BatchService, params: dict[str, str]) -> web.StreamResponse:
        return await _head(request, *base(service, params), params["filePath"])

    async def download(request: web.Request, service: BatchService, params: dict[str, str]) -> web.StreamResponse:
        return await _get(request, *base(service, params), params["filePath"])

    async def delete(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
        return await _delete(request, base(service, params)[0], params["filePath"])

    file_path = prefix + "/files/{filePath*}"
    routes.add_handler("GET", prefix + "/files", f"{group}_List{owner}Files", list_files)
    routes.add_handler("GET", file_path, f"{group}_Get{owner}File", download)
    routes.add_handler("HEAD", file_path, f"{group}_Get{owner}FileProperties", properties)
    routes.add_handler("DELETE", file_path, f"{group}_Delete{owner}File", delete)


routes = RouteTable()
_file_routes(
    "Tasks", "Task", TASK, lambda service, params: service.tasks.task_directory(params["jobId"], params["taskId"])
)
_file_routes(
    "Nodes", "Node", NODE, lambda service, params: service.tasks.node_directory(params["poolId"], params["nodeId"])
)
