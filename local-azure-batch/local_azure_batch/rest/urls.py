"""The URL map: every supported Batch REST operation, from the resource modules' route tables."""

from __future__ import annotations

from . import create_list_get, files, jobs, nodes, pools, tasks
from .routing import Route, Router

ROUTER = Router([*create_list_get.routes, *pools.routes, *nodes.routes, *jobs.routes, *tasks.routes, *files.routes])
ROUTES: list[Route] = ROUTER.routes
OPERATIONS = ROUTER.operations
resolve = ROUTER.resolve
