"""Where watched output goes: the Airflow task log, one logger per Batch task.

Airflow 3's log view lists the ``logger`` of every line under "Sources" and can show one of them alone:
each Batch task's lines are logged by ``azbatch.task.<task id>``, so a user can look at one task's
output on its own. Lines about the job as a whole go to the operator's (or trigger's) own logger.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from airflow_provider_azbatch.compat import named_logger
from airflow_provider_azbatch.watching.core import Emit

TASK_LOGGER_PREFIX = "azbatch.task"


@lru_cache(maxsize=4096)
def task_logger(task_id: str) -> Any:
    return named_logger(f"{TASK_LOGGER_PREFIX}.{task_id}")


def log_emitter(job_log: Any) -> Emit:
    """An ``Emit`` writing Batch task lines to their own loggers and job lines to ``job_log``."""

    def emit(task_id: str | None, line: str) -> None:
        if task_id is None:
            job_log.info("%s", line)
        else:
            task_logger(task_id).info("%s", line)

    return emit


def show_event_lines(event: Mapping[str, Any], emit: Emit) -> None:
    """Print the output lines a trigger's event carries: those of its last poll, which the trigger leaves to
    the task (``triggers/watch_events.py``, ``PollLines``)."""
    for task_id, line in event.get("lines") or ():
        emit(task_id, line)
