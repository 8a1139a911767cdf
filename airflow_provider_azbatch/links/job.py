"""The "Azure Batch job" extra link: the job in the Azure portal.

A browser cannot open the job's REST URL (it needs the account key or a token), so the link is offered
only when the connection says where the account lives (``subscription_id`` and ``resource_group``); then
it opens the job's page in the right cloud's portal, or the account's job list once the job was deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator

    from airflow_provider_azbatch.compat import TaskInstanceKey

# What the operator pushes right after it submits (or reattaches to) a job, before it waits: the job and the
# try of the task instance that watches it (what a cancelled trigger reads to tell whose job it is: triggers/kill.py).
LINK_XCOM_KEY = "azbatch_job"


def link_data(hook: Any, job_id: str, try_number: int | None = None) -> dict[str, Any]:
    settings = hook.settings
    return {
        "job_id": job_id,
        "try_number": try_number,
        "account_name": hook.account_name,
        "subscription_id": settings.subscription_id,
        "resource_group": settings.resource_group,
        "portal_url": settings.cloud.portal_url,
    }


def job_url(job: dict[str, Any]) -> str:
    """The job's portal page; '' when the connection does not say where the account is."""
    if not (job.get("subscription_id") and job.get("resource_group") and job.get("portal_url")):
        return ""
    account = (
        f"{job['portal_url']}/#resource/subscriptions/{job['subscription_id']}/resourceGroups/"
        f"{job['resource_group']}/providers/Microsoft.Batch/batchAccounts/{job['account_name']}"
    )
    if job.get("deleted"):
        return f"{account}/jobs"
    return f"{account}/jobs/{quote(job['job_id'], safe='')}"


class AzureBatchJobLink(BaseOperatorLink):
    """Airflow 3 computes this on the worker when the task ends and keeps the URL for the UI."""

    name = "Azure Batch job"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        running: Any = ti_key
        if hasattr(running, "xcom_pull"):  # the running task instance, on the worker
            job = running.xcom_pull(task_ids=running.task_id, key=LINK_XCOM_KEY)
        else:
            from airflow.sdk.bases.xcom import BaseXCom

            job = BaseXCom.get_value(ti_key=ti_key, key=LINK_XCOM_KEY)  # type: ignore[arg-type]
        return job_url(job) if isinstance(job, dict) and job.get("job_id") else ""
