"""Small helpers shared by the tests."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(check: Callable[[], T], timeout: float = 30.0, interval: float = 0.1, what: str = "condition") -> T:
    """Poll ``check`` until it returns something truthy, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def sh(script: str) -> str:
    """A command line running ``script`` under a shell: Batch runs command lines without one, as the service does."""
    return "/bin/sh -c " + shlex.quote(script)
