"""Pools, jobs and job schedules: the operations every top-level collection of entities has (create, list and get)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import wire
from .body import read_json
from .routing import JOB, JOB_SCHEDULE, POOL, RouteTable

if TYPE_CHECKING:
    from local_azure_batch.model.service import BatchService


def collection_routes(
    routes: RouteTable,
    *,
    group: str,
    noun: str,
    item_path: str,
    create: Callable[[BatchService, Any], wire.VersionedEntity],
    listing: Callable[[BatchService], Sequence[wire.Entity]],
    get: Callable[[BatchService, str], wire.VersionedEntity],
) -> None:
    """``{group}_Create{noun}``, ``{group}_List{group}`` and ``{group}_Get{noun}`` (``Pools_CreatePool``, ...)."""
    collection_path, id_param = item_path.rsplit("/", 1)
    metadata = collection_path.strip("/")

    async def create_entity(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
        return wire.created(request, create(service, await read_json(request)))

    async def list_entities(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
        return wire.entities(request, listing(service), metadata)

    async def get_entity(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
        return wire.entity(request, get(service, params[id_param.strip("{}")]), f"{metadata}/@Element")

    routes.add_handler("POST", collection_path, f"{group}_Create{noun}", create_entity)
    routes.add_handler("GET", collection_path, f"{group}_List{group}", list_entities)
    routes.add_handler("GET", item_path, f"{group}_Get{noun}", get_entity)


routes = RouteTable()
collection_routes(
    routes,
    group="Pools",
    noun="Pool",
    item_path=POOL,
    create=lambda service, body: service.pools.create_pool(body),
    listing=lambda service: service.pools.list_pools(),
    get=lambda service, pool_id: service.pools.get_pool(pool_id),
)
collection_routes(
    routes,
    group="Jobs",
    noun="Job",
    item_path=JOB,
    create=lambda service, body: service.jobs.create_job(body),
    listing=lambda service: service.jobs.list_jobs(),
    get=lambda service, job_id: service.jobs.get_job(job_id),
)
collection_routes(
    routes,
    group="JobSchedules",
    noun="JobSchedule",
    item_path=JOB_SCHEDULE,
    create=lambda service, body: service.job_schedules.create_schedule(body),
    listing=lambda service: service.job_schedules.list_schedules(),
    get=lambda service, schedule_id: service.job_schedules.schedule(schedule_id),
)
