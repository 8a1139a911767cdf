"""What every Batch entity shares: identity on the wire, ETags and the state timeline."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .clock import iso, new_etag, utcnow


class Entity:
    def __init__(self, state: str) -> None:
        now = utcnow()
        self.creation_time: datetime = now
        self.last_modified: datetime = now
        self.etag: str = new_etag()
        self.state: str = state
        self.state_time: datetime = now
        self.previous_state: str | None = None
        self.previous_state_time: datetime | None = None

    def touch(self) -> None:
        """A change the client made: new ETag and Last-Modified (state changes do not count)."""
        self.etag = new_etag()
        self.last_modified = utcnow()

    def set_state(self, state: str) -> None:
        if state == self.state:
            return
        self.previous_state, self.previous_state_time = self.state, self.state_time
        self.state, self.state_time = state, utcnow()

    def _header(self, url: str) -> dict[str, Any]:
        return {
            "url": url,
            "eTag": self.etag,
            "lastModified": iso(self.last_modified),
            "creationTime": iso(self.creation_time),
        }

    def _state_fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "stateTransitionTime": iso(self.state_time)}
        if self.previous_state is not None and self.previous_state_time is not None:
            out["previousState"] = self.previous_state
            out["previousStateTransitionTime"] = iso(self.previous_state_time)
        return out
