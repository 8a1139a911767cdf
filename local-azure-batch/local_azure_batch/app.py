"""The HTTP server: authentication, limits, fault injection and request accounting around the REST layer."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import shutil
import socket
import tempfile
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from .account import (
    DEV_ACCOUNT_KEY,
    DEV_ACCOUNT_NAME,
    DEV_CLIENT_ID,
    DEV_CLIENT_SECRET,
    DEV_LOCATION,
    DEV_NO_ROLE_CLIENT_ID,
    DEV_NO_ROLE_CLIENT_SECRET,
    DEV_NO_ROLE_OBJECT_ID,
    DEV_OBJECT_ID,
    DEV_SUBSCRIPTION_ID,
    DEV_TENANT_ID,
)
from .admin import admin_routes
from .auth.authority import ServicePrincipal, TokenAuthority
from .auth.roles import ROLE_NAMES, can_use_data_plane
from .auth.shared_key import verify_shared_key
from .auth.tls import TlsFiles, generate_tls_files
from .faults import FaultInjector
from .management.routes import ManagementPlane
from .management.settings import ManagementSettings
from .model.account import ServiceSettings
from .model.errors import (
    BatchServiceError,
    authentication_failed,
    authorization_failure,
    invalid_query,
    request_body_too_large,
)
from .model.service import BatchService
from .rest import wire
from .rest.body import MAX_BODY_BYTES
from .rest.query_options import check_query_options
from .rest.urls import OPERATIONS, resolve

log = logging.getLogger("local_azure_batch")

SUPPORTED_API_VERSIONS = ("2025-06-01", "2024-07-01.20.0", "2024-02-01.19.0", "2023-11-01.18.0")

_FAULT_ERRORS = {
    429: (
        "TooManyRequests",
        "The server is receiving too many requests; retry after the time in Retry-After.",
    ),
    503: ("ServerBusy", "The server is currently unable to receive requests. Please retry your request."),
    500: ("InternalError", "Server encountered an internal error. Please try again after some time."),
}


@dataclass
class EmulatorConfig:
    host: str = "127.0.0.1"
    port: int = 0
    account_name: str = DEV_ACCOUNT_NAME
    account_key: str = DEV_ACCOUNT_KEY
    tls: bool = False
    task_root: Path | None = None
    keep: bool = False
    faults: str = ""
    fault_seed: int | None = None
    node_start_seconds: float = 1.0
    # Job schedules' recurrenceInterval and startWindow pass this many times faster (ServiceSettings).
    schedule_time_scale: float = 1.0
    autoscale_interval_seconds: float | None = 5.0
    node_quota: int | None = None
    spot_capacity: int | None = None
    job_quota: int | None = None
    pool_quota: int | None = None
    sp_certificate: Path | None = None
    log_requests: bool = True
    subscription_id: str = DEV_SUBSCRIPTION_ID
    blob_endpoints: dict[str, str] = field(default_factory=dict)
    mount_sources: dict[str, str] = field(default_factory=dict)
    # VM sizes a pool may name besides the shipped list (sizes newer than data/vm_sizes.json).
    extra_vm_sizes: tuple[str, ...] = ()
    host_list_order: str = "primary-first"
    request_log_size: int = 100_000
    # Pools, jobs and tasks are saved here and loaded at the next start; the task root is inside it.
    state_dir: Path | None = None
    # More principals of the token authority (--tls), besides the development ones.
    principals: tuple[ServicePrincipal, ...] = ()
    # The account's region and the sizes it does not offer (lower case); the management plane's view of it.
    location: str = DEV_LOCATION
    unavailable_vm_sizes: tuple[str, ...] = ()
    management: ManagementSettings = field(default_factory=ManagementSettings)


@dataclass(frozen=True)
class RequestRecord:
    """One request as the request log keeps it: when it arrived (epoch seconds), its REST operation, the
    job its path names (if any) and the status it was answered with (0: the connection was dropped)."""

    at: float
    operation: str
    job_id: str | None
    status: int

    def to_json(self) -> dict[str, object]:
        return {"at": self.at, "operation": self.operation, "job": self.job_id, "status": self.status}


@dataclass
class LocalBatchServer:
    config: EmulatorConfig
    url: str = ""
    tls_files: TlsFiles | None = None
    service: BatchService | None = None
    authority: TokenAuthority | None = None
    management: ManagementPlane | None = None
    faults: FaultInjector = field(default_factory=FaultInjector)
    requests: Counter[str] = field(default_factory=Counter)
    # The latest requests, oldest first (bounded: ``config.request_log_size``).
    request_log: deque[RequestRecord] = field(default_factory=deque)
    _runner: web.AppRunner | None = None
    _created_root: bool = False
    _task_root: Path | None = None

    async def start(self) -> None:
        config = self.config
        self.faults = FaultInjector.parse(config.faults, OPERATIONS, config.fault_seed)
        self.request_log = deque(maxlen=config.request_log_size)
        if config.state_dir is not None:
            if config.task_root is not None:
                raise ValueError(
                    "--task-root and --state-dir together: the state directory holds the task root "
                    "(<state dir>/task-root); give one of them"
                )
            self._task_root = (config.state_dir / "task-root").resolve()
            self._task_root.mkdir(parents=True, exist_ok=True)
        elif config.task_root is None:
            self._task_root = Path(tempfile.mkdtemp(prefix="azbatch-local-"))
            self._created_root = True
        else:
            self._task_root = config.task_root.resolve()
            self._created_root = not self._task_root.exists()
            self._task_root.mkdir(parents=True, exist_ok=True)
        sock = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((config.host, config.port))
        port = sock.getsockname()[1]
        public_host = "127.0.0.1" if config.host in ("0.0.0.0", "") else config.host
        if ":" in public_host:
            public_host = f"[{public_host}]"
        ssl_context = None
        if config.tls:
            self.tls_files = generate_tls_files(self._task_root / "tls", public_host.strip("[]"))
            ssl_context = self.tls_files.server_context()
            self.authority = TokenAuthority(DEV_TENANT_ID, _principals(config))
        self.url = f"{'https' if config.tls else 'http'}://{public_host}:{port}"
        self.service = BatchService(
            ServiceSettings(
                account_name=config.account_name,
                account_url=self.url,
                task_root=self._task_root,
                node_start_seconds=config.node_start_seconds,
                schedule_time_scale=config.schedule_time_scale,
                autoscale_interval_seconds=config.autoscale_interval_seconds,
                node_quota=config.node_quota,
                spot_capacity=config.spot_capacity,
                job_quota=config.job_quota,
                pool_quota=config.pool_quota,
                subscription_id=config.subscription_id,
                blob_endpoints=dict(config.blob_endpoints),
                mount_sources=dict(config.mount_sources),
                extra_vm_sizes=frozenset(size.lower() for size in config.extra_vm_sizes),
                host_list_order=config.host_list_order,
                state_dir=config.state_dir.resolve() if config.state_dir is not None else None,
                location=config.location,
                unavailable_vm_sizes=frozenset(size.lower() for size in config.unavailable_vm_sizes),
            )
        )
        await self.service.start()
        # Bodies over the limit are refused before they are read (see _dispatch); this caps chunked ones.
        app = web.Application(client_max_size=MAX_BODY_BYTES - 1)
        app.router.add_routes(admin_routes(self))
        if self.authority is not None:
            app.router.add_routes(self.authority.routes())
            self.management = ManagementPlane(self.service.settings, config.management, self.authority, self.url)
            app.router.add_routes(self.management.routes())
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.SockSite(self._runner, sock, ssl_context=ssl_context)
        await site.start()

    async def stop(self) -> None:
        if self.service is not None:
            await self.service.stop()
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._runner.cleanup(), 5)
        # With a state directory, the nodes' files are part of the state: tasks' output stays readable.
        if not self.config.keep and self.config.state_dir is None and self._task_root is not None:
            if self._created_root:
                shutil.rmtree(self._task_root, ignore_errors=True)
            else:
                shutil.rmtree(self._task_root / "pools", ignore_errors=True)
                shutil.rmtree(self._task_root / "tls", ignore_errors=True)

    # -- the Batch API --------------------------------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        request["request_id"] = str(uuid.uuid4())
        request["arrived"] = time.time()
        started = time.perf_counter()
        route, params, path_known = resolve(request.method, request.raw_path)
        operation = route.operation if route is not None else "Unknown"
        self.requests[operation] += 1
        request["job_id"] = params.get("jobId")
        response: web.StreamResponse
        drop_after = False
        try:
            if route is None:
                if path_known:
                    raise BatchServiceError(
                        405,
                        "UnsupportedHttpVerb",
                        f"The resource doesn't support the specified HTTP verb {request.method}.",
                    )
                raise BatchServiceError(
                    400, "InvalidUri", "The requested URI does not represent any resource on the server."
                )
            decision = self.faults.decide(operation)
            if decision.latency:
                await asyncio.sleep(decision.latency)
            if decision.drop:
                self._drop(request, operation, started, "dropped (fault)")
            if decision.status is not None:
                code, message = _FAULT_ERRORS[decision.status]
                headers = (
                    {"Retry-After": _retry_after(decision.retry_after)} if decision.retry_after is not None else {}
                )
                raise BatchServiceError(decision.status, code, message, headers=headers)
            drop_after = decision.drop_after
            _check_body_size(request)
            await self._authenticate(request)
            _check_query(request)
            request["operation"] = operation
            check_query_options(operation, request.query)
            _check_path(params)
            assert self.service is not None
            response = await route.handler(request, self.service, params)
        except BatchServiceError as exc:
            response = await wire.error_response(request, exc)
        except web.HTTPRequestEntityTooLarge:
            response = await wire.error_response(request, request_body_too_large(MAX_BODY_BYTES))
        except (asyncio.CancelledError, ConnectionError):
            raise
        except Exception:
            # Whatever went wrong, the client gets the service's JSON error, never a traceback.
            log.exception("%s %s failed", request.method, request.raw_path)
            code, message = _FAULT_ERRORS[500]
            response = await wire.error_response(request, BatchServiceError(500, code, message))
        if drop_after:
            # The request took effect; its answer never arrives (a streamed file may have been sent already).
            self._drop(request, operation, started, "processed, then dropped (fault)")
        if "client-request-id" in request.headers and not response.prepared:
            response.headers["client-request-id"] = request.headers["client-request-id"]
        self._log(request, response.status, operation, started)
        return response

    def _drop(self, request: web.Request, operation: str, started: float, note: str) -> None:
        """Close the connection without an answer."""
        self._log(request, 0, operation, started, note=note)
        if request.transport is not None:
            request.transport.abort()
        raise asyncio.CancelledError

    async def _authenticate(self, request: web.Request) -> None:
        authorization = request.headers.get("Authorization", "")
        if authorization.startswith("Bearer "):
            if self.authority is None:
                raise BatchServiceError(
                    401,
                    "AuthenticationFailed",
                    "Server failed to authenticate the request. Bearer tokens are accepted only when the local "
                    "Batch service runs with --tls.",
                )
            claims = self.authority.verify_bearer(authorization[len("Bearer ") :])
            principal = self.authority.principal(claims)
            if principal is None or not can_use_data_plane(principal.roles):
                raise authorization_failure()
            return
        if not authorization:
            raise BatchServiceError(
                401,
                "AuthenticationFailed",
                "Server failed to authenticate the request. The Authorization header is missing.",
            )
        path, _, query = request.raw_path.partition("?")
        verify_shared_key(
            authorization,
            request.method,
            path,
            query,
            request.headers,
            self.config.account_name,
            self.config.account_key,
        )
        await _check_body_integrity(request)

    def _log(self, request: web.Request, status: int, operation: str, started: float, note: str = "") -> None:
        self.request_log.append(RequestRecord(request["arrived"], operation, request.get("job_id"), status))
        if self.config.log_requests:
            elapsed = (time.perf_counter() - started) * 1000
            log.info("%s %s %s %s %.1fms %s", request.method, request.raw_path, status, operation, elapsed, note)


def _principals(config: EmulatorConfig) -> dict[str, ServicePrincipal]:
    """The development principal (every role), the one without a role, and those the service was started with."""
    everything = frozenset({ROLE_NAMES["batch-data-contributor"], ROLE_NAMES["reader"]})
    principals = [
        ServicePrincipal(DEV_CLIENT_ID, DEV_CLIENT_SECRET, config.sp_certificate, DEV_OBJECT_ID, everything),
        ServicePrincipal(DEV_NO_ROLE_CLIENT_ID, DEV_NO_ROLE_CLIENT_SECRET, None, DEV_NO_ROLE_OBJECT_ID),
        *config.principals,
    ]
    return {principal.client_id: principal for principal in principals}


def _retry_after(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)


def _check_body_size(request: web.Request) -> None:
    """A body over the limit is refused from its Content-Length, before it is read."""
    declared = request.content_length
    if declared is not None and declared >= MAX_BODY_BYTES:
        raise request_body_too_large(MAX_BODY_BYTES)


def _check_query(request: web.Request) -> None:
    version = request.query.get("api-version")
    if not version:
        raise BatchServiceError(
            400,
            "MissingRequiredQueryParameter",
            "A query parameter that's mandatory for this request is not specified.",
            [("QueryParameterName", "api-version")],
        )
    if version not in SUPPORTED_API_VERSIONS:
        raise invalid_query("api-version", version, f"Supported versions: {', '.join(SUPPORTED_API_VERSIONS)}.")
    timeout = request.query.get("timeOut") or request.query.get("timeout")
    if timeout is not None and not timeout.isdigit():
        raise invalid_query("timeOut", timeout, "The value must be a number of seconds.")


def _check_path(params: dict[str, str]) -> None:
    """Ids and file paths arrive percent-encoded: a NUL in one names nothing that can exist."""
    for name, value in params.items():
        if "\x00" in value:
            raise BatchServiceError(
                400,
                "InvalidUri",
                "The requested URI does not represent any resource on the server.",
                [("Reason", f"The {name} contains a character that is not allowed (U+0000).")],
            )


async def _check_body_integrity(request: web.Request) -> None:
    """Content-Length is signed; a body that does not match it was changed on the way."""
    declared = request.headers.get("Content-Length")
    if declared is None or request.method in ("GET", "HEAD"):
        return
    body = await request.read()
    if len(body) != int(declared):
        raise authentication_failed("The request body does not match the signed Content-Length.")
    md5 = request.headers.get("Content-MD5")
    if md5 and base64.b64encode(hashlib.md5(body).digest()).decode() != md5:
        raise BatchServiceError(400, "Md5Mismatch", "The MD5 value specified in the request did not match the body.")
