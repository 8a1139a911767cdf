"""Administration endpoints (not part of the Batch API): health, request counts and log, faults, quotas, storage.

GET          /_emulator/health
GET | DELETE /_emulator/stats      requests served per REST operation id
GET | DELETE /_emulator/requests   the latest requests, oldest first: when each arrived, its operation, the
                                   job it names and its status; ``?job=`` and ``?operation=`` (repeatable)
                                   keep only those
GET | PUT    /_emulator/faults     the fault rules (PUT takes the spec as the body)
GET | PUT    /_emulator/quota      {"jobs": N, "pools": N, "nodes": N}; null is no limit, a name left out
                                   is left as it is
GET | PUT    /_emulator/storage    {"blobEndpoints": {account: url}, "mountSources": {source: dir}}; PUT adds to
                                   them (a null value removes one)
GET | PUT    /_emulator/hostlist   {"order": "primary-first" | "primary-last"}: where the primary's node is in
                                   the AZ_BATCH_HOST_LIST of multi-instance tasks started from then on
GET | PUT    /_emulator/spot       {"capacity": N}: Spot nodes of the account that can be up at once; null is no
                                   limit (model/spot.py)
POST         /_emulator/pools/{poolId}/nodes/{nodeId}/preempt
                                   Azure takes the Spot node's VM back: the node is preempted, its tasks requeued
POST         /_emulator/pools/{poolId}/nodes/{nodeId}/unusable
                                   {"code": ..., "message": ..., "errorDetails": [{"name": ..., "value": ...}]}:
                                   the node fails, unusable with that error, its tasks requeued (model/node_faults.py)
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from aiohttp import web

from .faults import FaultInjector, FaultSpecError
from .model.account import HOST_LIST_ORDERS, ServiceSettings
from .model.errors import BatchServiceError
from .model.node_faults import make_unusable
from .rest.urls import OPERATIONS

if TYPE_CHECKING:
    from .app import LocalBatchServer

# Quota name on the admin API -> the service setting.
QUOTAS = {"jobs": "job_quota", "pools": "pool_quota", "nodes": "node_quota"}
# Storage name on the admin API -> the service setting.
STORAGE = {"blobEndpoints": "blob_endpoints", "mountSources": "mount_sources"}


def admin_routes(server: LocalBatchServer) -> list[web.RouteDef]:
    admin = _Admin(server)
    return [
        web.get("/_emulator/health", admin.health),
        web.get("/_emulator/stats", admin.stats),
        web.delete("/_emulator/stats", admin.reset_stats),
        web.get("/_emulator/requests", admin.request_log),
        web.delete("/_emulator/requests", admin.clear_request_log),
        web.get("/_emulator/faults", admin.faults),
        web.put("/_emulator/faults", admin.put_faults),
        web.get("/_emulator/quota", admin.quota),
        web.put("/_emulator/quota", admin.put_quota),
        web.get("/_emulator/storage", admin.storage),
        web.put("/_emulator/storage", admin.put_storage),
        web.get("/_emulator/hostlist", admin.host_list),
        web.put("/_emulator/hostlist", admin.put_host_list),
        web.get("/_emulator/spot", admin.spot),
        web.put("/_emulator/spot", admin.put_spot),
        web.post("/_emulator/pools/{pool_id}/nodes/{node_id}/preempt", admin.preempt),
        web.post("/_emulator/pools/{pool_id}/nodes/{node_id}/unusable", admin.unusable),
    ]


class _Admin:
    def __init__(self, server: LocalBatchServer) -> None:
        self.server = server

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "url": self.server.url})

    async def stats(self, request: web.Request) -> web.Response:
        requests = self.server.requests
        return web.json_response({"requests": dict(requests), "total": sum(requests.values())})

    async def reset_stats(self, request: web.Request) -> web.Response:
        self.server.requests.clear()
        return web.json_response({"requests": {}, "total": 0})

    async def request_log(self, request: web.Request) -> web.Response:
        jobs = set(request.query.getall("job", []))
        operations = set(request.query.getall("operation", []))
        records = [
            record.to_json()
            for record in self.server.request_log
            if (not jobs or record.job_id in jobs) and (not operations or record.operation in operations)
        ]
        return web.json_response({"requests": records, "kept": self.server.request_log.maxlen})

    async def clear_request_log(self, request: web.Request) -> web.Response:
        self.server.request_log.clear()
        return web.json_response({"requests": [], "kept": self.server.request_log.maxlen})

    async def faults(self, request: web.Request) -> web.Response:
        return web.json_response({"spec": self.server.faults.spec})

    async def put_faults(self, request: web.Request) -> web.Response:
        spec = (await request.text()).strip()
        try:
            self.server.faults = FaultInjector.parse(spec, OPERATIONS, self.server.config.fault_seed)
        except FaultSpecError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"spec": spec})

    async def quota(self, request: web.Request) -> web.Response:
        return web.json_response(self._quota())

    async def put_quota(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.text() or "{}")
        except json.JSONDecodeError as exc:
            return web.json_response({"error": f"the body is not JSON: {exc}"}, status=400)
        if not isinstance(body, dict) or set(body) - set(QUOTAS):
            return web.json_response({"error": f"give an object with any of {', '.join(QUOTAS)}"}, status=400)
        for name, value in body.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                return web.json_response({"error": f"{name} must be null or a whole number from 0"}, status=400)
        settings = self._settings()
        for name, value in body.items():
            setattr(settings, QUOTAS[name], value)
        return web.json_response(self._quota())

    async def storage(self, request: web.Request) -> web.Response:
        return web.json_response(self._storage())

    async def put_storage(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.text() or "{}")
        except json.JSONDecodeError as exc:
            return web.json_response({"error": f"the body is not JSON: {exc}"}, status=400)
        if not isinstance(body, dict) or set(body) - set(STORAGE):
            return web.json_response({"error": f"give an object with any of {', '.join(STORAGE)}"}, status=400)
        for name, mapping in body.items():
            valid = isinstance(mapping, dict) and all(
                isinstance(key, str) and (value is None or isinstance(value, str)) for key, value in mapping.items()
            )
            if not valid:
                return web.json_response({"error": f"{name} must map names to strings (null removes one)"}, status=400)
        settings = self._settings()
        for name, mapping in body.items():
            current = getattr(settings, STORAGE[name])
            for key, value in mapping.items():
                if value is None:
                    current.pop(key, None)
                else:
                    current[key] = value
        return web.json_response(self._storage())

    async def host_list(self, request: web.Request) -> web.Response:
        return web.json_response({"order": self._settings().host_list_order})

    async def put_host_list(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.text() or "{}")
        except json.JSONDecodeError as exc:
            return web.json_response({"error": f"the body is not JSON: {exc}"}, status=400)
        order = body.get("order") if isinstance(body, dict) else None
        if order not in HOST_LIST_ORDERS:
            choices = ", ".join(HOST_LIST_ORDERS)
            return web.json_response({"error": f"give an object with order: one of {choices}"}, status=400)
        self._settings().host_list_order = order
        return web.json_response({"order": order})

    async def spot(self, request: web.Request) -> web.Response:
        return web.json_response({"capacity": self._settings().spot_capacity})

    async def put_spot(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.text() or "{}")
        except json.JSONDecodeError as exc:
            return web.json_response({"error": f"the body is not JSON: {exc}"}, status=400)
        capacity = body.get("capacity", ...) if isinstance(body, dict) else ...
        valid = capacity is None or (isinstance(capacity, int) and not isinstance(capacity, bool) and capacity >= 0)
        if capacity is ... or set(body) != {"capacity"} or not valid:
            return web.json_response({"error": 'give {"capacity": N}, N a whole number from 0 or null'}, status=400)
        self._settings().spot_capacity = capacity
        assert self.server.service is not None
        self.server.service.spot.capacity_changed()
        return web.json_response({"capacity": capacity})

    async def preempt(self, request: web.Request) -> web.Response:
        service = self.server.service
        assert service is not None
        try:
            node = service.account.node(request.match_info["pool_id"], request.match_info["node_id"])
            service.spot.preempt(node)
        except BatchServiceError as exc:
            return web.json_response({"error": exc.message, "code": exc.code}, status=exc.status)
        return web.json_response({"pool": node.pool.id, "node": node.id, "state": node.state})

    async def unusable(self, request: web.Request) -> web.Response:
        try:
            error = _node_error(json.loads(await request.text() or "{}"))
        except (json.JSONDecodeError, ValueError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        service = self.server.service
        assert service is not None
        try:
            node = service.account.node(request.match_info["pool_id"], request.match_info["node_id"])
            make_unusable(service.account, node, [error])
        except BatchServiceError as exc:
            return web.json_response({"error": exc.message, "code": exc.code}, status=exc.status)
        return web.json_response({"pool": node.pool.id, "node": node.id, "state": node.state, "errors": node.errors})

    def _storage(self) -> dict[str, dict[str, str]]:
        settings = self._settings()
        return {name: dict(getattr(settings, setting)) for name, setting in STORAGE.items()}

    def _settings(self) -> ServiceSettings:
        assert self.server.service is not None
        return self.server.service.settings

    def _quota(self) -> dict[str, int | None]:
        settings = self._settings()
        return {name: getattr(settings, setting) for name, setting in QUOTAS.items()}


def _node_error(body: object) -> dict[str, object]:
    """A node error as the service shows it in a node's ``errors``, from an administration request's body."""
    usage = (
        'give {"code": "...", "message": "...", "errorDetails": [{"name": "...", "value": "..."}]}'
        " (errorDetails may be left out)"
    )
    if not isinstance(body, dict) or set(body) - {"code", "message", "errorDetails"}:
        raise ValueError(usage)
    code, message, details = body.get("code"), body.get("message"), body.get("errorDetails", [])
    texts = isinstance(code, str) and code.strip() and isinstance(message, str) and message.strip()
    pairs = isinstance(details, list) and all(
        isinstance(item, dict) and set(item) == {"name", "value"} and all(isinstance(x, str) for x in item.values())
        for item in details
    )
    if not texts or not pairs:
        raise ValueError(usage)
    error: dict[str, object] = {"code": code, "message": message}
    if details:
        error["errorDetails"] = details
    return error
