"""The ``[azbatch]`` configuration section, with the defaults documented in the provider info."""

from __future__ import annotations

from airflow_provider_azbatch.get_provider_info import CONFIG_OPTIONS

SECTION = "azbatch"


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
    value = _raw(option)
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"[{SECTION}] {option} must be an integer, got {value!r}") from None


def get_float(option: str) -> float:
    value = _raw(option)
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"[{SECTION}] {option} must be a number, got {value!r}") from None


def get_bool(option: str) -> bool:
    value = _raw(option).strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"[{SECTION}] {option} must be True or False, got {value!r}")
