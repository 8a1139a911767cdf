"""Task operations."""

from __future__ import annotations

from aiohttp import web

from local_azure_batch.model.service import BatchService

from . import wire
from .body import read_json


async def create_task(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    task = service.add_task(params["jobId"], await read_json(request))
    return wire.created(request, f"{wire.base_url(request)}/jobs/{task.job.id}/tasks/{task.id}", task)


async def create_task_collection(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    raw_size = len(await request.read())
    results = service.add_task_collection(params["jobId"], await read_json(request), raw_size)
    return wire.json_response(request, {"value": results}, "taskaddresult")


async def list_tasks(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    base = wire.base_url(request)
    return wire.list_response(request, service.list_tasks(params["jobId"]), lambda task: task.to_wire(base), "tasks")


async def get_task(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    task = service.get_task(params["jobId"], params["taskId"])
    body = wire.select(task.to_wire(wire.base_url(request)), wire.parse_select(request))
    url = f"{wire.base_url(request)}/jobs/{task.job.id}/tasks/{task.id}"
    return wire.json_response(
        request, body, "tasks/@Element", headers={"DataServiceId": url, **wire.entity_headers(task)}
    )


async def replace_task(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    task = service.update_task(params["jobId"], params["taskId"], await read_json(request))
    return _changed(request, task, 200)


async def delete_task(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.delete_task(params["jobId"], params["taskId"])
    return wire.empty(request, 200)


async def terminate_task(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.terminate_task(params["jobId"], params["taskId"])
    task = service.get_task(params["jobId"], params["taskId"])
    return _changed(request, task, 204)


async def reactivate_task(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.reactivate_task(params["jobId"], params["taskId"])
    task = service.get_task(params["jobId"], params["taskId"])
    return _changed(request, task, 204)


async def list_subtasks(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    task = service.get_task(params["jobId"], params["taskId"])
    fields = wire.parse_select(request)
    body = {"value": [wire.select(subtask.to_wire(), fields) for subtask in task.subtasks]}
    return wire.json_response(request, body, "subtaskinformation")


def _changed(request: web.Request, task, status: int) -> web.Response:
    headers = {"DataServiceId": f"{wire.base_url(request)}{request.path}", **wire.entity_headers(task)}
    return wire.empty(request, status, headers)
