"""Compute node operations."""

from __future__ import annotations

from aiohttp import web

from local_azure_batch.model.service import BatchService

from . import wire
from .routing import NODE, POOL, RouteTable

routes = RouteTable()


@routes.add("GET", POOL + "/nodes", "Nodes_ListNodes")
async def list_nodes(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.entities(request, service.pools.list_nodes(params["poolId"]), "nodes")


@routes.add("GET", NODE, "Nodes_GetNode")
async def get_node(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.entity(request, service.pools.get_node(params["poolId"], params["nodeId"]), "nodes/@Element")
