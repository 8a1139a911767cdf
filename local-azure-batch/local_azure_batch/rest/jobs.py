"""Job operations (create, list and get: create_list_get.py)."""

from __future__ import annotations

from aiohttp import web

from local_azure_batch.model.service import BatchService

from . import wire
from .body import read_json
from .routing import JOB, RouteTable

routes = RouteTable()


@routes.add("PATCH", JOB, "Jobs_UpdateJob")
@routes.add("PUT", JOB, "Jobs_ReplaceJob")
async def update_job(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    replace = request.method == "PUT"
    return wire.changed(request, service.jobs.update_job(params["jobId"], await read_json(request), replace), 200)


@routes.add("DELETE", JOB, "Jobs_DeleteJob")
async def delete_job(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.jobs.delete_job(params["jobId"])
    return wire.empty(request, 202)


@routes.add("POST", JOB + "/terminate", "Jobs_TerminateJob")
async def terminate_job(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    body = await read_json(request, optional=True)
    reason = body.get("terminateReason") if isinstance(body, dict) else None
    return wire.changed(request, service.jobs.terminate_job(params["jobId"], reason), 202)


@routes.add("POST", JOB + "/disable", "Jobs_DisableJob")
async def disable_job(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.changed(request, service.jobs.disable_job(params["jobId"], await read_json(request)), 202)


@routes.add("POST", JOB + "/enable", "Jobs_EnableJob")
async def enable_job(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.changed(request, service.jobs.enable_job(params["jobId"]), 202)


@routes.add("GET", JOB + "/taskcounts", "Jobs_GetJobTaskCounts")
async def task_counts(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.json_response(request, service.jobs.get_job(params["jobId"]).task_counts(), "taskcountsresult/@Element")


@routes.add("GET", JOB + "/jobpreparationandreleasetaskstatus", "Jobs_ListJobPreparationAndReleaseTaskStatus")
async def preparation_and_release_status(
    request: web.Request, service: BatchService, params: dict[str, str]
) -> web.Response:
    items = service.jobs.preparation_and_release_status(params["jobId"])
    return wire.list_response(request, items, wire.plain, "jobpreparationandreleasetaskstatuslist")
