"""Timestamps and entity tags in the forms the Batch service puts on the wire."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from datetime import datetime, timezone
from email.utils import format_datetime

_etag_counter = itertools.count(1)
_etag_lock = threading.Lock()
# Real ETags look like 0x8DE2CC0A46B2A06: a FILETIME-like counter in hex, unquoted.
_ETAG_BASE = 0x8DE000000000000


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def iso(dt: datetime) -> str:
    """``2025-11-26T07:38:00.880834Z`` as in the service's JSON bodies."""
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc1123(dt: datetime) -> str:
    """``Wed, 26 Nov 2025 07:38:00 GMT`` as in the service's headers."""
    return format_datetime(dt.astimezone(timezone.utc), usegmt=True)


def new_etag() -> str:
    with _etag_lock:
        return f"0x{_ETAG_BASE + next(_etag_counter) * 0x1F3:X}"


def etags_after(etags: Iterable[str]) -> None:
    """New ETags come after these (entities loaded from a saved state), so that none is given out twice."""
    global _etag_counter
    highest = max((int(etag, 16) for etag in etags if etag.startswith("0x")), default=0)
    with _etag_lock:
        current = next(_etag_counter)
        _etag_counter = itertools.count(max(current, (highest - _ETAG_BASE) // 0x1F3 + 1))
