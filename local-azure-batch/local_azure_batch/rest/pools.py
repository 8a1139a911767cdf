"""Pool operations (create, list and get: create_list_get.py), and the account's node counts and supported images."""

from __future__ import annotations

from aiohttp import web

from local_azure_batch.model.images import supported_images as supported_images_list
from local_azure_batch.model.service import BatchService

from . import wire
from .body import read_json
from .routing import POOL, RouteTable

routes = RouteTable()


@routes.add("HEAD", POOL, "Pools_PoolExists")
async def pool_exists(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.empty(request, 200, wire.entity_headers(service.pools.get_pool(params["poolId"])))


@routes.add("DELETE", POOL, "Pools_DeletePool")
async def delete_pool(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.pools.delete_pool(params["poolId"])
    return wire.empty(request, 202)


@routes.add("PATCH", POOL, "Pools_UpdatePool")
async def patch_pool(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.changed(request, service.pools.patch_pool(params["poolId"], await read_json(request)), 200)


@routes.add("POST", POOL + "/updateproperties", "Pools_ReplacePoolProperties")
async def replace_pool_properties(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    pool = service.pools.patch_pool(params["poolId"], await read_json(request), replace=True)
    return wire.changed(request, pool, 204)


@routes.add("POST", POOL + "/resize", "Pools_ResizePool")
async def resize_pool(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.changed(request, service.pools.resize_pool(params["poolId"], await read_json(request)), 202)


@routes.add("POST", POOL + "/stopresize", "Pools_StopPoolResize")
async def stop_resize(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.changed(request, service.pools.stop_resize(params["poolId"]), 202)


@routes.add("POST", POOL + "/enableautoscale", "Pools_EnablePoolAutoScale")
async def enable_autoscale(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.changed(request, service.pools.enable_autoscale(params["poolId"], await read_json(request)), 200)


@routes.add("POST", POOL + "/disableautoscale", "Pools_DisablePoolAutoScale")
async def disable_autoscale(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.changed(request, service.pools.disable_autoscale(params["poolId"]), 200)


@routes.add("POST", POOL + "/evaluateautoscale", "Pools_EvaluatePoolAutoScale")
async def evaluate_autoscale(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    run = service.pools.evaluate_autoscale(params["poolId"], await read_json(request))
    url = f"{wire.base_url(request)}/pools/{params['poolId']}/evaluateautoscale"
    return wire.json_response(
        request, run, "Microsoft.Azure.Batch.Protocol.Entities.AutoScaleRun", headers={"DataServiceId": url}
    )


@routes.add("POST", POOL + "/removenodes", "Pools_RemoveNodes")
async def remove_nodes(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.changed(request, service.pools.remove_nodes(params["poolId"], await read_json(request)), 202)


@routes.add("GET", "/supportedimages", "Pools_ListSupportedImages")
async def supported_images(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.list_response(request, list(supported_images_list()), wire.plain, "supportedimages")


@routes.add("GET", "/nodecounts", "Pools_ListPoolNodeCounts")
async def node_counts(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.list_response(request, service.pools.node_counts(), wire.plain, "poolnodecounts")
