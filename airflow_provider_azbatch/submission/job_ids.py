"""Job ids derived from where they run in Airflow, so a retry finds the job an earlier try made."""

from __future__ import annotations

import hashlib
import re

MAX_ID_LENGTH = 64
_INVALID = re.compile(r"[^A-Za-z0-9_-]+")


def _clean(text: str, limit: int) -> str:
    return _INVALID.sub("-", text).strip("-_")[:limit].strip("-_") or "x"


def default_job_id(dag_id: str, task_id: str, run_id: str, map_index: int = -1) -> str:
    """``<dag>-<task>-<hash>``: readable, unique per DAG run and mapped task, at most 64 characters."""
    digest = hashlib.sha256(f"{dag_id}\x00{task_id}\x00{run_id}\x00{map_index}".encode()).hexdigest()[:12]
    head = f"{_clean(dag_id, 24)}-{_clean(task_id, 24)}"
    return f"{head}-{digest}"


def attempt_job_id(base: str, attempt: int) -> str:
    """The id of a fresh submission that replaces a failed job (attempt 2, 3, ...)."""
    suffix = f"-a{attempt}"
    return base[: MAX_ID_LENGTH - len(suffix)] + suffix


# Job metadata naming the task instance that submitted the job (``airflow azbatch jobs list`` filters on it).
DAG_ID_KEY = "airflow_dag_id"
TASK_ID_KEY = "airflow_task_id"
RUN_ID_KEY = "airflow_run_id"
MAP_INDEX_KEY = "airflow_map_index"
TASK_INSTANCE_KEYS = (DAG_ID_KEY, TASK_ID_KEY, RUN_ID_KEY, MAP_INDEX_KEY)


def task_instance_metadata(dag_id: str, task_id: str, run_id: str, map_index: int = -1) -> dict[str, str]:
    """The job's metadata saying which task instance submitted it (the map index only for mapped tasks)."""
    metadata = {DAG_ID_KEY: dag_id, TASK_ID_KEY: task_id, RUN_ID_KEY: run_id}
    if map_index >= 0:
        metadata[MAP_INDEX_KEY] = str(map_index)
    return metadata
