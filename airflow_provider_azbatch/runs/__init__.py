"""One Batch job's life for one try of an Airflow task (submit or reattach, watch, results, clean up), which the
operator, the TaskFlow decorator and the sensor drive."""

from airflow_provider_azbatch.runs.lifecycle import JobRun, event_in_full
from airflow_provider_azbatch.runs.results import Expectations, RunResult
from airflow_provider_azbatch.runs.settings import RunSettings
from airflow_provider_azbatch.runs.submission import TaskInstanceRef

__all__ = ["Expectations", "JobRun", "RunResult", "RunSettings", "TaskInstanceRef", "event_in_full"]
