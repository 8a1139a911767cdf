"""The ``azure_batch`` scheduler's run options: declared and typed, so that ``torchx runopts azure_batch``
documents them, ``-cfg``/``--scheduler_args`` and ``.torchxconfig [azure_batch]`` set them, and torchx refuses
any other. No Airflow here."""

from __future__ import annotations

from dataclasses import dataclass

from torchx.schedulers.api import StructuredOpts

DEFAULT_CONN_ID = "azbatch_default"
# The variables the Azure CLI reads a Batch account key and a storage account key from.
DEFAULT_KEY_ENV = "AZURE_BATCH_ACCESS_KEY"
DEFAULT_STORAGE_KEY_ENV = "AZURE_STORAGE_KEY"
DEFAULT_LOG_CONTAINER = "torchx-logs"


class TorchXOptionError(ValueError):
    """A run option (or the app) that cannot work, found before anything is submitted: names the option and
    the fix."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"azure_batch run option `{option}` {problem}")
        self.option = option


@dataclass
class AzureBatchOpts(StructuredOpts):  # type: ignore[misc]  # torchx ships no type information
    conn_id: str = DEFAULT_CONN_ID
    """Airflow connection (type azbatch) of the Batch account; one connection per account. Not used when account_url is given."""  # noqa: E501

    account_url: str | None = None
    """Batch account URL (https://<account>.<region>.batch.azure.com), used without any Airflow set-up: authenticated with the shared key in the variable account_key_env names if it is set, else with azure-identity's DefaultAzureCredential."""  # noqa: E501

    account_name: str | None = None
    """With account_url and a shared key: the account name (default: the first label of the URL's host)."""

    account_key_env: str = DEFAULT_KEY_ENV
    """With account_url: the environment variable holding the account's shared key (never the key itself)."""

    storage_account_url: str | None = None
    """With account_url: the Blob storage account for workspaces and kept logs (https://<account>.blob.core.windows.net)."""

    storage_key_env: str = DEFAULT_STORAGE_KEY_ENV
    """With storage_account_url: the environment variable holding the storage account key."""

    subscription_id: str | None = None
    """With account_url: the account's subscription (with resource_group, describe shows an Azure portal link)."""

    resource_group: str | None = None
    """With account_url: the account's resource group."""

    pool_id: str | None = None
    """An existing Batch pool to run on (default: a pool made for the app from the roles' resources, deleted with it)."""  # noqa: E501

    shared_pool: str | None = None
    """A named pool shared by apps: created from the roles' resources if missing, reused if it matches."""

    max_nodes: int | None = None
    """Most nodes of a pool made from the roles' resources (default: the app's replicas, all roles together)."""

    autoscale: bool = True
    """A shared_pool autoscales between 0 and max_nodes with its pending tasks (False: max_nodes fixed nodes)."""

    vm_size: str | None = None
    """The VM size of a pool made for the app (default: the cheapest size satisfying every role's resources)."""

    low_priority: bool = False
    """A pool made for the app may use spot/low-priority nodes."""

    image_repo: str | None = None
    """Accepted for command lines written for Docker-workspace schedulers; unused: workspaces are shipped as files through Blob storage, not pushed as images."""  # noqa: E501

    skip_workspace: bool = False
    """Run without the roles' workspace when the account cannot ship it (it has no storage account), saying so before submitting; by default such an app is refused."""  # noqa: E501

    containers: bool = True
    """Run each role in its image (False: directly on the pool's nodes, e.g. an existing pool without container support)."""  # noqa: E501

    registry_conn_id: str | None = None
    """Airflow connection of a private container registry (host = server, login + password)."""

    container_run_options: str | None = None
    """docker create options for every role's container (e.g. '--cap-add SYS_PTRACE'; options holding = or , go in .torchxconfig), after the scheduler's own; a role adds its own with its metadata azure_batch/container_run_options."""  # noqa: E501

    shm_size: str = "auto"
    """Each role's /dev/shm, where DataLoader workers pass batches: auto (half the node's memory, as Linux gives the node's own), a size (16g), host (the node's, --ipc=host), or none (Docker's 64 MB); a role's metadata azure_batch/shm_size wins."""  # noqa: E501

    infiniband: bool = False
    """Give every role the node's InfiniBand adapters for NCCL (RDMA): needs a VM size with InfiniBand (the ND sizes); a role asks alone with the resource capability infiniband=True (the Azure named resources of those sizes do)."""  # noqa: E501

    priority: int | None = None
    """The Batch job's priority, -1000 to 1000 (default 0)."""

    log_container: str = DEFAULT_LOG_CONTAINER
    """Blob container the tasks' stdout/stderr are kept in when the account has a storage account (torchx log reads them after the pool is gone); empty: not kept."""  # noqa: E501

    max_wall_clock: int | None = None
    """Seconds the whole app may run before Batch terminates it."""

    user: str | None = None
    """Who the app is run for, kept in its job's metadata (default: your login name); torchx list shows this user's apps (default: yours; * for every user's)."""  # noqa: E501
