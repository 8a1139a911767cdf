"""From operator parameters to a submitted job: validation, task specs, options, and idempotent submission."""

from airflow_provider_azbatch.submission.options import BlobOptions, ContainerOptions, FanOut
from airflow_provider_azbatch.submission.tasks import TaskSpec

__all__ = ["BlobOptions", "ContainerOptions", "FanOut", "TaskSpec"]
