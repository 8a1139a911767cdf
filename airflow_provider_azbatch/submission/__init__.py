"""From operator parameters to a submitted job: the job and task requests, preparation, idempotent submission.

The values a user declares (task specs, options) are in :mod:`airflow_provider_azbatch.specs`; they are named here
too, where earlier releases had them.
"""

from airflow_provider_azbatch.specs.options import BlobOptions, ContainerOptions, FanOut
from airflow_provider_azbatch.specs.tasks import TaskSpec

__all__ = ["BlobOptions", "ContainerOptions", "FanOut", "TaskSpec"]
