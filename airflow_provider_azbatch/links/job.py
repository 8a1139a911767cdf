"""The "Azure Batch job" extra link: the job in the Azure portal, or its API URL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

# What the operator pushes right after it submits (or reattaches to) a job.
LINK_XCOM_KEY = "azbatch_job"


def job_url(job: dict[str, Any]) -> str:
    """Portal URL when the connection names subscription and resource group, else the REST URL."""
    job_id = quote(job["job_id"], safe="")
    if job.get("subscription_id") and job.get("resource_group") and job.get("portal_url"):
        return (
            f"{job['portal_url']}/#resource/subscriptions/{job['subscription_id']}/resourceGroups/"
            f"{job['resource_group']}/providers/Microsoft.Batch/batchAccounts/{job['account_name']}/jobs/{job_id}"
        )
    return f"{job['account_url']}/jobs/{job_id}?api-version=2025-06-01"


class AzureBatchJobLink(BaseOperatorLink):
    """Airflow 3 computes this on the worker when the task ends and keeps the URL for the UI."""

    name = "Azure Batch job"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        if hasattr(ti_key, "xcom_pull"):  # the running task instance, on the worker
            job = ti_key.xcom_pull(task_ids=ti_key.task_id, key=LINK_XCOM_KEY)
        else:
            from airflow.sdk.bases.xcom import BaseXCom

            job = BaseXCom.get_value(ti_key=ti_key, key=LINK_XCOM_KEY)
        return job_url(job) if isinstance(job, dict) and job.get("job_id") else ""
