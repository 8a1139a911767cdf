"""Job operations."""

from __future__ import annotations

from aiohttp import web

from local_azure_batch.model.service import BatchService

from . import wire
from .body import read_json


async def create_job(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    job = service.create_job(await read_json(request))
    return wire.created(request, f"{wire.base_url(request)}/jobs/{job.id}", job)


async def list_jobs(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    base = wire.base_url(request)
    return wire.list_response(request, service.list_jobs(), lambda job: job.to_wire(base), "jobs")


async def get_job(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    job = service.get_job(params["jobId"])
    body = wire.select(job.to_wire(wire.base_url(request)), wire.parse_select(request))
    return wire.json_response(request, body, "jobs/@Element", headers=wire.entity_headers(job))


async def update_job(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    job = service.update_job(params["jobId"], await read_json(request), replace=False)
    return _changed(request, job, 200)


async def replace_job(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    job = service.update_job(params["jobId"], await read_json(request), replace=True)
    return _changed(request, job, 200)


async def delete_job(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.delete_job(params["jobId"])
    return wire.empty(request, 202)


async def terminate_job(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    body = await read_json(request, optional=True)
    reason = body.get("terminateReason") if isinstance(body, dict) else None
    job = service.terminate_job(params["jobId"], reason)
    return _changed(request, job, 202)


async def disable_job(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    job = service.disable_job(params["jobId"], await read_json(request))
    return _changed(request, job, 202)


async def enable_job(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    job = service.enable_job(params["jobId"])
    return _changed(request, job, 202)


async def task_counts(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    counts = service.get_job(params["jobId"]).task_counts()
    return wire.json_response(request, counts, "taskcountsresult/@Element")


async def preparation_and_release_status(
    request: web.Request, service: BatchService, params: dict[str, str]
) -> web.Response:
    items = service.preparation_and_release_status(params["jobId"])
    return wire.list_response(request, items, lambda item: item, "jobpreparationandreleasetaskstatuslist")


def _changed(request: web.Request, job, status: int) -> web.Response:
    headers = {"DataServiceId": f"{wire.base_url(request)}{request.path}", **wire.entity_headers(job)}
    return wire.empty(request, status, headers)
