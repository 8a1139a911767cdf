"""Routes of the Batch REST API, named by their REST operation ids, and how a request path finds its route.

Each resource module declares its routes beside its handlers (``@routes.add("GET", JOB, "Jobs_GetJob")``).
Paths are matched on the raw request path, segment by segment, because the SDK sends file paths
percent-encoded with ``/`` as ``%2F`` (``/files/wd%2Fout.txt``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote

from aiohttp import web

if TYPE_CHECKING:
    from local_azure_batch.model.service import BatchService

Handler = Callable[[web.Request, "BatchService", dict[str, str]], Awaitable[web.StreamResponse]]

POOL = "/pools/{poolId}"
NODE = POOL + "/nodes/{nodeId}"
JOB = "/jobs/{jobId}"
TASK = JOB + "/tasks/{taskId}"
JOB_SCHEDULE = "/jobschedules/{jobScheduleId}"


@dataclass(frozen=True)
class Route:
    method: str
    pattern: tuple[str, ...]
    operation: str
    handler: Handler

    @property
    def open_ended(self) -> bool:
        """The last segment (``{filePath*}``) takes the rest of the path."""
        return self.pattern[-1].endswith("*}")

    def match(self, segments: list[str]) -> dict[str, str] | None:
        params: dict[str, str] = {}
        for index, part in enumerate(self.pattern):
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
            elif part.endswith("(*)"):
                # OData key syntax in one segment: certificates(thumbprintAlgorithm=sha1,thumbprint=...)
                prefix = part[:-2]
                if not (segments[index].lower().startswith(prefix) and segments[index].endswith(")")):
                    return None
                params["key"] = segments[index][len(prefix) : -1]
            elif part != segments[index].lower():
                return None
        return params if len(segments) == len(self.pattern) else None


class RouteTable:
    def __init__(self) -> None:
        self._routes: list[Route] = []

    def add(self, method: str, path: str, operation: str) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.add_handler(method, path, operation, handler)
            return handler

        return register

    def add_handler(self, method: str, path: str, operation: str, handler: Handler) -> None:
        self._routes.append(Route(method, tuple(path.strip("/").split("/")), operation, handler))

    def __iter__(self) -> Iterator[Route]:
        return iter(self._routes)


class Router:
    """Finds a request's route without trying every route.

    Batch paths alternate names and ids (``/jobs/{jobId}/tasks/{taskId}/files``), so a path's names (its
    segments 0, 2, 4, ...) and its length pick the few routes (one per method) it can be.
    """

    def __init__(self, routes: Iterable[Route]) -> None:
        self.routes = list(routes)
        self.operations = frozenset(route.operation for route in self.routes)
        self._by_shape: dict[tuple[int, tuple[str, ...]], list[Route]] = {}
        self._others: list[Route] = []
        for route in self.routes:
            names = route.pattern[::2]
            ids = route.pattern[1::2]
            if (
                route.open_ended
                or any(name.startswith("{") or name.endswith("(*)") for name in names)
                or any(not part.startswith("{") for part in ids)
            ):
                self._others.append(route)
            else:
                self._by_shape.setdefault((len(route.pattern), names), []).append(route)

    def resolve(self, method: str, raw_path: str) -> tuple[Route | None, dict[str, str], bool]:
        """(route, params, path_known): path_known tells a wrong method from an unknown path."""
        segments = [unquote(part) for part in raw_path.split("?", 1)[0].strip("/").split("/")]
        shape = (len(segments), tuple(segment.lower() for segment in segments[::2]))
        path_known = False
        for route in (*self._by_shape.get(shape, ()), *self._others):
            params = route.match(segments)
            if params is None:
                continue
            path_known = True
            if route.method == method:
                return route, params, True
        return None, {}, path_known
