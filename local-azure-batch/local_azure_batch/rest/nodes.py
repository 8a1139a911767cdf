"""Compute node operations."""

from __future__ import annotations

from aiohttp import web

from local_azure_batch.model.service import BatchService

from . import wire


async def list_nodes(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    base = wire.base_url(request)
    return wire.list_response(request, service.list_nodes(params["poolId"]), lambda node: node.to_wire(base), "nodes")


async def get_node(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    node = service.get_node(params["poolId"], params["nodeId"])
    body = wire.select(node.to_wire(wire.base_url(request)), wire.parse_select(request))
    return wire.json_response(request, body, "nodes/@Element")
