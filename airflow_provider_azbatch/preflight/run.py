"""``check()``: every finding about one connection, in the order a run meets them."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compat import AirflowNotFoundException
from airflow_provider_azbatch.hooks.connection import AuthMethod, BatchConnectionSettings, ConnectionConfigError
from airflow_provider_azbatch.hooks.credentials import build_credential
from airflow_provider_azbatch.pools.strategy import BatchPool
from airflow_provider_azbatch.preflight import batch_access, capacity
from airflow_provider_azbatch.preflight.capacity import AccountView, Unreadable, family_findings
from airflow_provider_azbatch.preflight.dags import targets_of_file, targets_of_folder
from airflow_provider_azbatch.preflight.fixes import Where
from airflow_provider_azbatch.preflight.identity import shared_key_identity, token_claims, token_identity
from airflow_provider_azbatch.preflight.management import ManagementCredential, account_view, management_session
from airflow_provider_azbatch.preflight.network import network_findings
from airflow_provider_azbatch.preflight.report import Identity, PreflightReport, Status, failed, ok, unknown
from airflow_provider_azbatch.preflight.storage_access import check_storage
from airflow_provider_azbatch.preflight.targets import PoolTarget, Targets, targets_of_pools

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

    from airflow_provider_azbatch.hooks.credentials import BatchCredential

CONNECTION = "connection"


def check(
    conn_id: str | None = None,
    *,
    dag_file: str | Path | None = None,
    dags_folder: str | Path | None = None,
    dag_ids: Sequence[str] = (),
    pools: Iterable[BatchPool] | Mapping[str, BatchPool] = (),
    require_storage: bool = False,
    management_credential: ManagementCredential = "connection",
) -> PreflightReport:
    """Check connection ``conn_id`` against its Batch account before a first run; nothing is left behind.

    :param conn_id: the ``azbatch`` connection (default ``[azbatch] default_conn_id``), read as Airflow's own
        commands read one (environment, secrets backends, metadata database).
    :param dag_file: a DAG file whose Batch tasks' pools are checked (image, VM size, quota; existing pools
        exist) and whose storage needs decide whether a missing storage account fails the check.
    :param dags_folder: a DAGs folder, read as the DAG processor reads it (``.airflowignore``, ``[core]
        dag_discovery_safe_mode``), whose every Batch task is checked as ``dag_file``'s are; ``airflow azbatch
        check`` gives ``[core] dags_folder`` unless told ``--no-dags`` or other pools. ``dag_file`` wins.
    :param dag_ids: only these DAGs of ``dag_file`` or ``dags_folder`` (default: every DAG).
    :param pools: ``BatchPool`` values to check as well (``existing``, ``shared`` or ``auto``), or a mapping of
        labels (how the findings name each pool) to them.
    :param require_storage: a missing storage account fails the check even when no task checked needs one.
    :param management_credential: how to read the account's quotas, the region's VM sizes and the networks
        (the storage account's network rules, the pools' subnets) from Resource Manager: ``connection`` (its
        Entra ID credential; a shared key cannot) or ``default`` (``DefaultAzureCredential``: ``az login``, a
        managed identity, ``AZURE_*`` variables).
    :return: the findings; ``report.ok`` is False when something a run needs is missing.
    """
    conn_id = conn_id or config.get_str("default_conn_id")
    report = PreflightReport(conn_id)
    settings = _settings(conn_id, report)
    if settings is None:
        return report
    account_name = _account_name(settings)
    report.account_name, report.account_url = account_name, settings.account_url
    where = Where(
        account_name,
        settings.account_url,
        settings.subscription_id,
        settings.resource_group,
        _region_of(settings.account_url),
    )
    report.add(
        ok(
            CONNECTION,
            f"connection '{conn_id}': {settings.auth_method.value} to Batch account '{account_name}' at "
            f"{settings.account_url}",
        )
    )
    targets, dags_read = _targets(report, dag_file, dags_folder, dag_ids, pools)
    name = f"azbatch-check-{secrets.token_hex(4)}"
    credential = _credential(report, settings)
    if credential is None:
        return report
    try:
        report.identity = _identity(report, settings, credential, account_name)
        images: list[Any] | Unreadable = capacity.REFUSED
        if report.identity is not None:
            images = _batch(report, settings, credential, where, targets, name)
        storage_users = _storage_users(targets, dags_read, require_storage)
        for finding in check_storage(settings, report.identity, name, storage_users):
            report.add(finding)
        created = [target for target in targets.pools if target.kind != "existing"]
        with management_session(settings, credential, where, report.identity, management_credential) as management:
            if created:
                _capacity(report, account_view(management, settings, where), where, created, images)
            for finding in network_findings(management, where, settings.storage_account_url, created, storage_users):
                report.add(finding)
    finally:
        close = getattr(credential, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                close()
    return report


def _credential(report: PreflightReport, settings: BatchConnectionSettings) -> BatchCredential | None:
    try:
        credential: BatchCredential = build_credential(settings)
    except (ValueError, OSError) as exc:  # a certificate that cannot be read, for one
        report.add(
            failed(
                batch_access.AUTHENTICATION,
                f"the {settings.auth_method.value} credential cannot be made: {exc}",
                fix=settings.credentials_hint(),
            )
        )
        return None
    return credential


def _storage_users(targets: Targets, dags_read: bool, require_storage: bool) -> list[str] | None:
    """The tasks that need a storage account; None when not known (pools given alone say nothing of their tasks)."""
    users = targets.storage_users if dags_read else None
    if require_storage and not users:
        return ["the checked runs (--require-storage)"]
    return users


def _settings(conn_id: str, report: PreflightReport) -> BatchConnectionSettings | None:
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook
    from airflow_provider_azbatch.hooks.connection import connection_not_defined

    try:
        return AzureBatchHook.for_command_line(conn_id).settings
    except AirflowNotFoundException:
        report.add(
            failed(
                CONNECTION,
                f"connection '{conn_id}' is not defined",
                fix=connection_not_defined(conn_id).split(". ", 1)[1],
            )
        )
    except ConnectionConfigError as exc:
        report.add(failed(CONNECTION, f"connection '{conn_id}': {exc.field_name} {exc.problem}", fix=_config_fix(exc)))
    return None


def _config_fix(exc: ConnectionConfigError) -> str:
    return f"correct {exc.field_name} (airflow connections get {exc.conn_id}; the connection fields page lists each)"


def _account_name(settings: BatchConnectionSettings) -> str:
    if settings.account_name:
        return settings.account_name
    host = urlsplit(settings.account_url).hostname or ""
    return host if host.replace(".", "").isdigit() or ":" in host else host.split(".")[0]


def _region_of(account_url: str) -> str | None:
    """``https://<account>.<region>.batch.azure.com`` → the region (None for another host)."""
    labels = (urlsplit(account_url).hostname or "").split(".")
    return labels[1] if len(labels) > 3 and labels[2] == "batch" else None


def _targets(
    report: PreflightReport,
    dag_file: str | Path | None,
    dags_folder: str | Path | None,
    dag_ids: Sequence[str],
    pools: Iterable[BatchPool] | Mapping[str, BatchPool],
) -> tuple[Targets, bool]:
    """What to check, and whether the DAGs were read (then which tasks need storage is known)."""
    targets = targets_of_pools(pools)
    if dag_file is not None:
        from_dags = targets_of_file(report, Path(dag_file), dag_ids)
    elif dags_folder is not None:
        from_dags = targets_of_folder(report, Path(dags_folder), dag_ids)
    else:
        return targets, False
    if from_dags is None:
        return targets, False
    targets.pools += from_dags.pools
    targets.storage_users += from_dags.storage_users
    targets.batch_tasks += from_dags.batch_tasks
    return targets, True


def _identity(
    report: PreflightReport, settings: BatchConnectionSettings, credential: BatchCredential, account_name: str
) -> Identity | None:
    if settings.auth_method is AuthMethod.SHARED_KEY:
        return shared_key_identity(account_name)
    try:
        token = cast("TokenCredential", credential).get_token(settings.token_scope)  # not a shared key (above)
    except ClientAuthenticationError as exc:
        message = str(exc.message if getattr(exc, "message", None) else exc).strip().splitlines()
        report.add(
            failed(
                batch_access.AUTHENTICATION,
                f"the {settings.auth_method.value} credential gets no token for Batch: "
                f"{message[0] if message else type(exc).__name__}",
                fix=settings.credentials_hint(),
            )
        )
        return None
    return token_identity(settings, token_claims(token.token))


def _batch(
    report: PreflightReport,
    settings: BatchConnectionSettings,
    credential: BatchCredential,
    where: Where,
    targets: Targets,
    name: str,
) -> list[Any] | Unreadable:
    """The data-plane findings; the account's supported images when pools are to be checked."""
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

    hook = AzureBatchHook(report.conn_id)
    hook.__dict__["settings"] = settings
    images: list[Any] | Unreadable = capacity.REFUSED
    with hook.new_client(credential, retry_total=1) as client:
        listed = batch_access.list_jobs(client, settings, where, report.identity)
        for finding in listed:
            report.add(finding)
        if not any(finding.check == batch_access.LIST_JOBS and finding.status is Status.OK for finding in listed):
            return capacity.REFUSED
        for finding in batch_access.create_and_delete_job(client, where, report.identity, name):
            report.add(finding)
        for target in targets.pools:
            if target.kind == "existing" and target.pool_id:
                report.add(batch_access.check_existing_pool(client, target.pool_id, target.label, where))
        if any(target.kind != "existing" for target in targets.pools):
            try:
                images = list(client.list_supported_images())
            except (HttpResponseError, ServiceRequestError, ServiceResponseError) as exc:
                images = capacity.listing_problem(exc, "listing the supported images failed")
    return images


def _capacity(
    report: PreflightReport,
    view: AccountView,
    where: Where,
    targets: Sequence[PoolTarget],
    images: list[Any] | Unreadable,
) -> None:
    report.add(capacity.account_finding(view, where))
    for target in targets:
        if target.problem is not None:
            report.add(
                failed(
                    f"pool[{target.label}]",
                    f"the pool cannot be made: {target.problem}",
                    fix="change the pool as the message says (the task would fail the same way)",
                )
            )
            continue
        if target.unknown_because is not None:
            report.add(
                unknown(
                    f"pool[{target.label}]",
                    f"the pool is known only when the task runs: {target.unknown_because}",
                    fix="check the pool the run will make with --requirements and --max-nodes (in Python: "
                    "pools=[BatchPool.auto(...)])",
                )
            )
            continue
        report.add(capacity.image_finding(target, images, where))
        report.add(capacity.vm_size_finding(target, view, where))
        report.add(capacity.quota_finding(target, view, where))
    for finding in family_findings(targets, view):
        report.add(finding)
