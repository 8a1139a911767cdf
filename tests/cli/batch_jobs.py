"""Jobs made directly with the SDK for the command line tests, and reading what the commands printed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from azure.batch import models as m

from tests.helpers import sh, wait_until


def task(task_id: str, script: str, **options: Any) -> m.BatchTaskCreateOptions:
    """A task running a shell script, handed to ``/bin/sh -c`` as the operator does (Batch runs no shell)."""
    return m.BatchTaskCreateOptions(id=task_id, command_line=sh(script), **options)


def create_job(
    client: Any,
    job_id: str,
    pool_id: str,
    tasks: Sequence[m.BatchTaskCreateOptions],
    *,
    metadata: dict[str, str] | None = None,
    end_with_tasks: bool = True,
) -> None:
    """A job with its tasks; ``end_with_tasks``: the service ends it when they are done (as the operator's)."""
    client.create_job(
        m.BatchJobCreateOptions(
            id=job_id,
            pool_info=m.BatchPoolInfo(pool_id=pool_id),
            metadata=[m.BatchMetadataItem(name=k, value=v) for k, v in (metadata or {}).items()] or None,
        )
    )
    client.create_tasks(job_id, list(tasks))
    if end_with_tasks:
        client.update_job(
            job_id, m.BatchJobUpdateOptions(all_tasks_complete_mode=m.BatchAllTasksCompleteMode.TERMINATE_JOB)
        )


def wait_job_done(client: Any, job_id: str, timeout: float = 60) -> Any:
    return wait_until(
        lambda: (job := client.get_job(job_id)).state == m.BatchJobState.COMPLETED and job,
        timeout=timeout,
        what=f"job {job_id} completed",
    )


def utc(value: datetime | None) -> str:
    """A time as the tables show it."""
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if value else ""


def iso(value: datetime | None) -> str | None:
    """A time as JSON and YAML show it."""
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z") if value else None


def table(lines: list[str]) -> tuple[list[str], list[list[str]]]:
    """A rich table's header and rows, cells stripped; checks the header rule under the header."""
    header, rule, *rows = lines
    assert set(rule) <= {"=", "+"}, rule
    # Cells line up with the rule (the last one's padding is stripped).
    assert [len(cell) for cell in rule.split("+")][:-1] == [len(cell) for cell in header.split("|")][:-1], rule
    return [c.strip() for c in header.split("|")], [[c.strip() for c in row.split("|")] for row in rows]
