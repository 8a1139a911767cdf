"""User accounts a pool the provider creates defines on every node, for tasks that ``run_as`` one of them.

The service requires a password for each. It comes from ``conn_id`` (its password; login, if set, must be the
account's name) or, without one, is generated at random when the pool is created: tasks run as the user without
it, and nobody logs in with it. Either way it goes to the Batch service only (which never returns it), is
masked, and stays out of the pool's specification hash.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch.pools.errors import PoolStrategyError
from airflow_provider_azbatch.specs.identity import MAX_USER_NAME

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import ConnectionFields


@dataclass(frozen=True)
class PoolUser:
    """``PoolUser("builder", admin=True)``: a user account on every node of the pool.

    :param name: at most 20 characters.
    :param admin: an administrator (``elevationLevel`` admin) or not.
    :param conn_id: a connection holding its password (see the module docstring).
    :param uid, gid: its Linux user and group ids (both or neither); the service picks them otherwise.
    """

    name: str
    admin: bool = False
    conn_id: str | None = None
    uid: int | None = None
    gid: int | None = None

    def __post_init__(self) -> None:
        name = self.name
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_USER_NAME or any(c.isspace() for c in name):
            raise PoolStrategyError(f"users: a user name has 1 to 20 characters and no spaces, got {name!r}")
        if not isinstance(self.admin, bool):
            raise PoolStrategyError(f"users: PoolUser({name!r}).admin must be True or False, got {self.admin!r}")
        if (self.uid is None) != (self.gid is None):
            raise PoolStrategyError(f"users: PoolUser({name!r}) needs uid and gid together, or neither")
        for label, value in (("uid", self.uid), ("gid", self.gid)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise PoolStrategyError(f"users: PoolUser({name!r}).{label} must be a whole number >= 0, got {value!r}")

    def to_rest(self, password: str | None) -> dict[str, Any]:
        """The pool's ``userAccounts`` entry; ``password`` from the connection, or a new random one."""
        body: dict[str, Any] = {
            "name": self.name,
            "password": password or secrets.token_urlsafe(24),
            "elevationLevel": "admin" if self.admin else "nonadmin",
        }
        if self.uid is not None:
            body["linuxUserConfiguration"] = {"uid": self.uid, "gid": self.gid}
        return body


def password_from_connection(user: PoolUser, conn: ConnectionFields) -> str:
    if conn.login and conn.login != user.name:
        raise PoolStrategyError(
            f"Connection '{conn.conn_id}' (users: PoolUser({user.name!r})): its login {conn.login!r} is not the user's "
            "name; leave login empty or make it the user's name"
        )
    if not conn.password:
        raise PoolStrategyError(f"Connection '{conn.conn_id}' (users: PoolUser({user.name!r})): password is missing")
    return str(conn.password)
