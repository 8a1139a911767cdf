"""The Batch data plane, as a run uses it: the credential accepted, jobs listed, a job created and deleted.

The job is a throw-away (``azbatch-check-<random>``) on a pool id that does not exist: Batch accepts a job for a
pool yet to be made, so nothing is allocated and nothing runs. It is deleted whatever happens after its creation;
if the delete fails, the finding names the job and how to delete it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from azure.batch import models as batch_models
from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

from airflow_provider_azbatch.hooks.connection import AuthMethod, BatchConnectionSettings
from airflow_provider_azbatch.hooks.errors import describe_error, error_code, root_cause
from airflow_provider_azbatch.preflight.fixes import BATCH_DATA_ROLE, Where, assign_role
from airflow_provider_azbatch.preflight.report import Finding, Identity, failed, ok

if TYPE_CHECKING:
    from azure.batch import BatchClient

# How long the throw-away job may take to be deleted before the check moves on (deletion goes on without it).
DELETE_WAIT_SECONDS = 60.0
AUTHENTICATION = "authentication"
LIST_JOBS = "batch.list_jobs"
CREATE_JOB = "batch.create_job"
DELETE_JOB = "batch.delete_job"


def refused_the_identity(exc: BaseException) -> bool:
    """Batch knows who is asking but that identity has no role on the account's data plane."""
    return error_code(exc) in ("AuthorizationFailure", "InsufficientAccountPermissions")


def list_jobs(
    client: BatchClient, settings: BatchConnectionSettings, where: Where, identity: Identity | None
) -> list[Finding]:
    """Authentication and the first read: ``[authentication, batch.list_jobs]`` findings (one when unreachable)."""
    try:
        next(iter(client.list_jobs(max_results=1, select=["id"])), None)
    except (ServiceRequestError, ServiceResponseError) as exc:
        return [_unreachable(settings, where, exc)]
    except HttpResponseError as exc:
        if refused_the_identity(exc):
            return [
                _authenticated(settings, where, identity),
                failed(
                    LIST_JOBS,
                    f"Batch account '{where.account_name}' refuses {_who(identity)}: {describe_error(exc)}; it has no "
                    "role on the account's data plane",
                    fix=f"assign it {BATCH_DATA_ROLE} on the Batch account: "
                    f"{assign_role(BATCH_DATA_ROLE, identity, where.account_scope)}",
                ),
            ]
        if error_code(exc) == "AuthenticationFailed" or exc.status_code == 401:
            return [_not_authenticated(settings, where, identity, exc)]
        return [_authenticated(settings, where, identity), _refused(LIST_JOBS, "list jobs", exc)]
    return [_authenticated(settings, where, identity), ok(LIST_JOBS, "jobs can be listed")]


def create_and_delete_job(client: BatchClient, where: Where, identity: Identity | None, name: str) -> list[Finding]:
    """``[batch.create_job, batch.delete_job]`` of a throw-away job ``name`` (deleted whatever happens)."""
    job = batch_models.BatchJobCreateOptions(
        id=name,
        display_name="airflow azbatch check (deleted right away)",
        # No such pool: the job waits for it, nothing is allocated or run.
        pool_info=batch_models.BatchPoolInfo(pool_id=name),
    )
    try:
        client.create_job(job)
    except (ServiceRequestError, ServiceResponseError) as exc:
        return [failed(CREATE_JOB, f"creating job {name} failed: {root_cause(exc)}", fix=_retry_fix())]
    except HttpResponseError as exc:
        return [_create_refused(exc, where, identity, name)]
    created = ok(CREATE_JOB, f"job {name} created (on no pool: nothing runs)")
    return [created, _delete(client, name, where)]


def _delete(client: BatchClient, name: str, where: Where) -> Finding:
    manual = (
        f"delete it: airflow azbatch jobs cancel {name} --delete --yes (or az batch job delete --job-id {name} "
        f"--account-name {where.account_name} --account-endpoint {where.account_url} --yes)"
    )
    try:
        poller = client.begin_delete_job(name, polling_interval=1)
        poller.result(timeout=DELETE_WAIT_SECONDS)
    except HttpResponseError as exc:
        if refused_the_identity(exc):
            return failed(
                DELETE_JOB,
                f"job {name} was created but Batch refused to delete it: {describe_error(exc)}",
                fix=f"give the identity a role that deletes jobs ({BATCH_DATA_ROLE}), then {manual}",
            )
        return failed(DELETE_JOB, f"job {name} was created but deleting it failed: {describe_error(exc)}", fix=manual)
    except (ServiceRequestError, ServiceResponseError) as exc:
        return failed(DELETE_JOB, f"job {name} was created but deleting it failed: {root_cause(exc)}", fix=manual)
    if not poller.done():
        return ok(DELETE_JOB, f"job {name} is being deleted (Batch finishes that on its own)")
    return ok(DELETE_JOB, f"job {name} deleted")


def check_existing_pool(client: BatchClient, pool_id: str, label: str, where: Where) -> Finding:
    """An existing pool a task names must exist (and not be on its way out)."""
    check = f"pool[{label}].exists"
    try:
        pool = client.get_pool(pool_id, select=["id", "state", "vmSize"])
    except HttpResponseError as exc:
        if error_code(exc) == "PoolNotFound" or exc.status_code == 404:
            return failed(
                check,
                f"pool '{pool_id}' does not exist in Batch account '{where.account_name}'",
                fix="create it before the run (Azure portal, az batch pool create, ARM/Bicep), or use "
                "BatchPool.shared/auto so the task creates one",
            )
        return _refused(check, f"read pool '{pool_id}'", exc)
    state = str(getattr(pool.state, "value", pool.state) or "").lower()
    if state == "deleting":
        return failed(
            check,
            f"pool '{pool_id}' is being deleted",
            fix="wait for it to go and create it again, or name another pool",
        )
    return ok(check, f"pool '{pool_id}' exists ({pool.vm_size})")


def _who(identity: Identity | None) -> str:
    return identity.description if identity is not None else "the connection's identity"


def _authenticated(settings: BatchConnectionSettings, where: Where, identity: Identity | None) -> Finding:
    if settings.auth_method is AuthMethod.SHARED_KEY:
        return ok(AUTHENTICATION, f"Batch account '{where.account_name}' accepts the connection's shared key")
    return ok(AUTHENTICATION, f"Batch account '{where.account_name}' accepts the token of {_who(identity)}")


def _not_authenticated(
    settings: BatchConnectionSettings, where: Where, identity: Identity | None, exc: HttpResponseError
) -> Finding:
    if settings.auth_method is AuthMethod.SHARED_KEY:
        return failed(
            AUTHENTICATION,
            f"Batch account '{where.account_name}' refuses the connection's shared key: {describe_error(exc)}",
            fix="set login to the Batch account's name and password to one of its keys: az batch account keys list "
            f"--name {where.account_name} --resource-group {where.group_or_placeholder}",
        )
    return failed(
        AUTHENTICATION,
        f"Batch account '{where.account_name}' refuses the token of {_who(identity)}: {describe_error(exc)}",
        fix=f"get the token from the Batch account's tenant and cloud: {settings.credentials_hint()}",
    )


def _unreachable(settings: BatchConnectionSettings, where: Where, exc: BaseException) -> Finding:
    return failed(
        AUTHENTICATION,
        f"cannot reach the Batch account at {settings.account_url}: {root_cause(exc)}",
        fix="check account_url, the account's endpoint (az batch account show --name "
        f"{where.account_name} --resource-group {where.group_or_placeholder} --query accountEndpoint), and that "
        "this machine reaches it (a proxy goes in HTTPS_PROXY)",
    )


def _create_refused(exc: HttpResponseError, where: Where, identity: Identity | None, name: str) -> Finding:
    code = error_code(exc)
    if refused_the_identity(exc):
        return failed(
            CREATE_JOB,
            f"Batch lets {_who(identity)} read but not create jobs: {describe_error(exc)}",
            fix=f"assign it {BATCH_DATA_ROLE} on the Batch account: "
            f"{assign_role(BATCH_DATA_ROLE, identity, where.account_scope)}",
        )
    if code == "ActiveJobAndScheduleQuotaReached":
        return failed(
            CREATE_JOB,
            f"Batch account '{where.account_name}' is at its quota of active jobs: {describe_error(exc)}",
            fix="delete or end the jobs it no longer needs (airflow azbatch jobs list --state active), or request "
            "a higher quota: Azure portal, the Batch account, Quotas, Request quota increase",
        )
    return _refused(CREATE_JOB, f"create job {name}", exc)


def _refused(check: str, what: str, exc: HttpResponseError) -> Finding:
    return failed(check, f"Batch refused to {what}: {describe_error(exc)}", fix=_retry_fix(exc))


def _retry_fix(exc: BaseException | None = None) -> str:
    if exc is not None and getattr(exc, "status_code", None) in (429, 500, 503):
        return "try again in a few minutes: the Batch service is busy (its status: https://azure.status.microsoft)"
    return "try again; if it persists, look at the message above and the Batch account's activity log"
