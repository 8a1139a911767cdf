"""What the preflight found: one finding per thing a run needs, each ``ok`` or what is wrong and its fix.

A finding's ``check`` is a stable id (``batch.create_job``, ``storage.sas``, ``pool[nightly.score].quota``...)
for scripts reading ``--output json``; ``detail`` says what was found, ``fix`` what to do: for a failure, how to
repair it; for an unknown, why it could not be read and how to make it readable. Nothing here holds a secret:
findings name identities, roles and resources, never keys, tokens or SAS.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class Status(str, Enum):
    OK = "ok"
    # Something a run needs is missing or refused: the check exits 1.
    FAILED = "failed"
    # Not needed by what was checked, but worth knowing (a run that needs it would fail).
    WARNING = "warning"
    # Could not be read (no permission to read it, no subscription given): neither ok nor failed.
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status.value, "detail": self.detail, "fix": self.fix}


def ok(check: str, detail: str) -> Finding:
    return Finding(check, Status.OK, detail)


def failed(check: str, detail: str, *, fix: str) -> Finding:
    return Finding(check, Status.FAILED, detail, fix)


def warning(check: str, detail: str, *, fix: str) -> Finding:
    return Finding(check, Status.WARNING, detail, fix)


def unknown(check: str, detail: str, *, fix: str) -> Finding:
    return Finding(check, Status.UNKNOWN, detail, fix)


@dataclass(frozen=True)
class Identity:
    """Who the connection authenticates as: ``kind`` shared_key (the account), or the Entra ID principal."""

    kind: str
    description: str
    tenant_id: str | None = None
    object_id: str | None = None
    application_id: str | None = None
    # For ``az role assignment create --assignee-principal-type``: ServicePrincipal or User.
    principal_type: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PreflightReport:
    """Every finding of one check of a connection, in the order they were made."""

    conn_id: str
    account_name: str | None = None
    account_url: str | None = None
    identity: Identity | None = None
    findings: list[Finding] = field(default_factory=list)

    def add(self, finding: Finding) -> Finding:
        self.findings.append(finding)
        return finding

    def count(self, status: Status) -> int:
        return sum(1 for finding in self.findings if finding.status is status)

    @property
    def ok(self) -> bool:
        """Nothing a run needs is missing (unknowns are not failures: see ``exit_code(strict=True)``)."""
        return self.count(Status.FAILED) == 0

    def exit_code(self, *, strict: bool = False) -> int:
        """0 when ready; 1 when something failed (or, ``strict``, could not be read)."""
        if not self.ok or (strict and self.count(Status.UNKNOWN)):
            return 1
        return 0

    def finding(self, check: str) -> Finding | None:
        return next((finding for finding in self.findings if finding.check == check), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "conn_id": self.conn_id,
            "account_name": self.account_name,
            "account_url": self.account_url,
            "identity": self.identity.to_json() if self.identity is not None else None,
            "ok": self.ok,
            "counts": {status.value: self.count(status) for status in Status},
            "findings": [finding.to_json() for finding in self.findings],
        }
