"""Numbers a test measured, shown in the session's terminal summary (CI runs pytest without ``-s``)."""

from __future__ import annotations

MEASURED: list[str] = []


def report(line: str) -> None:
    """Keep ``line`` for the summary ("measured" section at the end of the run)."""
    MEASURED.append(line)
