"""The ``[azbatch]`` configuration section, with the defaults documented in the provider info."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from airflow_provider_azbatch.get_provider_info import CONFIG_OPTIONS

SECTION = "azbatch"
T = TypeVar("T")


def _raw(option: str) -> str:
    default: str = CONFIG_OPTIONS[option]["default"]
    try:
        from airflow_provider_azbatch.compat import conf
    except ImportError:  # pragma: no cover - outside an Airflow installation
        return default
    return str(conf.get(SECTION, option, fallback=default))


def get_str(option: str) -> str:
    return _raw(option)


def get_int(option: str) -> int:
    return _parsed(option, int, "an integer")


def get_float(option: str) -> float:
    return _parsed(option, float, "a number")


def _parsed(option: str, parse: Callable[[str], T], what: str) -> T:
    value = _raw(option)
    try:
        return parse(value)
    except ValueError:
        raise ValueError(f"[{SECTION}] {option} must be {what}, got {value!r}") from None


def get_bool(option: str) -> bool:
    value = _raw(option).strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"[{SECTION}] {option} must be True or False, got {value!r}")
