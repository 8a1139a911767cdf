"""Job ids derived from where they run in Airflow, so a retry finds the job an earlier try made."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.sdk import Context

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


@dataclass(frozen=True)
class TaskInstanceRef:
    """The Airflow task instance a run belongs to (job ids and job metadata are derived from it)."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1
    # Relative workspaces are found from here (the DAG file's folder).
    dag_folder: Path = Path(".")

    @classmethod
    def of(cls, context: Context, task_id: str) -> TaskInstanceRef:
        map_index = getattr(context["ti"], "map_index", None)
        return cls(
            dag_id=context["dag"].dag_id,
            task_id=task_id,
            run_id=context["run_id"],
            map_index=-1 if map_index is None else map_index,
            dag_folder=Path(context["dag"].fileloc).parent,
        )

    def describe(self) -> str:
        text = f"DAG '{self.dag_id}', task '{self.task_id}', run '{self.run_id}'"
        return text + (f", map index {self.map_index}" if self.map_index >= 0 else "")

    def matches(self, metadata: dict[str, str]) -> bool:
        """Whether a job's metadata names this task instance (:func:`task_instance_metadata`)."""
        return metadata.get(MAP_INDEX_KEY, "-1") == str(self.map_index) and all(
            metadata.get(key) == value
            for key, value in ((DAG_ID_KEY, self.dag_id), (TASK_ID_KEY, self.task_id), (RUN_ID_KEY, self.run_id))
        )
