"""Which Batch errors are worth waiting out, and for how long."""

from __future__ import annotations

import random
from dataclasses import dataclass

from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})


def is_transient(exc: BaseException) -> bool:
    """Throttling, server errors and dropped connections pass; auth failures and missing jobs do not."""
    if isinstance(exc, (ClientAuthenticationError, ResourceNotFoundError)):
        return False
    if isinstance(exc, (ServiceRequestError, ServiceResponseError, ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, HttpResponseError):
        return exc.status_code in TRANSIENT_STATUS or exc.status_code is None
    return False


def retry_after_seconds(exc: BaseException) -> float | None:
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


@dataclass
class Backoff:
    """Exponential backoff with jitter, never shorter than what the service asked for."""

    initial: float = 1.0
    maximum: float = 60.0
    attempt: int = 0

    def next_delay(self, retry_after: float | None = None) -> float:
        base = min(self.maximum, self.initial * (2**self.attempt))
        self.attempt += 1
        delay = base * (0.5 + random.random() / 2)
        return max(delay, retry_after or 0.0)

    def reset(self) -> None:
        self.attempt = 0
