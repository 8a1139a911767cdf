"""What a Batch (azure-core) error means: its code, whether it is worth waiting out, what it says.

The SDK maps every 409 to ``ResourceExistsError`` and most other statuses to ``HttpResponseError``;
what the error *is* lies in its code (``JobExists`` or ``ActiveJobAndScheduleQuotaReached`` are both
409), so decisions here look at the code first and the status second.
"""

from __future__ import annotations

from typing import Any

from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)

# Statuses azure-core itself retries (safe to repeat for this provider's idempotent requests).
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})

# Quotas a submission can run into, by the service's error code: what each one limits.
QUOTA_CODES = {
    "ActiveJobAndScheduleQuotaReached": "active jobs and job schedules",
    "PoolQuotaReached": "pools",
    "AccountCoreQuotaReached": "dedicated cores",
    "AccountLowPriorityCoreQuotaReached": "spot/low-priority cores",
    "AccountVMSeriesCoreQuotaReached": "cores of this VM series",
}


def error_code(exc: BaseException) -> str | None:
    """The service's error code (``JobExists``, ``PoolQuotaReached``...), if the error carries one."""
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None)
    return str(code) if code else None


def is_quota_error(exc: BaseException) -> bool:
    return error_code(exc) in QUOTA_CODES


def is_auth_failure(exc: BaseException) -> bool:
    """The service (or the identity provider) refused the connection's credentials."""
    if isinstance(exc, ClientAuthenticationError):
        return True
    return error_code(exc) in ("AuthenticationFailed", "AuthorizationFailure", "InsufficientAccountPermissions")


def is_transient(exc: BaseException) -> bool:
    """Throttling, server errors and dropped connections pass; auth failures and missing jobs do not."""
    if isinstance(exc, (ClientAuthenticationError, ResourceNotFoundError)):
        return False
    if isinstance(exc, (ServiceRequestError, ServiceResponseError, ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, HttpResponseError):
        return exc.status_code in TRANSIENT_STATUS or exc.status_code is None
    return False


def is_refused_request(exc: BaseException) -> bool:
    """Batch refused the request itself (400: a property, header or query parameter it does not accept)."""
    return isinstance(exc, HttpResponseError) and exc.status_code == 400


def refusal_hint(exc: BaseException) -> str:
    """What to change, for the refusals a user's own value causes (a VM size Batch does not know)."""
    details = {d.key: d.value for d in getattr(getattr(exc, "model", None), "error_values", None) or []}
    if error_code(exc) == "InvalidPropertyValue" and details.get("PropertyName") == "vmSize":
        from difflib import get_close_matches

        from airflow_provider_azbatch.compute import load_catalog

        size = str(details.get("PropertyValue", "")).lower()
        close = get_close_matches(size, [vm.name for vm in load_catalog().sizes], n=1, cutoff=0.8)
        suggestion = f" (did you mean {close[0]}?)" if close else ""
        return f"; vm_size '{size}' is not a VM size Azure Batch supports{suggestion}"
    return ""


def retry_after_seconds(exc: BaseException) -> float | None:
    """How long the service asked us to wait (``Retry-After`` and its millisecond variants)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("x-ms-retry-after-ms", 0.001), ("Retry-After", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            continue
    return None


def describe_error(exc: BaseException) -> str:
    """``Code: message`` from a Batch error, without the RequestId/Time lines the service appends."""
    error = getattr(exc, "error", None)
    message = getattr(error, "message", None) or getattr(exc, "message", None) or str(exc)
    details = getattr(getattr(exc, "model", None), "error_values", None) or []
    return _describe(getattr(error, "code", None), message, details) or type(exc).__name__


def describe_batch_error(error: Any) -> str:
    """The same for a ``BatchError`` model (e.g. one task's error in an add-collection result)."""
    message = getattr(getattr(error, "message", None), "value", None) or ""
    return _describe(getattr(error, "code", None), message, getattr(error, "error_values", None) or [])


def _describe(code: str | None, message: Any, details: list[Any]) -> str:
    first = str(message).split("\n")[0].strip()
    extra = "; ".join(f"{d.key}={d.value}" for d in details if d.key != "AuthenticationErrorDetail")
    auth_detail = next((d.value for d in details if d.key == "AuthenticationErrorDetail"), None)
    text = f"{code}: {first}" if code else first
    if auth_detail:
        text += f" ({auth_detail})"
    if extra:
        text += f" [{extra}]"
    return text


def root_cause(exc: BaseException) -> str:
    """The innermost cause's first line (a refused connection, a TLS failure...)."""
    cause: BaseException = exc
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    return str(cause).split("\n")[0] or type(cause).__name__
