"""Which completed jobs a watcher fires for: job id prefix, metadata, pool and outcome (no Airflow, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_azbatch.model.records import JobChange

# What a watcher may ask for as ``outcome``: None (or "any") fires for both.
OUTCOMES = ("succeeded", "failed")


class JobFilterError(ValueError):
    """A watcher's filter that cannot work, named with its fix."""


@dataclass(frozen=True)
class JobFilter:
    """The jobs a watcher fires for: every field given must hold (None or empty: any)."""

    job_id_prefix: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    pool_id: str | None = None
    outcome: str | None = None

    @classmethod
    def of(
        cls,
        *,
        job_id_prefix: str | None = None,
        metadata: Mapping[str, str] | None = None,
        pool_id: str | None = None,
        outcome: str | None = None,
    ) -> JobFilter:
        """The filter, checked: a clear error naming the argument and its fix for what cannot work."""
        if job_id_prefix is not None and (not isinstance(job_id_prefix, str) or not job_id_prefix):
            raise JobFilterError(
                f"job_id_prefix={job_id_prefix!r}: give the start of the job ids as a non-empty string, or leave it out"
            )
        if pool_id is not None and (not isinstance(pool_id, str) or not pool_id):
            raise JobFilterError(f"pool_id={pool_id!r}: give a pool id as a non-empty string, or leave it out")
        if metadata is not None:
            if not isinstance(metadata, Mapping):
                raise JobFilterError(
                    f"metadata={metadata!r}: give the job metadata to match as a dict of names to values "
                    '(e.g. {"torchx-app": "train"})'
                )
            for name, value in metadata.items():
                if not isinstance(name, str) or not name or not isinstance(value, str):
                    raise JobFilterError(
                        f"metadata[{name!r}]={value!r}: job metadata names and values are strings, as Batch keeps "
                        f'them (e.g. {{"epochs": "10"}}, not {{"epochs": 10}})'
                    )
        if outcome == "any":
            outcome = None
        if outcome is not None and outcome not in OUTCOMES:
            raise JobFilterError(
                f"outcome={outcome!r}: give one of {', '.join(repr(o) for o in OUTCOMES)}, or leave it out for both"
            )
        return cls(job_id_prefix, dict(metadata or {}), pool_id, outcome)

    def matches_listing(self, change: JobChange) -> bool:
        """Whether a completed job, as the account view listed it, passes the filters a listing can answer
        (id, metadata, pool); its outcome needs its tasks (:meth:`matches_outcome`)."""
        if self.job_id_prefix is not None and not change.id.startswith(self.job_id_prefix):
            return False
        if self.pool_id is not None and pool_of(change.fields) != self.pool_id:
            return False
        if self.metadata:
            have = metadata_of(change.fields)
            if any(have.get(name) != value for name, value in self.metadata.items()):
                return False
        return True

    def matches_outcome(self, outcome: str) -> bool:
        return self.outcome is None or self.outcome == outcome


def metadata_of(fields: Mapping[str, Any]) -> dict[str, str]:
    """A listed job's metadata as a dict (Batch sends a list of name/value pairs)."""
    items = fields.get("metadata") or ()
    return {
        str(item["name"]): str(item.get("value", "")) for item in items if isinstance(item, Mapping) and "name" in item
    }


def pool_of(fields: Mapping[str, Any]) -> str | None:
    """The pool a listed job ran on: where it ran (``executionInfo.poolId``, an auto pool's too), else where it
    was sent (``poolInfo.poolId``)."""
    execution = fields.get("executionInfo") or {}
    pool = execution.get("poolId") if isinstance(execution, Mapping) else None
    if pool:
        return str(pool)
    info = fields.get("poolInfo") or {}
    pool = info.get("poolId") if isinstance(info, Mapping) else None
    return str(pool) if pool else None
