"""One session with Resource Manager for the check's management-plane reads (the account and its quotas, the
region's VM sizes, the storage account's network rules, the pools' subnets): which credential, or why none."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

from airflow_provider_azbatch.hooks.connection import AuthMethod, BatchConnectionSettings
from airflow_provider_azbatch.hooks.credentials import default_credential
from airflow_provider_azbatch.hooks.management import BatchAccountInfo, ResourceManager
from airflow_provider_azbatch.preflight import capacity
from airflow_provider_azbatch.preflight.capacity import AccountView, Unreadable
from airflow_provider_azbatch.preflight.fixes import READER_ROLE, Where, assign_role
from airflow_provider_azbatch.preflight.report import Identity

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

    from airflow_provider_azbatch.hooks.credentials import BatchCredential

ManagementCredential = Literal["connection", "default"]


@dataclass
class Management:
    """Resource Manager as the check reaches it (or why it cannot), and who reads it.

    ``identity`` is the connection's identity when the connection's credential reads Resource Manager, None when
    another one does (``--management-credential default``): what that one may do says nothing of the connection's.
    """

    manager: ResourceManager | Unreadable
    identity: Identity | None
    subscription_id: str


@contextlib.contextmanager
def management_session(
    settings: BatchConnectionSettings,
    connection_credential: BatchCredential,
    where: Where,
    identity: Identity | None,
    management_credential: ManagementCredential,
) -> Iterator[Management]:
    subscription = settings.subscription_id or ""
    cloud = settings.cloud
    if not cloud.resource_manager_url:
        why = Unreadable(
            "the connection's custom cloud names no Resource Manager",
            "set resource_manager_url on the connection (the cloud's Resource Manager endpoint)",
        )
        yield Management(why, identity, subscription)
        return
    if management_credential == "default":
        credential = default_credential(settings)
        identity = None
    elif settings.auth_method is AuthMethod.SHARED_KEY:
        why = Unreadable(
            "a shared key does not reach Resource Manager, where the quotas and the region's VM sizes are",
            "check again with --management-credential default (DefaultAzureCredential: az login, a managed "
            "identity, AZURE_* variables), or with an Entra ID connection",
        )
        yield Management(why, identity, subscription)
        return
    else:
        credential = cast("TokenCredential", connection_credential)  # not a shared key (above)
    try:
        if not subscription:
            why = Unreadable(
                "the connection names no subscription_id",
                f"set subscription_id (and resource_group) on the connection: az batch account show --name "
                f"{where.account_name} --resource-group <its group> --query id",
            )
            yield Management(why, identity, subscription)
            return
        with ResourceManager(
            cloud.resource_manager_url, credential, cloud.resource_manager_scope, ca_bundle=settings.ca_bundle
        ) as manager:
            yield Management(manager, identity, subscription)
    finally:
        if credential is not connection_credential:
            with contextlib.suppress(Exception):
                credential.close()


def account_view(management: Management, settings: BatchConnectionSettings, where: Where) -> AccountView:
    """The Batch account and the VM sizes of its region, as Resource Manager tells them."""
    manager = management.manager
    if isinstance(manager, Unreadable):
        return AccountView(manager)
    view = AccountView(_read_account(manager, settings, where, management.identity))
    account = view.account
    if not isinstance(account, Unreadable):
        where.learn(account)
        try:
            view.skus = {sku.name.lower(): sku for sku in manager.vm_skus(management.subscription_id, account.location)}
        except Exception as exc:
            view.skus = capacity.arm_problem(
                exc, f"the VM sizes of region {account.location}", management.identity, where, where.subscription_scope
            )
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
