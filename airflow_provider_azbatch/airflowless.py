"""The provider's code in a process that must not import Airflow: a ``torchx`` command line on an account given
by URL, or by a connection an ``AIRFLOW_CONN_<ID>`` environment variable holds (docs/howto/torchx.md).

Importing Airflow takes seconds, most of a ``torchx status``. The modules a command line uses (hooks, submission,
pools, workspaces, the scheduler) reach Airflow only through ``compat.py``; the operators, sensors, triggers and the
``airflow azbatch`` commands import it directly, and a command line does not import them. Once :func:`activate` is
called, before compat is first imported, compat hands out the stand-ins below instead: Airflow's exception classes
as plain exceptions, a hook base whose connections come from the environment alone, ``[azbatch]`` options from
``AIRFLOW__AZBATCH__*`` variables (no ``airflow.cfg``: reading it is Airflow's configuration machinery), no
metrics, no secret masker and no lineage. A process that has imported compat with Airflow keeps it:
:func:`activate` then says no. Only a ``torchx`` command line activates it (``torchx/account.py``): a program that
imports Airflow later, to run tasks, needs Airflow's own classes.

The environment holds a connection as Airflow's environment variables backend reads it: JSON (a value starting
with ``{``) or a connection URI.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

CONN_ENV_PREFIX = "AIRFLOW_CONN_"
# Airflow asks a configured secrets backend before the environment: with one, the environment's answer may not
# be Airflow's.
SECRETS_BACKEND_ENV = "AIRFLOW__SECRETS__BACKEND"
_STATE = {"active": False}


def active() -> bool:
    """Whether this process runs the provider without Airflow."""
    return _STATE["active"]


def activate() -> bool:
    """Run the provider without Airflow in this process, if it has not imported Airflow or the provider's
    compat module yet (then it stays with Airflow: False)."""
    if _STATE["active"]:
        return True
    if "airflow" in sys.modules or "airflow_provider_azbatch.compat" in sys.modules:
        return False
    _STATE["active"] = True
    return True


# -- connections from the environment ------------------------------------------------------------------------
class ConnectionFormatError(ValueError):
    """An ``AIRFLOW_CONN_<ID>`` variable that is neither connection JSON nor a connection URI."""


@dataclass
class EnvConnection:
    """A connection as Airflow's environment variables backend would read it (the fields the provider reads)."""

    conn_id: str
    conn_type: str | None = None
    host: str | None = None
    schema: str | None = None
    login: str | None = None
    password: str | None = None
    port: int | None = None
    extra: str | None = None
    extra_dejson: dict[str, Any] = field(default_factory=dict)


def env_var(conn_id: str) -> str:
    return CONN_ENV_PREFIX + conn_id.upper()


def env_connection(conn_id: str) -> EnvConnection | None:
    """The connection ``AIRFLOW_CONN_<ID>`` holds, None without one (or when a secrets backend is configured:
    Airflow would ask it first)."""
    if os.environ.get(SECRETS_BACKEND_ENV):
        return None
    value = os.environ.get(env_var(conn_id))
    if not value:
        return None
    if value.strip().startswith("{"):
        return _from_json(conn_id, value)
    return _from_uri(conn_id, value)


def _extra(conn_id: str, extra: Any) -> tuple[str | None, dict[str, Any]]:
    if extra is None or extra == "":
        return None, {}
    text = extra if isinstance(extra, str) else json.dumps(extra)
    try:
        parsed = json.loads(text)
    except ValueError:
        raise ConnectionFormatError(f"{env_var(conn_id)}: its extra is not JSON") from None
    return text, parsed if isinstance(parsed, dict) else {}


def _from_json(conn_id: str, value: str) -> EnvConnection:
    try:
        fields = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ConnectionFormatError(f"{env_var(conn_id)} is not connection JSON ({exc.msg})") from None
    if not isinstance(fields, dict):
        raise ConnectionFormatError(f"{env_var(conn_id)} is not connection JSON (an object)")
    extra, extra_dejson = _extra(conn_id, fields.get("extra"))
    port = fields.get("port")
    try:
        port = int(port) if port else None
    except ValueError:
        raise ConnectionFormatError(f"{env_var(conn_id)}: port {port!r} is not a number") from None
    return EnvConnection(
        conn_id=conn_id,
        conn_type=_conn_type(fields.get("conn_type")),
        host=fields.get("host"),
        schema=fields.get("schema"),
        login=fields.get("login"),
        password=fields.get("password"),
        port=port,
        extra=extra,
        extra_dejson=extra_dejson,
    )


def _conn_type(conn_type: str | None) -> str | None:
    if conn_type == "postgresql":
        return "postgres"
    return conn_type.replace("-", "_") if conn_type else conn_type


def _hostname(parts: Any) -> str:
    """The host as Airflow reads it: a host with a path in it (``/``) keeps its case and its path."""
    hostname = unquote(parts.hostname or "")
    if "/" in hostname:
        hostname = parts.netloc
        if "@" in hostname:
            hostname = hostname.rsplit("@", 1)[1]
        if ":" in hostname:
            hostname = hostname.split(":", 1)[0]
        hostname = unquote(hostname)
    return hostname


def _from_uri(conn_id: str, uri: str) -> EnvConnection:
    """Airflow's connection URI (``Connection.from_uri``): ``azbatch://login:password@host/?extra=...``, a host
    with its own scheme written ``azbatch://https%3A%2F%2Fhost`` or ``azbatch://https://host``."""
    schemes = uri.count("://")
    if schemes == 0 or schemes > 2:
        raise ConnectionFormatError(f"{env_var(conn_id)} is neither connection JSON nor a connection URI")
    with_protocol = schemes == 2
    conn_type = urlsplit(uri).scheme
    rest = uri.replace(f"{conn_type}://", "" if with_protocol else "//")
    if with_protocol:
        head = rest.split("://", 1)[0]
        if "@" in head or ":" in head:
            raise ConnectionFormatError(f"{env_var(conn_id)} is not a valid connection URI")
    try:
        parts = urlsplit(rest)
        port = parts.port
    except ValueError as exc:
        raise ConnectionFormatError(f"{env_var(conn_id)} is not a valid connection URI ({exc})") from None
    host = _hostname(parts)
    if host and with_protocol:
        host = f"{parts.scheme}://{host}"
    schema = unquote(parts.path[1:]) if parts.path[1:] else parts.path[1:]
    extra_text: Any = None
    if parts.query:
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        extra_text = query["__extra__"] if "__extra__" in query else json.dumps(query)
    extra, extra_dejson = _extra(conn_id, extra_text)
    return EnvConnection(
        conn_id=conn_id,
        conn_type=_conn_type(conn_type),
        host=host,
        schema=schema,
        login=unquote(parts.username) if parts.username else parts.username,
        password=unquote(parts.password) if parts.password else parts.password,
        port=port,
        extra=extra,
        extra_dejson=extra_dejson,
    )


# -- what compat hands out without Airflow ------------------------------------------------------------------
# Airflow's exception classes, as plain exceptions (no docstrings: scripts/errors_page.py reads the provider's
# exception docstrings as what each error means, and these mean what Airflow's do).
class AirflowException(Exception):
    pass


class AirflowFailException(AirflowException):
    pass


class AirflowNotFoundException(AirflowException):
    """A connection the command needs is not defined where it looks for connections."""


class AirflowSkipException(AirflowException):
    pass


class AirflowTaskTimeout(AirflowException):
    pass


class TaskDeferralError(AirflowException):
    pass


class TaskDeferralTimeout(AirflowException):
    pass


class BaseHook:
    """A hook base whose connections come from ``AIRFLOW_CONN_<ID>`` alone."""

    def __init__(self, logger_name: str | None = None) -> None:
        self.log = logging.getLogger(logger_name or f"{type(self).__module__}.{type(self).__name__}")

    @classmethod
    def get_connection(cls, conn_id: str) -> EnvConnection:
        conn = env_connection(conn_id)
        if conn is None:
            raise AirflowNotFoundException(
                f"The conn_id `{conn_id}` isn't defined: this torchx command line runs without Airflow (its account's "
                f"connection is in the environment), so it reads connections from {env_var(conn_id)} only: set it"
            )
        return conn


class EnvConf:
    """``[section] option`` from ``AIRFLOW__<SECTION>__<OPTION>``, else the fallback (no ``airflow.cfg``)."""

    def get(self, section: str, option: str, fallback: Any = None) -> Any:
        return os.environ.get(f"AIRFLOW__{section.upper()}__{option.upper()}", fallback)


conf = EnvConf()
