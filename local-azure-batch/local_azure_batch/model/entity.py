"""What pools, jobs and tasks share: identity on the wire, ETags and the state timeline."""

from __future__ import annotations

from collections.abc import Callable, Collection
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
        if fields is not None:
            # A list with $select (a poller's "id,state") renders just that, not the whole entity.
            for name in fields:
                render = _COMMON_FIELDS.get(name)
                if render is not None and (value := render(self, url)) is not None:
                    out[name] = value
            return out
        if "displayName" in self.spec:
            out["displayName"] = self.spec["displayName"]
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

    def _wire_spec(self, out: dict[str, Any], fields: Collection[str] | None) -> None:
        """The rest of the spec, without secrets (the service never returns passwords)."""
        if fields is not None:
            for name in fields:
                if name not in out and name in self.spec:
                    out[name] = v.without_secrets(self.spec[name])
            return
        for name, value in self.spec.items():
            if name not in out and name != "displayName":
                out[name] = v.without_secrets(value)


def _iso_or_none(value: datetime | None) -> str | None:
    return None if value is None else iso(value)


_COMMON_FIELDS: dict[str, Callable[[Entity, str], Any]] = {
    "displayName": lambda entity, url: entity.spec.get("displayName"),
    "url": lambda entity, url: url,
    "eTag": lambda entity, url: entity.etag,
    "lastModified": lambda entity, url: iso(entity.last_modified),
    "creationTime": lambda entity, url: iso(entity.creation_time),
    "state": lambda entity, url: entity.state,
    "stateTransitionTime": lambda entity, url: iso(entity.state_time),
    "previousState": lambda entity, url: entity.previous_state,
    "previousStateTransitionTime": lambda entity, url: _iso_or_none(entity.previous_state_time),
}
