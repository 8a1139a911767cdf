"""``check()``: every finding about one connection, in the order a run meets them."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast
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
from airflow_provider_azbatch.hooks.credentials import build_credential, default_credential
from airflow_provider_azbatch.hooks.management import BatchAccountInfo, ResourceManager
from airflow_provider_azbatch.pools.strategy import BatchPool
from airflow_provider_azbatch.preflight import batch_access, capacity
from airflow_provider_azbatch.preflight.capacity import AccountView, Unreadable
from airflow_provider_azbatch.preflight.fixes import READER_ROLE, Where, assign_role
from airflow_provider_azbatch.preflight.identity import shared_key_identity, token_claims, token_identity
from airflow_provider_azbatch.preflight.report import Identity, PreflightReport, Status, failed, ok, unknown, warning
from airflow_provider_azbatch.preflight.storage_access import check_storage
from airflow_provider_azbatch.preflight.targets import PoolTarget, Targets, targets_of_dags, targets_of_pools

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

    from airflow_provider_azbatch.hooks.credentials import BatchCredential

ManagementCredential = Literal["connection", "default"]
CONNECTION = "connection"
DAG_FILE = "dag_file"


def check(
    conn_id: str | None = None,
    *,
    dag_file: str | Path | None = None,
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
    :param dag_ids: only these DAGs of ``dag_file`` (default: every DAG it defines).
    :param pools: ``BatchPool`` values to check as well (``existing``, ``shared`` or ``auto``), or a mapping of
        labels (how the findings name each pool) to them.
    :param require_storage: a missing storage account fails the check even when no task checked needs one.
    :param management_credential: how to read the account's quotas and the region's VM sizes from Resource
        Manager: ``connection`` (its Entra ID credential; a shared key cannot) or ``default``
        (``DefaultAzureCredential``: ``az login``, a managed identity, ``AZURE_*`` variables).
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
    targets = _targets(report, dag_file, dag_ids, pools)
    name = f"azbatch-check-{secrets.token_hex(4)}"
    try:
        credential = build_credential(settings)
    except (ValueError, OSError) as exc:  # a certificate that cannot be read, for one
        report.add(
            failed(
                batch_access.AUTHENTICATION,
                f"the {settings.auth_method.value} credential cannot be made: {exc}",
                fix=settings.credentials_hint(),
            )
        )
        return report
    try:
        report.identity = _identity(report, settings, credential, account_name)
        images: list[Any] | Unreadable = capacity.REFUSED
        if report.identity is not None:
            images = _batch(report, settings, credential, where, targets, name)
        # Which tasks need storage is known from a DAG file only (pools given alone say nothing of their tasks).
        storage_users = targets.storage_users if dag_file is not None else None
        if require_storage and not storage_users:
            storage_users = ["the checked runs (--require-storage)"]
        for finding in check_storage(settings, report.identity, name, storage_users):
            report.add(finding)
        created = [target for target in targets.pools if target.kind != "existing"]
        if created:
            _capacity(report, settings, credential, where, created, images, management_credential)
    finally:
        close = getattr(credential, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                close()
    return report


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
    dag_ids: Sequence[str],
    pools: Iterable[BatchPool] | Mapping[str, BatchPool],
) -> Targets:
    targets = targets_of_pools(pools)
    if dag_file is None:
        return targets
    from airflow_provider_azbatch.compat import dags_in_file

    path = Path(dag_file)
    if not path.is_file():
        report.add(failed(DAG_FILE, f"there is no file {path}", fix="give the path of a DAG file (--dag-file)"))
        return targets
    dags, errors = dags_in_file(str(path))
    if errors:
        first = next(iter(errors.values())).strip().splitlines()
        report.add(
            failed(
                DAG_FILE,
                f"{path} does not import: {first[-1] if first else 'an import error'}",
                fix=f"fix the DAG file (python {path} shows the whole error), then check again",
            )
        )
        return targets
    missing = sorted(set(dag_ids) - set(dags))
    if missing:
        report.add(
            failed(
                DAG_FILE,
                f"{path} defines no DAG {', '.join(missing)} (it defines {', '.join(sorted(dags)) or 'none'})",
                fix="name a DAG the file defines (--dag-id), or leave --dag-id out to check them all",
            )
        )
        return targets
    chosen = [dags[dag_id] for dag_id in sorted(dags) if not dag_ids or dag_id in dag_ids]
    from_dags = targets_of_dags(chosen)
    if not from_dags.batch_tasks:
        report.add(
            warning(
                DAG_FILE,
                f"{path} has no Batch task (AzureBatchJobOperator, @task.azure_batch, AzureBatchTorchXOperator)",
                fix="give the DAG file whose Batch tasks should be checked",
            )
        )
    else:
        report.add(
            ok(DAG_FILE, f"{path}: {from_dags.batch_tasks} Batch task(s), {len(from_dags.pools)} pool(s) to check")
        )
    targets.pools += from_dags.pools
    targets.storage_users += from_dags.storage_users
    targets.batch_tasks += from_dags.batch_tasks
    return targets


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
    settings: BatchConnectionSettings,
    credential: BatchCredential,
    where: Where,
    targets: Sequence[PoolTarget],
    images: list[Any] | Unreadable,
    management_credential: ManagementCredential,
) -> None:
    view = _account_view(settings, credential, where, report.identity, management_credential)
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


def _account_view(
    settings: BatchConnectionSettings,
    connection_credential: Any,
    where: Where,
    identity: Identity | None,
    management_credential: ManagementCredential,
) -> AccountView:
    cloud = settings.cloud
    if not cloud.resource_manager_url:
        return AccountView(
            Unreadable(
                "the connection's custom cloud names no Resource Manager",
                "set resource_manager_url on the connection (the cloud's Resource Manager endpoint)",
            )
        )
    if management_credential == "default":
        credential = default_credential(settings)
        identity = None  # another identity than the connection's: its object id is not known here
    elif settings.auth_method is AuthMethod.SHARED_KEY:
        return AccountView(
            Unreadable(
                "a shared key does not reach Resource Manager, where the quotas and the region's VM sizes are",
                "check again with --management-credential default (DefaultAzureCredential: az login, a managed "
                "identity, AZURE_* variables), or with an Entra ID connection",
            )
        )
    else:
        credential = connection_credential
    if not settings.subscription_id:
        return AccountView(
            Unreadable(
                "the connection names no subscription_id",
                f"set subscription_id (and resource_group) on the connection: az batch account show --name "
                f"{where.account_name} --resource-group <its group> --query id",
            )
        )
    try:
        with ResourceManager(
            cloud.resource_manager_url, credential, cloud.resource_manager_scope, ca_bundle=settings.ca_bundle
        ) as manager:
            view = AccountView(_read_account(manager, settings, where, identity))
            account = view.account
            if not isinstance(account, Unreadable):
                where.learn(account)
                try:
                    view.skus = {
                        sku.name.lower(): sku for sku in manager.vm_skus(settings.subscription_id, account.location)
                    }
                except Exception as exc:
                    view.skus = capacity.arm_problem(
                        exc, f"the VM sizes of region {account.location}", identity, where, where.subscription_scope
                    )
    finally:
        if credential is not connection_credential:
            with contextlib.suppress(Exception):
                credential.close()
    return view


def _read_account(
    manager: ResourceManager, settings: BatchConnectionSettings, where: Where, identity: Identity | None
) -> BatchAccountInfo | Unreadable:
    subscription = settings.subscription_id or ""
    try:
        if settings.resource_group:
            return manager.batch_account(subscription, settings.resource_group, where.account_name)
        found = manager.find_batch_account(subscription, settings.account_url)
    except Exception as exc:
        return capacity.arm_problem(exc, "the Batch account", identity, where, where.account_scope)
    if found is None:
        return Unreadable(
            f"subscription {subscription} has no Batch account at {settings.account_url} that the identity may read",
            f"set resource_group on the connection, and assign the identity {READER_ROLE} on the account: "
            f"{assign_role(READER_ROLE, identity, where.account_scope)}",
        )
    return found
