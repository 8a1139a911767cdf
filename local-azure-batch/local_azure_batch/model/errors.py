"""The service's errors: its own codes, HTTP status codes and messages, raised anywhere in the model.

Codes, statuses and messages follow the service's table ("Batch Status and Error Codes",
learn.microsoft.com/rest/api/batchservice/batch-status-and-error-codes) where it has them. The REST
layer (``rest/wire.py``) only renders them, in the body the real service sends (recorded)::

    {"odata.metadata": ".../$metadata#Microsoft.Azure.Batch.Protocol.Entities.Container.errors/@Element",
     "code": "JobExists",
     "message": {"lang": "en-US", "value": "The specified job already exists.\\nRequestId:...\\nTime:..."},
     "values": [{"key": "...", "value": "..."}]}
"""

from __future__ import annotations

from collections.abc import Sequence


class BatchServiceError(Exception):
    """Raised anywhere in the service; the HTTP layer answers it with the service's error response."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        values: Sequence[tuple[str, str]] = (),
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.values = list(values)
        self.headers = headers or {}


def not_found(kind: str) -> BatchServiceError:
    return BatchServiceError(404, f"{kind}NotFound", f"The specified {kind.lower()} does not exist.")


def already_exists(kind: str) -> BatchServiceError:
    return BatchServiceError(409, f"{kind}Exists", f"The specified {kind.lower()} already exists.")


def invalid_property(name: str, value: object, reason: str) -> BatchServiceError:
    return BatchServiceError(
        400,
        "InvalidPropertyValue",
        "The value provided for one of the properties in the request body is invalid.",
        [("PropertyName", name), ("PropertyValue", "" if value is None else str(value)), ("Reason", reason)],
    )


def missing_property(name: str) -> BatchServiceError:
    return BatchServiceError(
        400,
        "MissingRequiredProperty",
        "A required property was not specified in the request body.",
        [("PropertyName", name)],
    )


def invalid_body(reason: str) -> BatchServiceError:
    return BatchServiceError(
        400,
        "InvalidRequestBody",
        "The specified Request Body is not syntactically valid.",
        [("Reason", reason)],
    )


def invalid_query(name: str, value: str, reason: str) -> BatchServiceError:
    return BatchServiceError(
        400,
        "InvalidQueryParameterValue",
        "Value for one of the query parameters specified in the request URI is invalid.",
        [("QueryParameterName", name), ("QueryParameterValue", value), ("Reason", reason)],
    )


def conflict(code: str, message: str, *values: tuple[str, str]) -> BatchServiceError:
    return BatchServiceError(409, code, message, values)


def authentication_failed(detail: str) -> BatchServiceError:
    return BatchServiceError(
        403,
        "AuthenticationFailed",
        "Server failed to authenticate the request. Make sure the value of Authorization header is formed "
        "correctly including the signature.",
        [("AuthenticationErrorDetail", detail)],
    )


def authorization_failure() -> BatchServiceError:
    """A valid token of a principal without a role on the account's data plane (as a real answer reads)."""
    return BatchServiceError(403, "AuthorizationFailure", "This request is not authorized to perform this operation.")


def request_body_too_large(limit_bytes: int) -> BatchServiceError:
    # The code is what azure-batch's create_tasks looks for before it halves its chunk of tasks.
    return BatchServiceError(
        413,
        "RequestBodyTooLarge",
        "The size of the request body exceeds the maximum size permitted.",
        [("Reason", f"The request body is limited to {limit_bytes} bytes.")],
    )


def active_job_quota_reached() -> BatchServiceError:
    return conflict(
        "ActiveJobAndScheduleQuotaReached", "Active job and schedule quota for the account has been reached."
    )


def pool_quota_reached() -> BatchServiceError:
    return conflict("PoolQuotaReached", "Pool quota for the account has been reached.")
