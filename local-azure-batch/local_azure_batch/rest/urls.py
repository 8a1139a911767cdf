"""The URL map: every supported Batch REST operation, named by its REST API operation id.

Paths are matched on the raw request path, segment by segment, because the SDK sends file paths
percent-encoded with ``/`` as ``%2F`` (``/files/wd%2Fout.txt``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from . import files, jobs, nodes, pools, tasks

Handler = Callable[[web.Request, Any, dict[str, str]], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: tuple[str, ...]
    operation: str
    handler: Handler


def _route(method: str, path: str, operation: str, handler: Handler) -> Route:
    return Route(method, tuple(path.strip("/").split("/")), operation, handler)


_POOL = "/pools/{poolId}"
_NODE = _POOL + "/nodes/{nodeId}"
_JOB = "/jobs/{jobId}"
_TASK = _JOB + "/tasks/{taskId}"

ROUTES: list[Route] = [
    _route("GET", "/pools", "Pools_ListPools", pools.list_pools),
    _route("POST", "/pools", "Pools_CreatePool", pools.create_pool),
    _route("GET", _POOL, "Pools_GetPool", pools.get_pool),
    _route("HEAD", _POOL, "Pools_PoolExists", pools.pool_exists),
    _route("DELETE", _POOL, "Pools_DeletePool", pools.delete_pool),
    _route("PATCH", _POOL, "Pools_UpdatePool", pools.patch_pool),
    _route("POST", _POOL + "/updateproperties", "Pools_ReplacePoolProperties", pools.replace_pool_properties),
    _route("POST", _POOL + "/resize", "Pools_ResizePool", pools.resize_pool),
    _route("POST", _POOL + "/stopresize", "Pools_StopPoolResize", pools.stop_resize),
    _route("POST", _POOL + "/enableautoscale", "Pools_EnablePoolAutoScale", pools.enable_autoscale),
    _route("POST", _POOL + "/disableautoscale", "Pools_DisablePoolAutoScale", pools.disable_autoscale),
    _route("POST", _POOL + "/evaluateautoscale", "Pools_EvaluatePoolAutoScale", pools.evaluate_autoscale),
    _route("POST", _POOL + "/removenodes", "Pools_RemoveNodes", pools.remove_nodes),
    _route("GET", "/nodecounts", "Pools_ListPoolNodeCounts", pools.node_counts),
    _route("GET", _POOL + "/nodes", "Nodes_ListNodes", nodes.list_nodes),
    _route("GET", _NODE, "Nodes_GetNode", nodes.get_node),
    _route("GET", _NODE + "/files", "Nodes_ListNodeFiles", files.list_node_files),
    _route("GET", _NODE + "/files/{filePath*}", "Nodes_GetNodeFile", files.get_node_file),
    _route("HEAD", _NODE + "/files/{filePath*}", "Nodes_GetNodeFileProperties", files.node_file_properties),
    _route("DELETE", _NODE + "/files/{filePath*}", "Nodes_DeleteNodeFile", files.delete_node_file),
    _route("GET", "/jobs", "Jobs_ListJobs", jobs.list_jobs),
    _route("POST", "/jobs", "Jobs_CreateJob", jobs.create_job),
    _route("GET", _JOB, "Jobs_GetJob", jobs.get_job),
    _route("PATCH", _JOB, "Jobs_UpdateJob", jobs.update_job),
    _route("PUT", _JOB, "Jobs_ReplaceJob", jobs.replace_job),
    _route("DELETE", _JOB, "Jobs_DeleteJob", jobs.delete_job),
    _route("POST", _JOB + "/terminate", "Jobs_TerminateJob", jobs.terminate_job),
    _route("POST", _JOB + "/disable", "Jobs_DisableJob", jobs.disable_job),
    _route("POST", _JOB + "/enable", "Jobs_EnableJob", jobs.enable_job),
    _route("GET", _JOB + "/taskcounts", "Jobs_GetJobTaskCounts", jobs.task_counts),
    _route(
        "GET",
        _JOB + "/jobpreparationandreleasetaskstatus",
        "Jobs_ListJobPreparationAndReleaseTaskStatus",
        jobs.preparation_and_release_status,
    ),
    _route("GET", _JOB + "/tasks", "Tasks_ListTasks", tasks.list_tasks),
    _route("POST", _JOB + "/tasks", "Tasks_CreateTask", tasks.create_task),
    _route("POST", _JOB + "/addtaskcollection", "Tasks_CreateTaskCollection", tasks.create_task_collection),
    _route("GET", _TASK, "Tasks_GetTask", tasks.get_task),
    _route("PUT", _TASK, "Tasks_ReplaceTask", tasks.replace_task),
    _route("DELETE", _TASK, "Tasks_DeleteTask", tasks.delete_task),
    _route("POST", _TASK + "/terminate", "Tasks_TerminateTask", tasks.terminate_task),
    _route("POST", _TASK + "/reactivate", "Tasks_ReactivateTask", tasks.reactivate_task),
    _route("GET", _TASK + "/subtasksinfo", "Tasks_ListSubTasks", tasks.list_subtasks),
    _route("GET", _TASK + "/files", "Tasks_ListTaskFiles", files.list_task_files),
    _route("GET", _TASK + "/files/{filePath*}", "Tasks_GetTaskFile", files.get_task_file),
    _route("HEAD", _TASK + "/files/{filePath*}", "Tasks_GetTaskFileProperties", files.task_file_properties),
    _route("DELETE", _TASK + "/files/{filePath*}", "Tasks_DeleteTaskFile", files.delete_task_file),
]

OPERATIONS = frozenset(route.operation for route in ROUTES)


def _match(pattern: tuple[str, ...], segments: list[str]) -> dict[str, str] | None:
    params: dict[str, str] = {}
    for index, part in enumerate(pattern):
        if part.endswith("*}"):
            rest = segments[index:]
            if not rest or not "".join(rest):
                return None
            params[part[1:-2]] = "/".join(rest)
            return params
        if index >= len(segments):
            return None
        if part.startswith("{"):
            if not segments[index]:
                return None
            params[part[1:-1]] = segments[index]
        elif part != segments[index].lower():
            return None
    return params if len(segments) == len(pattern) else None


def resolve(method: str, raw_path: str) -> tuple[Route | None, dict[str, str], bool]:
    """(route, params, path_known): path_known tells a wrong method from an unknown path."""
    segments = [unquote(part) for part in raw_path.split("?", 1)[0].strip("/").split("/")]
    path_known = False
    for route in ROUTES:
        params = _match(route.pattern, segments)
        if params is None:
            continue
        path_known = True
        if route.method == method:
            return route, params, True
    return None, {}, path_known
