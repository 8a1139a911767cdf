"""Getting the job's pool ready before submission: an existing one checked, a shared one created if missing.

Everything that cannot work is refused here, before anything is created: a Windows pool, a pool in a virtual
network (or from an Azure Compute Gallery image) with a shared key connection, a managed identity on a pool the
provider creates, a task running as a user the pool does not have. Secrets for mounts and users are read from
their connections here and registered with the secret masker.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch.compute import UnknownVmSizeError, check_vm_size_fits, end_of_support, load_catalog
from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.hooks.storage import storage_account_name
from airflow_provider_azbatch.pools.comparison import (
    SPEC_METADATA_KEY,
    as_older_versions_made_it,
    formula_outdated,
    images_not_prefetched,
    spec_differences,
)
from airflow_provider_azbatch.pools.errors import PoolStrategyError
from airflow_provider_azbatch.pools.mounts import (
    BlobMount,
    CifsMount,
    FileShareMount,
    LoginCredentials,
    StorageCredentials,
    storage_account_from_connection,
)
from airflow_provider_azbatch.pools.strategy import IDENTITY_REFUSED, WINDOWS_REFUSED, BatchPool, PoolSecrets
from airflow_provider_azbatch.pools.users import password_from_connection
from airflow_provider_azbatch.specs.containers import RegistryCredentials
from airflow_provider_azbatch.specs.identity import RunAs
from airflow_provider_azbatch.specs.tasks import TaskSpec

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import Log
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

ENTRA_REQUIRED = "needs a Microsoft Entra ID connection (auth_method other than shared_key)"


def task_images(specs: Sequence[TaskSpec], job_image: str | None) -> list[str]:
    """The container images the job's tasks run in, each once, in order of first use."""
    images = [spec.image or job_image for spec in specs]
    return list(dict.fromkeys(image for image in images if image))


def prepare_pool(
    hook: AzureBatchHook,
    strategy: BatchPool,
    specs: Sequence[TaskSpec],
    *,
    job_image: str | None,
    registry: RegistryCredentials | None,
    log: Log,
    run_as: Iterable[RunAs | None] = (),
) -> tuple[str | None, dict[str, Any] | None]:
    """(pool id, auto-pool body): checks an existing pool, creates a shared one if missing.

    ``run_as``: who the job's tasks run as (a named user must be one of the pool's).
    """
    multi_node = max(spec.num_nodes for spec in specs)
    images = task_images(specs, job_image)
    users = {identity.user for identity in run_as if identity is not None and identity.user is not None}
    field = "pool_id" if strategy.kind == "existing" else "batch_pool"
    try:
        if strategy.kind == "existing":
            _check_existing(hook, strategy, users, log)
            return strategy.pool_id, None
        _check_created(hook, strategy, registry, users)
        body = strategy.pool_body(
            containers=bool(images),
            multi_node=multi_node,
            registries=[registry.to_pool_json()] if registry is not None else [],
            task_images=images,
            secrets=_secrets(hook, strategy),
        )
        _warn_about_size_and_image(strategy, body, log)
    except PoolStrategyError as exc:
        raise AzureBatchValidationError(field, str(exc)) from None
    if strategy.kind == "auto":
        log.info("The job gets its own pool (%s), deleted with the job", body["vmSize"])
        return None, body
    assert strategy.pool_id is not None
    if hook.create_pool(strategy.pool_id, body):
        log.info("Created shared pool %s (%s)", strategy.pool_id, body["vmSize"])
        return strategy.pool_id, None
    _check_shared(hook, strategy.pool_id, body, images, log)
    log.info("Using shared pool %s", strategy.pool_id)
    return strategy.pool_id, None


def _check_created(
    hook: AzureBatchHook, strategy: BatchPool, registry: RegistryCredentials | None, users: set[str]
) -> None:
    """What a pool the provider creates cannot have, and what it needs of the connection."""
    if registry is not None and registry.identity_reference:
        raise AzureBatchValidationError("registry_conn_id", f"(extra identity_reference) {IDENTITY_REFUSED}")
    shared_key = enum_value(hook.settings.auth_method) == "shared_key"
    if shared_key and strategy.network is not None and strategy.network.in_virtual_network:
        raise PoolStrategyError(
            f"network: a pool in a virtual network {ENTRA_REQUIRED}: the Batch service creates such pools only for "
            f"clients authenticated with Microsoft Entra ID; connection '{hook.azbatch_conn_id}' uses a shared key"
        )
    if shared_key and strategy.image is not None and strategy.image.source == "virtualMachineImageId":
        raise PoolStrategyError(
            f"image: a pool from an Azure Compute Gallery or managed image {ENTRA_REQUIRED}: with a shared key the "
            f"service refuses it (AuthenticationFailed); connection '{hook.azbatch_conn_id}' uses a shared key"
        )
    missing = sorted(user for user in users if user.lower() not in strategy.user_names())
    if missing:
        raise PoolStrategyError(
            f"tasks run as user(s) {', '.join(missing)}, which the pool does not define: add "
            f"{', '.join(f'PoolUser({name!r})' for name in missing)} to its users"
        )


def _warn_about_size_and_image(strategy: BatchPool, body: dict[str, Any], log: Log) -> None:
    catalog = load_catalog()
    if strategy.vm_size is not None and catalog.find(strategy.vm_size) is None:
        close = catalog.close_names(strategy.vm_size)
        log.warning(
            "VM size %s is not in the provider's catalog%s: whether it fits %s is not checked, its task slots "
            "default to 1 and no cost is estimated for it",
            strategy.vm_size,
            f" (did you mean {', '.join(close)}?)" if close else "",
            strategy.requirements.describe() if strategy.requirements else "the tasks",
        )
    warning = end_of_support(body["virtualMachineConfiguration"]["nodeAgentSKUId"])
    if warning:
        log.warning("Pool %s: %s", strategy.pool_id or "(auto-pool)", warning)


def _secrets(hook: AzureBatchHook, strategy: BatchPool) -> PoolSecrets:
    """Keys, SAS tokens and passwords from their connections, registered with the secret masker."""
    from airflow_provider_azbatch.compat import mask_secret

    mounts: list[StorageCredentials | LoginCredentials | None] = []
    for mount in strategy.mounts:
        credentials: StorageCredentials | LoginCredentials | None = None
        if isinstance(mount, (BlobMount, FileShareMount)):
            credentials = _storage_credentials(hook, mount)
        elif isinstance(mount, CifsMount):
            conn = hook.get_connection(mount.conn_id)
            if not conn.login or not conn.password:
                raise PoolStrategyError(
                    f"Connection '{mount.conn_id}' ({mount.describe()}): give the share's user as login and its "
                    "password"
                )
            credentials = LoginCredentials(conn.login, conn.password)
        for secret in (getattr(credentials, "key", None), getattr(credentials, "sas", None)):
            if secret:
                mask_secret(secret)
        if isinstance(credentials, LoginCredentials):
            mask_secret(credentials.password)
        mounts.append(credentials)
    passwords: dict[str, str | None] = {}
    for user in strategy.users:
        password = password_from_connection(user, hook.get_connection(user.conn_id)) if user.conn_id else None
        if password:
            mask_secret(password)
        passwords[user.name] = password
    return PoolSecrets(mounts=mounts, passwords=passwords)


def _storage_credentials(hook: AzureBatchHook, mount: BlobMount | FileShareMount) -> StorageCredentials:
    wanted_account = mount.account if isinstance(mount, FileShareMount) else None
    if mount.conn_id is not None:
        credentials = storage_account_from_connection(hook.get_connection(mount.conn_id), wanted_account)
        if wanted_account and credentials.account != wanted_account:
            raise PoolStrategyError(
                f"Connection '{mount.conn_id}' ({mount.describe()}): it is for storage account "
                f"{credentials.account!r}, the share is in {wanted_account!r}"
            )
        return credentials
    settings = hook.settings
    if not settings.storage_account_url or not settings.storage_account_key:
        raise PoolStrategyError(
            f"mounts: {mount.describe()} has no conn_id, and connection '{hook.azbatch_conn_id}' has no "
            "storage_account_url with storage_account_key: give the mount a conn_id (login: the account, password: "
            "its key), or set both on the connection"
        )
    account = storage_account_name(settings.storage_account_url)
    if wanted_account and account != wanted_account:
        raise PoolStrategyError(
            f"mounts: {mount.describe()} has no conn_id, and connection '{hook.azbatch_conn_id}''s storage account "
            f"is {account!r}, not the share's {wanted_account!r}: give the mount a conn_id"
        )
    return StorageCredentials(account, settings.storage_account_key)


def _check_shared(hook: AzureBatchHook, pool_id: str, body: dict[str, Any], images: list[str], log: Log) -> None:
    """An existing shared pool must be the pool this task would create; never silently reused otherwise."""
    existing = hook.get_pool(pool_id)
    if existing is None:
        raise AzureBatchValidationError("batch_pool", f"pool {pool_id!r} was deleted while this task looked at it")
    if enum_value(existing.state) == "deleting":
        raise AzureBatchValidationError(
            "batch_pool", f"pool {pool_id!r} is being deleted: wait for it to go, or use another pool id"
        )
    found = existing.as_dict()
    differences = spec_differences(found, body)
    older = as_older_versions_made_it(body)
    made_by_older_version = bool(differences) and older is not None and not spec_differences(found, older)
    if differences and not made_by_older_version:
        raise AzureBatchValidationError(
            "batch_pool",
            f"pool {pool_id!r} already exists with a different specification: {'; '.join(differences)}. "
            "Use another pool id, or delete the pool so that it is created again",
        )
    if made_by_older_version:
        log.info(
            "Shared pool %s was made by a version of this provider before 0.5.0, whose autoscale formula kept the "
            "nodes of its multi-node tasks allocated with nothing to run: it now scales with this version's formula "
            "(those nodes only while tasks are pending, down to min_nodes otherwise)",
            pool_id,
        )
        _update_formula(hook, pool_id, found, body)
    elif formula_outdated(found, body):
        log.info(
            "Shared pool %s scales with another version of this provider's autoscale formula (the same bounds): it "
            "now scales with this version's",
            pool_id,
        )
        _update_formula(hook, pool_id, found, body)
    missing = images_not_prefetched(found, images)
    if missing:
        log.warning(
            "Shared pool %s does not pre-fetch %s: each node pulls it when its first task starts (paid, idle node "
            "time). Delete the pool so that it is created with it, or use another pool id",
            pool_id,
            ", ".join(missing),
        )


def _update_formula(hook: AzureBatchHook, pool_id: str, found: dict[str, Any], body: dict[str, Any]) -> None:
    """The pool's formula and specification hash as this version makes them (its other metadata kept)."""
    wanted_hash = next(item["value"] for item in body["metadata"] if item["name"] == SPEC_METADATA_KEY)
    metadata = [
        (str(item.get("name")), str(item.get("value")))
        for item in found.get("metadata") or []
        if item.get("name") != SPEC_METADATA_KEY
    ]
    hook.set_pool_formula(pool_id, body["autoScaleFormula"], [*metadata, (SPEC_METADATA_KEY, wanted_hash)])


def _check_existing(hook: AzureBatchHook, strategy: BatchPool, users: set[str], log: Log) -> None:
    pool_id = strategy.pool_id
    pool = hook.get_pool(pool_id) if pool_id else None
    if pool is None:
        raise AzureBatchValidationError(
            "pool_id",
            f"{pool_id!r} does not exist in Batch account '{hook.account_name}': create the pool first or give the "
            "id of an existing one",
        )
    vm_config = getattr(pool, "virtual_machine_configuration", None)
    agent = str(getattr(vm_config, "node_agent_sku_id", None) or "")
    if agent.lower().startswith("batch.node.windows") or getattr(vm_config, "windows_configuration", None):
        raise AzureBatchValidationError("pool_id", f"{pool_id!r} is a Windows pool ({agent}): {WINDOWS_REFUSED}")
    warning = end_of_support(agent)
    if warning:
        log.warning("Pool %s: %s", pool_id, warning)
    have = {account.name.lower() for account in getattr(pool, "user_accounts", None) or [] if account.name}
    missing = sorted(user for user in users if user.lower() not in have)
    if missing:
        raise AzureBatchValidationError(
            "run_as",
            f"names user(s) {', '.join(missing)}, which pool {pool_id!r} does not define (its users: "
            f"{', '.join(sorted(have)) or 'none'})",
        )
    if strategy.requirements is None:
        return
    try:
        check_vm_size_fits(pool.vm_size, strategy.requirements)
    except UnknownVmSizeError:
        log.warning(
            "Pool %s has VM size %s, which is not in the provider's catalog: its fit to %s is not checked",
            pool_id,
            pool.vm_size,
            strategy.requirements.describe(),
        )
    except ValueError as exc:
        raise AzureBatchValidationError("batch_pool", f"pool {pool_id!r} does not fit this job: {exc}") from None
