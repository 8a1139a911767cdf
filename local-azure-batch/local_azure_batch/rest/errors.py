"""Errors in the Batch service's own codes, status codes and body shape.

The body is what the real service sends (recorded)::

    {"odata.metadata": ".../$metadata#Microsoft.Azure.Batch.Protocol.Entities.Container.errors/@Element",
     "code": "JobExists",
     "message": {"lang": "en-US", "value": "The specified job already exists.\\nRequestId:...\\nTime:..."},
     "values": [{"key": "...", "value": "..."}]}
"""

from __future__ import annotations

from collections.abc import Sequence


class BatchServiceError(Exception):
    """Raised anywhere below the HTTP layer; turned into the service's error response."""

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
