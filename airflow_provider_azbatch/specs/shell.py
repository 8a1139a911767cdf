"""Command lines as the Batch node agent runs them: not under a shell, so the provider hands them to one.

The Batch service runs a task's command line directly ("does not run under a shell"); this provider
documents commands as shell commands (pipes, ``;``, ``$VAR``), so every command line it sends is
``/bin/sh -c '<command>'``.
"""

from __future__ import annotations

import shlex

SHELL = "/bin/sh -c"


def shell_command(script: str) -> str:
    return f"{SHELL} {shlex.quote(script)}"
