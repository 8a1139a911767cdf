"""Compute node operations (the node files: files.py; remove nodes and node counts: pools.py).

Statuses and bodies as the service answers them (recorded: ``azure-sdk-assets`` ``test_batch_compute_nodes``,
``..._compute_node_user``, ``..._compute_node_remote_desktop``, ``..._compute_node_extensions``; the REST
reference's examples for the rest): reboot, reimage, deallocate and start 202; scheduling on/off 200; a user
created 201, replaced or deleted 200; no body but ``DataServiceId``, and no ETag (nodes have none).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from aiohttp import web

from local_azure_batch.model.node_operations import UploadedLogs
from local_azure_batch.model.pools import ComputeNode
from local_azure_batch.model.service import BatchService
from local_azure_batch.runner.transfers import TransferError

from . import wire
from .body import read_json
from .routing import NODE, POOL, RouteTable

log = logging.getLogger(__name__)

routes = RouteTable()
USER = NODE + "/users/{userName}"
EXTENSION = NODE + "/extensions/{extensionName}"
EXTENSION_METADATA = "extensions"


def _done(request: web.Request, status: int, headers: dict[str, str] | None = None) -> web.Response:
    return wire.empty(request, status, {"DataServiceId": f"{wire.base_url(request)}{request.path}", **(headers or {})})


@routes.add("GET", POOL + "/nodes", "Nodes_ListNodes")
async def list_nodes(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.entities(request, service.pools.list_nodes(params["poolId"]), "nodes")


@routes.add("GET", NODE, "Nodes_GetNode")
async def get_node(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.entity(request, service.pools.get_node(params["poolId"], params["nodeId"]), "nodes/@Element")


@routes.add("POST", NODE + "/reboot", "Nodes_RebootNode")
async def reboot(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.nodes.reboot(params["poolId"], params["nodeId"], await read_json(request, optional=True))
    return _done(request, 202)


@routes.add("POST", NODE + "/reimage", "Nodes_ReimageNode")
async def reimage(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.nodes.reimage(params["poolId"], params["nodeId"], await read_json(request, optional=True))
    return _done(request, 202)


@routes.add("POST", NODE + "/deallocate", "Nodes_DeallocateNode")
async def deallocate(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.nodes.deallocate(params["poolId"], params["nodeId"], await read_json(request, optional=True))
    return _done(request, 202)


@routes.add("POST", NODE + "/start", "Nodes_StartNode")
async def start(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.nodes.start(params["poolId"], params["nodeId"])
    return _done(request, 202)


@routes.add("POST", NODE + "/disablescheduling", "Nodes_DisableNodeScheduling")
async def disable_scheduling(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.nodes.disable_scheduling(params["poolId"], params["nodeId"], await read_json(request, optional=True))
    return _done(request, 200)


@routes.add("POST", NODE + "/enablescheduling", "Nodes_EnableNodeScheduling")
async def enable_scheduling(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.nodes.enable_scheduling(params["poolId"], params["nodeId"])
    return _done(request, 200)


@routes.add("GET", NODE + "/remoteloginsettings", "Nodes_GetNodeRemoteLoginSettings")
async def remote_login_settings(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    settings = service.nodes.remote_login_settings(params["poolId"], params["nodeId"])
    return wire.json_response(
        request,
        settings,
        "Microsoft.Azure.Batch.Protocol.Entities.RemoteLoginSettings",
        headers={"DataServiceId": f"{wire.base_url(request)}{request.path}"},
    )


@routes.add("POST", NODE + "/users", "Nodes_CreateNodeUser")
async def create_user(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    name = service.nodes.create_user(params["poolId"], params["nodeId"], await read_json(request))
    url = f"{wire.base_url(request)}{request.path}/{quote(name)}"
    return wire.empty(request, 201, {"DataServiceId": url, "Location": url})


@routes.add("PUT", USER, "Nodes_ReplaceNodeUser")
async def replace_user(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.nodes.replace_user(params["poolId"], params["nodeId"], params["userName"], await read_json(request))
    return _done(request, 200)


@routes.add("DELETE", USER, "Nodes_DeleteNodeUser")
async def delete_user(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.nodes.delete_user(params["poolId"], params["nodeId"], params["userName"])
    return wire.empty(request, 200)


@routes.add("GET", NODE + "/extensions", "Nodes_ListNodeExtensions")
async def list_extensions(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    extensions = service.nodes.list_extensions(params["poolId"], params["nodeId"])
    return wire.list_response(request, extensions, wire.plain, EXTENSION_METADATA)


@routes.add("GET", EXTENSION, "Nodes_GetNodeExtension")
async def get_extension(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    extension = service.nodes.get_extension(params["poolId"], params["nodeId"], params["extensionName"])
    body = wire.select(extension, wire.parse_select(request))
    return wire.json_response(request, body, f"{EXTENSION_METADATA}/@Element")


@routes.add("POST", NODE + "/uploadbatchservicelogs", "Nodes_UploadNodeLogs")
async def upload_logs(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    body: Any = await read_json(request)
    uploaded = service.nodes.upload_logs(params["poolId"], params["nodeId"], body, request["request_id"])
    # The node uploads them in the background, as a node agent does: the answer says where and how many.
    node = service.account.node(params["poolId"], params["nodeId"])
    service.account.spawn(_upload(service, node, str(body["containerUrl"]), uploaded))
    return wire.json_response(
        request, uploaded.to_wire(), "Microsoft.Azure.Batch.Protocol.Entities.UploadBatchServiceLogsResult"
    )


async def _upload(service: BatchService, node: ComputeNode, container_url: str, uploaded: UploadedLogs) -> None:
    """The node reports a container it cannot reach where a node does, in its own agent log (the answer was
    given already): the next ``uploadbatchservicelogs`` of that node carries the line."""
    directory = uploaded.virtual_directory_name
    try:
        await service.account.transfers.upload_blobs(container_url, directory, uploaded.files)
    except TransferError as exc:
        log.warning("uploading the service logs to %s failed: %s", directory, exc)
        node.agent_log(f"uploading service logs to {directory} failed: {exc.failure_info.get('message')}", "ERROR")
    else:
        node.agent_log(f"uploaded {len(uploaded.files)} service log files to {directory}")
