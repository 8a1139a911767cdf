"""Who a task runs as on its node: an automatic user (administrator or not, shared by the pool or the task's own),
or a named user account of the pool.

``run_as="admin"`` or ``"nonadmin"`` is the pool-wide automatic user (the service's default scope);
``RunAs("admin", scope="task")`` an automatic user of the task alone; ``RunAs(user="builder")`` (or
``{"user": "builder"}``) a user account the pool defines. Without ``run_as`` the service runs a task as the
pool's non-administrator automatic user.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.specs.validation import unknown_fields

ELEVATIONS = ("nonadmin", "admin")
SCOPES = ("pool", "task")
# Batch user account names: up to 20 characters.
MAX_USER_NAME = 20


@dataclass(frozen=True)
class RunAs:
    """An automatic user (``elevation``: ``nonadmin`` or ``admin``, ``scope``: ``pool`` or ``task``) or a pool's
    named ``user``."""

    elevation: str = "nonadmin"
    scope: str = "pool"
    user: str | None = None

    def __post_init__(self) -> None:
        self.check("run_as")

    def check(self, where: str) -> None:
        if self.user is not None:
            if not isinstance(self.user, str) or not self.user.strip() or len(self.user) > MAX_USER_NAME:
                raise AzureBatchValidationError(
                    f"{where}.user",
                    f"must be the name of a user account of the pool (1 to 20 characters), got {self.user!r}",
                )
            if (self.elevation, self.scope) != ("nonadmin", "pool"):
                raise AzureBatchValidationError(
                    where, "names a user account: its elevation comes from the account, give user alone"
                )
            return
        if self.elevation not in ELEVATIONS:
            raise AzureBatchValidationError(
                f"{where}.elevation", f"must be 'nonadmin' or 'admin', got {self.elevation!r}"
            )
        if self.scope not in SCOPES:
            raise AzureBatchValidationError(f"{where}.scope", f"must be 'pool' or 'task', got {self.scope!r}")

    @classmethod
    def parse(cls, value: Any, where: str) -> RunAs | None:
        """``None``, ``"admin"``/``"nonadmin"``, a RunAs, or a mapping of its fields."""
        if value is None or isinstance(value, RunAs):
            return value
        if isinstance(value, str):
            if value in ELEVATIONS:
                return cls(value)
            raise AzureBatchValidationError(
                where,
                f"must be 'admin', 'nonadmin', RunAs(elevation, scope) or RunAs(user=<pool user>), got {value!r}",
            )
        if isinstance(value, Mapping):
            unknown = unknown_fields(where, value, ("elevation", "scope", "user"))
            if unknown is not None:
                raise unknown
            try:
                return cls(**dict(value))
            except AzureBatchValidationError as exc:
                raise AzureBatchValidationError(exc.field.replace("run_as", where, 1), exc.problem) from None
        raise AzureBatchValidationError(
            where, f"must be 'admin', 'nonadmin', a RunAs or a mapping, got {type(value).__name__} {value!r}"
        )

    @property
    def elevated(self) -> bool:
        return self.user is None and self.elevation == "admin"

    def to_rest(self) -> dict[str, Any]:
        """The REST ``userIdentity``."""
        if self.user is not None:
            return {"username": self.user}
        return {"autoUser": {"scope": self.scope, "elevationLevel": self.elevation}}

    def describe(self) -> str:
        if self.user is not None:
            return f"user {self.user}"
        return f"{'an administrator' if self.elevated else 'a non-administrator'} ({self.scope} automatic user)"
