"""What pools, jobs and tasks share: identity on the wire, ETags and the state timeline."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from . import validation as v
from .clock import iso, new_etag, utcnow


class Entity:
    def __init__(self, state: str, spec: dict[str, Any]) -> None:
        now = utcnow()
        self.id: str = spec["id"]
        # The entity as the client gave it (and as updates changed it), with the service's defaults filled in.
        self.spec = spec
        self.creation_time: datetime = now
        self.last_modified: datetime = now
        self.etag: str = new_etag()
        self.state: str = state
        self.state_time: datetime = now
        self.previous_state: str | None = None
        self.previous_state_time: datetime | None = None

    @property
    def key(self) -> str:
        """Ids are case-preserving but case-insensitive."""
        return self.id.lower()

    def touch(self) -> None:
        """A change the client made: new ETag and Last-Modified (state changes do not count)."""
        self.etag = new_etag()
        self.last_modified = utcnow()

    def set_state(self, state: str) -> None:
        if state == self.state:
            return
        self.previous_state, self.previous_state_time = self.state, self.state_time
        self.state, self.state_time = state, utcnow()

    def _wire_start(self, url: str, fields: Collection[str] | None) -> dict[str, Any]:
        """id, displayName, url, eTag, times and state, as every entity starts; only ``fields`` if given."""
        out: dict[str, Any] = {"id": self.id}
        if "displayName" in self.spec and (fields is None or "displayName" in fields):
            out["displayName"] = self.spec["displayName"]
        if fields is None:
            out.update(
                url=url,
                eTag=self.etag,
                lastModified=iso(self.last_modified),
                creationTime=iso(self.creation_time),
                state=self.state,
                stateTransitionTime=iso(self.state_time),
            )
            if self.previous_state is not None and self.previous_state_time is not None:
                out["previousState"] = self.previous_state
                out["previousStateTransitionTime"] = iso(self.previous_state_time)
            return out
        for name, value in (
            ("url", url),
            ("eTag", self.etag),
            ("lastModified", self.last_modified),
            ("creationTime", self.creation_time),
            ("state", self.state),
            ("stateTransitionTime", self.state_time),
            ("previousState", self.previous_state),
            ("previousStateTransitionTime", self.previous_state_time),
        ):
            if name in fields and value is not None:
                out[name] = iso(value) if isinstance(value, datetime) else value
        return out

    def _wire_spec(self, out: dict[str, Any], fields: Collection[str] | None) -> None:
        """The rest of the spec, without secrets (the service never returns passwords)."""
        for name, value in self.spec.items():
            if name not in out and name != "displayName" and (fields is None or name in fields):
                out[name] = v.without_secrets(value)
