"""Waiting out a flaky Batch service: backoff between attempts, and how long an outage may last.

No I/O: the operator's wait loop, the trigger and the submission steps use these to decide how long to
sleep and when to give up.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass
class Backoff:
    """Exponential backoff with jitter, never shorter than what the service asked for (``Retry-After``)."""

    initial: float = 1.0
    maximum: float = 60.0
    attempt: int = 0

    def next_delay(self, retry_after: float | None = None) -> float:
        growth: int = 2**self.attempt  # typeshed types int ** int as Any (a negative power is a float)
        base = min(self.maximum, self.initial * growth)
        self.attempt += 1
        delay = base * (0.5 + random.random() / 2)
        return max(delay, retry_after or 0.0)

    def reset(self) -> None:
        self.attempt = 0


@dataclass
class Outage:
    """Consecutive failures of the service: since when, and whether they lasted too long."""

    limit: float
    since: float | None = None

    def failed(self, now: float) -> float:
        """Record a failure at ``now``; the seconds the outage has lasted so far."""
        if self.since is None:
            self.since = now
        return now - self.since

    def too_long(self, now: float) -> bool:
        return self.since is not None and now - self.since > self.limit

    def recovered(self) -> None:
        self.since = None
