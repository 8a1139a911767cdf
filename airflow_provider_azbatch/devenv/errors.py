"""The one error the environment reports to its user: a message that says what to do, never a traceback."""

from __future__ import annotations


class DevEnvError(Exception):
    pass
