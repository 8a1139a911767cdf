"""Task operations."""

from __future__ import annotations

from aiohttp import web

from local_azure_batch.model.service import BatchService

from . import wire
from .body import read_json
from .routing import JOB, TASK, RouteTable

routes = RouteTable()


@routes.add("POST", JOB + "/tasks", "Tasks_CreateTask")
async def create_task(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.created(request, service.tasks.add_task(params["jobId"], await read_json(request)))


@routes.add("POST", JOB + "/addtaskcollection", "Tasks_CreateTaskCollection")
async def create_task_collection(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    results = service.tasks.add_task_collection(params["jobId"], await read_json(request))
    return wire.json_response(request, {"value": results}, "taskaddresult")


@routes.add("GET", JOB + "/tasks", "Tasks_ListTasks")
async def list_tasks(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.entities(request, service.tasks.list_tasks(params["jobId"]), "tasks")


@routes.add("GET", TASK, "Tasks_GetTask")
async def get_task(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    task = service.tasks.get_task(params["jobId"], params["taskId"])
    return wire.entity(request, task, "tasks/@Element", {"DataServiceId": f"{wire.base_url(request)}{task.path}"})


@routes.add("PUT", TASK, "Tasks_ReplaceTask")
async def replace_task(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    task = service.tasks.update_task(params["jobId"], params["taskId"], await read_json(request))
    return wire.changed(request, task, 200)


@routes.add("DELETE", TASK, "Tasks_DeleteTask")
async def delete_task(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.tasks.delete_task(params["jobId"], params["taskId"])
    return wire.empty(request, 200)


@routes.add("POST", TASK + "/terminate", "Tasks_TerminateTask")
async def terminate_task(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.changed(request, service.tasks.terminate_task(params["jobId"], params["taskId"]), 204)


@routes.add("POST", TASK + "/reactivate", "Tasks_ReactivateTask")
async def reactivate_task(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.changed(request, service.tasks.reactivate_task(params["jobId"], params["taskId"]), 204)


@routes.add("GET", TASK + "/subtasksinfo", "Tasks_ListSubTasks")
async def list_subtasks(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    task = service.tasks.get_task(params["jobId"], params["taskId"])
    fields = wire.parse_select(request)
    body = {"value": [wire.select(subtask.to_wire(), fields) for subtask in task.subtasks]}
    return wire.json_response(request, body, "subtaskinformation")
