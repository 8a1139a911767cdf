"""SDK enum values as the wire strings they stand for."""

from __future__ import annotations

from typing import Any


def enum_value(value: Any) -> str:
    """SDK enums are str subclasses whose str() is 'Class.MEMBER'; the wire value is what counts."""
    return str(getattr(value, "value", value))
