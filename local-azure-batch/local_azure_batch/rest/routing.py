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
    """Finds a request's route; routes are looked up among those with as many segments as the path."""

    def __init__(self, routes: Iterable[Route]) -> None:
        self.routes = list(routes)
        self.operations = frozenset(route.operation for route in self.routes)
        self._by_length: dict[int, list[Route]] = {}
        self._open_ended = [route for route in self.routes if route.open_ended]
        for route in self.routes:
            if not route.open_ended:
                self._by_length.setdefault(len(route.pattern), []).append(route)

    def resolve(self, method: str, raw_path: str) -> tuple[Route | None, dict[str, str], bool]:
        """(route, params, path_known): path_known tells a wrong method from an unknown path."""
        segments = [unquote(part) for part in raw_path.split("?", 1)[0].strip("/").split("/")]
        path_known = False
        for route in (*self._by_length.get(len(segments), ()), *self._open_ended):
            params = route.match(segments)
            if params is None:
                continue
            path_known = True
            if route.method == method:
                return route, params, True
        return None, {}, path_known
