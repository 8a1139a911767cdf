"""Pool operations."""

from __future__ import annotations

from aiohttp import web

from local_azure_batch.model.service import BatchService

from . import wire
from .body import read_json


async def create_pool(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    pool = service.create_pool(await read_json(request))
    return wire.created(request, f"{wire.base_url(request)}/pools/{pool.id}", pool)


async def list_pools(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    base = wire.base_url(request)
    return wire.list_response(request, service.list_pools(), lambda pool: pool.to_wire(base), "pools")


async def get_pool(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    pool = service.get_pool(params["poolId"])
    body = wire.select(pool.to_wire(wire.base_url(request)), wire.parse_select(request))
    return wire.json_response(request, body, "pools/@Element", headers=wire.entity_headers(pool))


async def pool_exists(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    pool = service.get_pool(params["poolId"])
    return wire.empty(request, 200, wire.entity_headers(pool))


async def delete_pool(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.delete_pool(params["poolId"])
    return wire.empty(request, 202)


async def patch_pool(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    pool = service.patch_pool(params["poolId"], await read_json(request))
    return _changed(request, pool, 200)


async def replace_pool_properties(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    pool = service.patch_pool(params["poolId"], await read_json(request), replace=True)
    return _changed(request, pool, 204)


async def resize_pool(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    pool = service.resize_pool(params["poolId"], await read_json(request))
    return _changed(request, pool, 202)


async def stop_resize(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    pool = service.stop_resize(params["poolId"])
    return _changed(request, pool, 202)


async def enable_autoscale(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    pool = service.enable_autoscale(params["poolId"], await read_json(request))
    return _changed(request, pool, 200)


async def disable_autoscale(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    pool = service.disable_autoscale(params["poolId"])
    return _changed(request, pool, 200)


async def evaluate_autoscale(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    run = service.evaluate_autoscale(params["poolId"], await read_json(request))
    url = f"{wire.base_url(request)}/pools/{params['poolId']}/evaluateautoscale"
    return wire.json_response(
        request, run, "Microsoft.Azure.Batch.Protocol.Entities.AutoScaleRun", headers={"DataServiceId": url}
    )


async def remove_nodes(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    pool = service.remove_nodes(params["poolId"], await read_json(request))
    return _changed(request, pool, 202)


async def node_counts(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    counts = service.node_counts()
    return wire.list_response(request, counts, lambda item: item, "poolnodecounts")


def _changed(request: web.Request, pool, status: int) -> web.Response:
    headers = {"DataServiceId": f"{wire.base_url(request)}{request.path}", **wire.entity_headers(pool)}
    return wire.empty(request, status, headers)
