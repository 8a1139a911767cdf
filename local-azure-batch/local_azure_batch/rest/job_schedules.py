"""Job schedule operations (create, list and get: create_list_get.py), and the jobs of a schedule.

Statuses as recorded (``azure-sdk-assets`` ``test_batch_job_schedules``, api-version 2025-06-01): exists 200
(404 when there is none), replace and update 200, disable and enable 204, terminate and delete 202.
"""

from __future__ import annotations

from aiohttp import web

from local_azure_batch.model.service import BatchService

from . import wire
from .body import read_json
from .routing import JOB_SCHEDULE, RouteTable

routes = RouteTable()


@routes.add("HEAD", JOB_SCHEDULE, "JobSchedules_JobScheduleExists")
async def schedule_exists(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    schedule = service.job_schedules.schedule(params["jobScheduleId"])
    return wire.empty(request, 200, wire.entity_headers(schedule))


@routes.add("PATCH", JOB_SCHEDULE, "JobSchedules_UpdateJobSchedule")
@routes.add("PUT", JOB_SCHEDULE, "JobSchedules_ReplaceJobSchedule")
async def update_schedule(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    replace = request.method == "PUT"
    schedule = service.job_schedules.update_schedule(params["jobScheduleId"], await read_json(request), replace)
    return wire.changed(request, schedule, 200)


@routes.add("DELETE", JOB_SCHEDULE, "JobSchedules_DeleteJobSchedule")
async def delete_schedule(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    service.job_schedules.delete_schedule(params["jobScheduleId"])
    return wire.empty(request, 202)


@routes.add("POST", JOB_SCHEDULE + "/disable", "JobSchedules_DisableJobSchedule")
async def disable_schedule(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.changed(request, service.job_schedules.disable_schedule(params["jobScheduleId"]), 204)


@routes.add("POST", JOB_SCHEDULE + "/enable", "JobSchedules_EnableJobSchedule")
async def enable_schedule(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.changed(request, service.job_schedules.enable_schedule(params["jobScheduleId"]), 204)


@routes.add("POST", JOB_SCHEDULE + "/terminate", "JobSchedules_TerminateJobSchedule")
async def terminate_schedule(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.changed(request, service.job_schedules.terminate_schedule(params["jobScheduleId"]), 202)


@routes.add("GET", JOB_SCHEDULE + "/jobs", "Jobs_ListJobsFromSchedule")
async def list_jobs(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    return wire.entities(request, service.job_schedules.list_jobs(params["jobScheduleId"]), "jobs")
