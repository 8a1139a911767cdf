"""The URL map: every supported Batch REST operation, from the resource modules' route tables."""

from __future__ import annotations

from . import certificates, create_list_get, files, job_schedules, jobs, nodes, pools, tasks
from .routing import Route, Router

ROUTER = Router(
    [
        *create_list_get.routes,
        *pools.routes,
        *nodes.routes,
        *jobs.routes,
        *job_schedules.routes,
        *tasks.routes,
        *files.routes,
        *certificates.routes,
    ]
)
ROUTES: list[Route] = ROUTER.routes
OPERATIONS = ROUTER.operations
resolve = ROUTER.resolve
