"""Task and node files: list, properties (HEAD), download with ``ocp-range``, delete."""

from __future__ import annotations

import os
import re
import shutil
import stat
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


def _resolve(base: Path, relative: str) -> tuple[Path, os.stat_result]:
    """The file or directory ``relative`` names under ``base``, and its stat; never anything outside ``base``.

    Walks the few components below ``base`` with lstat; only a ``..`` or a symbolic link (a task may make
    one) needs the full resolution of the path to check where it leads.
    """
    parts = [part for part in relative.replace("\\", "/").split("/") if part not in ("", ".")]
    path = str(base)
    try:
        if ".." in parts:
            return _resolve_links(base, path, parts)
        st = os.stat(path) if not parts else None
        for part in parts:
            path = os.path.join(path, part)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                return _resolve_links(base, str(base), parts)
    except (FileNotFoundError, NotADirectoryError):
        raise not_found("File") from None
    assert st is not None
    return Path(path), st


def _resolve_links(base: Path, base_text: str, parts: list[str]) -> tuple[Path, os.stat_result]:
    root = os.path.realpath(base_text)
    target = os.path.realpath(os.path.join(root, *parts))
    if target != root and not target.startswith(root + os.sep):
        raise not_found("File")
    return Path(target), os.stat(target)


def _properties(path: str, st: os.stat_result) -> dict[str, Any]:
    return {
        "creationTime": iso(datetime.fromtimestamp(creation_time(path, st), timezone.utc)),
        "lastModified": iso(datetime.fromtimestamp(st.st_mtime, timezone.utc)),
        "contentLength": str(st.st_size),
        "contentType": _content_type(path),
        "fileMode": format(st.st_mode, "o"),
    }


def _content_type(path: str | Path) -> str:
    return "text/plain" if str(path).endswith((".txt", ".log")) else "application/octet-stream"


def _listing(base: Path, prefix_url: str, recursive: bool) -> list[dict[str, Any]]:
    if not recursive:
        with os.scandir(base) as entries:
            return [_entry(entry.name, entry, prefix_url) for entry in sorted(entries, key=lambda entry: entry.name)]
    out: list[dict[str, Any]] = []
    for root, dirs, files in os.walk(base):
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            full = os.path.join(root, name)
            out.append(_entry(os.path.relpath(full, base).replace(os.sep, "/"), full, prefix_url))
    return out


def _entry(name: str, full: os.DirEntry[str] | str, prefix_url: str) -> dict[str, Any]:
    path = full.path if isinstance(full, os.DirEntry) else full
    try:
        st = full.stat() if isinstance(full, os.DirEntry) else os.stat(full)
    except FileNotFoundError:  # deleted between listing and stat
        return {"name": name, "url": f"{prefix_url}/{name}", "isDirectory": False, "properties": {"contentLength": "0"}}
    entry: dict[str, Any] = {"name": name, "url": f"{prefix_url}/{name}", "isDirectory": stat.S_ISDIR(st.st_mode)}
    if not entry["isDirectory"]:
        entry["properties"] = _properties(path, st)
    return entry


def _file_headers(request: web.Request, path: Path, st: os.stat_result, url_path: str) -> dict[str, str]:
    url = f"{wire.base_url(request)}{url_path}"
    is_dir = stat.S_ISDIR(st.st_mode)
    headers = {
        "Content-Type": "application/octet-stream" if is_dir else _content_type(path),
        "Last-Modified": rfc1123(datetime.fromtimestamp(st.st_mtime, timezone.utc)),
        "ocp-creation-time": rfc1123(datetime.fromtimestamp(creation_time(str(path), st), timezone.utc)),
        "ocp-batch-file-isdirectory": "True" if is_dir else "False",
        "ocp-batch-file-url": quote(url, safe=""),
        "ocp-batch-file-mode": format(st.st_mode, "o"),
    }
    return {**wire.common_headers(request), **headers}


async def _list(request: web.Request, base: Path, prefix: str) -> web.Response:
    recursive = request.query.get("recursive", "false").lower() == "true"
    items = _listing(base, f"{wire.base_url(request)}{prefix}", recursive)
    return wire.list_response(request, items, wire.plain, "files")


async def _head(request: web.Request, base: Path, prefix: str, relative: str) -> web.StreamResponse:
    path, st = _resolve(base, relative)
    headers = _file_headers(request, path, st, f"{prefix}/{relative}")
    return await wire.headers_only(request, 200, headers, st.st_size if stat.S_ISREG(st.st_mode) else 0)


async def _get(request: web.Request, base: Path, prefix: str, relative: str) -> web.StreamResponse:
    path, st = _resolve(base, relative)
    if stat.S_ISDIR(st.st_mode):
        raise conflict(
            "FileIsDirectory",
            "The specified path is a directory; list it with the files API instead of downloading it.",
        )
    size = st.st_size
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
    headers = _file_headers(request, path, st, f"{prefix}/{relative}")
    with open(path, "rb") as handle:
        handle.seek(start)
        if length <= CHUNK:
            # A log tail's read: one answer, not a stream. A file that shrank under us is answered short.
            return web.Response(status=200, body=handle.read(length), headers=headers)
        response = web.StreamResponse(status=200, headers=headers)
        response.content_length = length
        await response.prepare(request)
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
    path, st = _resolve(base, relative)
    if stat.S_ISDIR(st.st_mode):
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
