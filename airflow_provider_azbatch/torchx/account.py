"""Which Batch account an app is on, and app ids that name it.

An app id is ``<account>:<job id>`` (Batch ids have no ``:``): ``<account>`` is the Airflow connection id, or
for an account given by URL without Airflow set-up, the URL as ``https@<host>`` (torchx handles end in
``/<app id>``, so the id holds no ``/``; ``@`` is not allowed in connection ids). ``torchx status``, ``log`` and
``cancel`` get nothing but the handle: its account part says where to ask, and how to authenticate comes from
the same options as for ``run`` (``.torchxconfig [azure_batch]``, the environment).

An account given by URL, or by a connection an ``AIRFLOW_CONN_<ID>`` variable holds, is reached without importing
Airflow (:mod:`airflow_provider_azbatch.airflowless`): seconds saved on every command. Where the process has
Airflow already, an account given by URL must still leave ``$AIRFLOW_HOME`` alone: Airflow makes
``$AIRFLOW_HOME/logs`` on import; :func:`keep_airflow_home_untouched` points it at a throwaway home first.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from airflow_provider_azbatch import airflowless
from airflow_provider_azbatch.torchx.options import AzureBatchOpts, TorchXOptionError

if TYPE_CHECKING:
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

URL_MARK = "@"


@dataclass(frozen=True)
class Account:
    """A Batch account: an Airflow connection, or a URL with credentials from the environment (``opts``: the run
    options it was given with, which say where its key is, its storage account and where it is in Azure)."""

    conn_id: str | None = None
    url: str | None = None
    opts: AzureBatchOpts | None = field(default=None, compare=False)

    @classmethod
    def of(cls, opts: AzureBatchOpts) -> Account:
        if not opts.account_url:
            if not opts.conn_id:
                raise TorchXOptionError(
                    "conn_id", "is empty: name the Airflow connection of the Batch account, or give account_url"
                )
            return cls(conn_id=opts.conn_id)
        parts = urlsplit(opts.account_url)
        if parts.scheme not in ("https", "http") or not parts.hostname or parts.path not in ("", "/"):
            raise TorchXOptionError(
                "account_url",
                f"is not a Batch account URL ({opts.account_url!r}): give https://<account>.<region>.batch.azure.com",
            )
        return cls(url=f"{parts.scheme}://{parts.netloc}", opts=opts)

    @property
    def ref(self) -> str:
        """How app ids name the account."""
        if self.url is None:
            assert self.conn_id is not None
            return self.conn_id
        scheme, _, rest = self.url.partition("://")
        return f"{scheme}{URL_MARK}{rest}"

    def app_id(self, job_id: str) -> str:
        return f"{self.ref}:{job_id}"

    def describe(self) -> str:
        return f"connection '{self.conn_id}'" if self.url is None else f"account {self.url}"

    # -- a hook on it ------------------------------------------------------------------------------------
    def hook(self) -> AzureBatchHook:
        """A hook on this account. Airflow is not imported for an account given by URL or by a connection an
        ``AIRFLOW_CONN_<ID>`` variable holds (:mod:`airflow_provider_azbatch.airflowless`), unless this process
        has imported it already; a connection held elsewhere (a secrets backend, Airflow's database) is read
        through Airflow, imported here."""
        if self.url is not None:
            if not _without_airflow():
                keep_airflow_home_untouched()
                import_airflow()
            return self._url_hook()
        conn_id = str(self.conn_id)
        try:
            in_environment = airflowless.env_connection(conn_id) is not None
        except airflowless.ConnectionFormatError as exc:
            raise TorchXOptionError("conn_id", f"names a connection that cannot be read: {exc}") from None
        if in_environment and _without_airflow():
            from airflow_provider_azbatch.hooks.batch import AzureBatchHook

            return AzureBatchHook(conn_id)
        import_airflow()
        return _connection_hook(conn_id)

    def _url_hook(self) -> AzureBatchHook:
        from types import SimpleNamespace

        from airflow_provider_azbatch.hooks.batch import AzureBatchHook
        from airflow_provider_azbatch.hooks.connection import BatchConnectionSettings, ConnectionConfigError

        assert self.url is not None
        assert self.opts is not None
        opts = self.opts
        key = os.environ.get(opts.account_key_env or "") or None
        storage_key = os.environ.get(opts.storage_key_env or "") or None
        name = opts.account_name
        host = urlsplit(self.url).hostname or ""
        if key and not name and not host.replace(".", "").isdigit() and host != "localhost":
            name = host.split(".")[0]
        conn = SimpleNamespace(
            conn_id=self.url,
            host=self.url,
            login=name,
            password=key,
            extra_dejson={
                "storage_account_url": opts.storage_account_url,
                "storage_account_key": storage_key,
                "subscription_id": opts.subscription_id,
                "resource_group": opts.resource_group,
            },
        )
        try:
            settings = BatchConnectionSettings.from_connection(conn)
        except ConnectionConfigError as exc:
            option = {
                "login": "account_name",
                "password": f"${opts.account_key_env}",
                "account_url": "account_url",
                "storage_account_url": "storage_account_url",
                "storage_account_key": f"${opts.storage_key_env}",
            }.get(exc.field_name, exc.field_name)
            raise TorchXOptionError(option, exc.problem.replace("shared_key authentication", "a shared key")) from None
        from airflow_provider_azbatch.hooks.connection import mask_secrets

        mask_secrets(settings.secrets)
        hook = AzureBatchHook(self.url)
        hook.__dict__["settings"] = settings
        return hook


def _without_airflow() -> bool:
    """Run the provider without Airflow, in a ``torchx`` command line only: a program that uses TorchX's runner
    may import Airflow and run tasks later, which need Airflow's own exception classes (not stand-ins)."""
    main = sys.modules.get("__main__")
    command_line = "torchx.cli.main" in sys.modules or getattr(getattr(main, "__spec__", None), "name", None) == (
        "torchx.cli.main"
    )
    return command_line and airflowless.activate()


def _connection_hook(conn_id: str) -> AzureBatchHook:
    from airflow_provider_azbatch.compat import AirflowNotFoundException
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

    try:
        return AzureBatchHook.for_command_line(conn_id)
    except AirflowNotFoundException:
        raise TorchXOptionError(
            "conn_id",
            f"names the Airflow connection '{conn_id}', which does not exist: create it (airflow connections add "
            f"{conn_id} --conn-type azbatch ..., or AIRFLOW_CONN_{conn_id.upper()}), name another with "
            "-cfg conn_id=..., or give the account without Airflow: -cfg account_url=https://...",
        ) from None


def split_app_id(app_id: str, defaults: AzureBatchOpts) -> tuple[Account, str]:
    """(account, job id) of an app id; credentials of an account given by URL come from ``defaults``."""
    ref, sep, job_id = app_id.rpartition(":")
    if not sep or not ref or not job_id:
        raise ValueError(f"'{app_id}' is not an azure_batch app id (<connection or account>:<Batch job id>)")
    if URL_MARK not in ref:
        return Account(conn_id=ref), job_id
    scheme, _, netloc = ref.partition(URL_MARK)
    url = f"{scheme}://{netloc}"
    same = defaults.account_url is not None and defaults.account_url.rstrip("/") == url
    account = Account.of(
        AzureBatchOpts(
            account_url=url,
            account_name=defaults.account_name if same else None,
            account_key_env=defaults.account_key_env,
            storage_account_url=defaults.storage_account_url if same else None,
            storage_key_env=defaults.storage_key_env,
            subscription_id=defaults.subscription_id if same else None,
            resource_group=defaults.resource_group if same else None,
        )
    )
    return account, job_id


def import_airflow() -> None:
    """Import Airflow (through the provider's hook) with its log lines on stderr: scripts read the app handle
    from stdout, and Airflow logs while it is imported (its configuration) and after."""
    with contextlib.redirect_stdout(sys.stderr):
        from airflow_provider_azbatch.compat import redirect_stdout_log_handlers_to_stderr
        from airflow_provider_azbatch.hooks import batch  # noqa: F401

        redirect_stdout_log_handlers_to_stderr()


_THROWAWAY_HOME: list[str] = []


def keep_airflow_home_untouched() -> None:
    """Before Airflow is first imported: a throwaway ``AIRFLOW_HOME`` for this process, removed at exit.

    Airflow makes ``$AIRFLOW_HOME/logs`` (and may write its config) on import; a torchx command line on an
    account given without an Airflow connection must not leave anything there. Once Airflow is imported (a
    DAG's task, a process that set Airflow up), its home is left as it is."""
    if "airflow" in sys.modules or _THROWAWAY_HOME:
        return
    home = tempfile.mkdtemp(prefix="torchx-azure-batch-")
    _THROWAWAY_HOME.append(home)
    atexit.register(shutil.rmtree, home, True)
    os.environ["AIRFLOW_HOME"] = home


def portal_url(hook: AzureBatchHook, job_id: str) -> str | None:
    """The job in the Azure portal, when the account's subscription and resource group are known."""
    from airflow_provider_azbatch.links.portal import job_url, link_data

    return job_url(link_data(hook, job_id)) or None
