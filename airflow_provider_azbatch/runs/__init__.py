"""One Batch job's life for one try of an Airflow task (submit or reattach, watch, results, clean up), which the
operator, the TaskFlow decorator and the sensor drive.

The life cycle (:mod:`.lifecycle`) imports the trigger, and with it Airflow: it is imported when first asked for,
so that :mod:`.submission` serves a ``torchx`` command line that keeps Airflow out (``airflowless``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch.runs.results import Expectations, RunResult
from airflow_provider_azbatch.runs.settings import RunSettings
from airflow_provider_azbatch.submission.job_ids import TaskInstanceRef

if TYPE_CHECKING:
    from airflow_provider_azbatch.runs.lifecycle import JobRun, event_in_full

__all__ = ["Expectations", "JobRun", "RunResult", "RunSettings", "TaskInstanceRef", "event_in_full"]


def __getattr__(name: str) -> Any:
    if name in ("JobRun", "event_in_full"):
        from airflow_provider_azbatch.runs import lifecycle

        return getattr(lifecycle, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
