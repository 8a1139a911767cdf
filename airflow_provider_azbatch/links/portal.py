"""A job's page in the Azure portal (no Airflow here: ``torchx describe`` shows it too)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook


def link_data(hook: AzureBatchHook, job_id: str, try_number: int | None = None) -> dict[str, Any]:
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
