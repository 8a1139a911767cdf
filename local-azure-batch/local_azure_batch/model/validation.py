"""Checks on request bodies, and the defaults the service fills in before it stores them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from local_azure_batch.lang.times import DurationError, format_duration, parse_duration

from .errors import invalid_property, missing_property

SECRETS = frozenset({"password", "accountKey", "sasKey"})
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ID_REASON = (
    "The id can contain any combination of alphanumeric characters including hyphens and underscores, "
    "and cannot contain more than 64 characters."
)


def require(body: Mapping[str, Any], name: str, path: str | None = None) -> Any:
    value = body.get(name)
    if value is None or value == "":
        raise missing_property(path or name)
    return value


def check_id(value: Any, name: str = "id") -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise invalid_property(name, value, ID_REASON)
    return value


def duration(body: dict[str, Any], name: str, default: str | None = None, path: str | None = None) -> None:
    """Normalise ``body[name]`` in place (``PT06M00S`` → ``PT6M``), or set the default."""
    value = body.get(name)
    if value is None:
        if default is not None:
            body[name] = default
        return
    try:
        body[name] = format_duration(parse_duration(value))
    except DurationError as exc:
        raise invalid_property(path or name, value, str(exc)) from None


def integer(
    body: Mapping[str, Any],
    name: str,
    minimum: int | None = None,
    maximum: int | None = None,
    path: str | None = None,
) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_property(path or name, value, "The value must be an integer.")
    if minimum is not None and value < minimum:
        raise invalid_property(path or name, value, f"The value must be at least {minimum}.")
    if maximum is not None and value > maximum:
        raise invalid_property(path or name, value, f"The value must be at most {maximum}.")
    return value


def enum(
    body: dict[str, Any],
    name: str,
    allowed: Iterable[str],
    default: str | None = None,
    path: str | None = None,
) -> str | None:
    """Case-insensitive like the service, stored in the canonical spelling."""
    value = body.get(name)
    if value is None:
        if default is not None:
            body[name] = default
        return default
    canonical = {option.lower(): option for option in allowed}
    if not isinstance(value, str) or value.lower() not in canonical:
        raise invalid_property(path or name, value, f"The value must be one of: {', '.join(canonical.values())}.")
    body[name] = canonical[value.lower()]
    return body[name]


def environment_settings(settings: Any, path: str) -> list[dict[str, str]]:
    if settings is None:
        return []
    if not isinstance(settings, list):
        raise invalid_property(path, settings, "The value must be a list of name/value pairs.")
    for index, item in enumerate(settings):
        if not isinstance(item, dict) or not item.get("name"):
            raise missing_property(f"{path}[{index}].name")
    return settings


def without_secrets(value: Any) -> Any:
    """The service never returns the passwords and keys it was given (registries, user accounts, mounts)."""
    if isinstance(value, dict):
        return {key: without_secrets(item) for key, item in value.items() if key not in SECRETS}
    if isinstance(value, list):
        return [without_secrets(item) for item in value]
    return value
