"""Provider registration read by Airflow (entry point ``apache_airflow_provider``).

Kept free of imports: Airflow loads it while importing itself, and a mistake here breaks every
``airflow`` command.
"""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-provider-azbatch",
        "name": "Azure Batch (azbatch)",
        "description": "Run Azure Batch jobs from Airflow with live task output, deferrable waits, "
        "reattach on retry, and pools sized from resource requirements.",
        "versions": ["0.5.0", "0.4.0", "0.3.0", "0.2.0", "0.1.0"],
        "integrations": [
            {
                "integration-name": "Azure Batch (azbatch)",
                "external-doc-url": "https://learn.microsoft.com/azure/batch/",
                "tags": ["azure"],
            }
        ],
        "hooks": [
            {
                "integration-name": "Azure Batch (azbatch)",
                "python-modules": ["airflow_provider_azbatch.hooks.batch"],
            }
        ],
        "operators": [
            {
                "integration-name": "Azure Batch (azbatch)",
                "python-modules": ["airflow_provider_azbatch.operators.job"],
            }
        ],
        "sensors": [
            {
                "integration-name": "Azure Batch (azbatch)",
                "python-modules": ["airflow_provider_azbatch.sensors.job"],
            }
        ],
        "triggers": [
            {
                "integration-name": "Azure Batch (azbatch)",
                "python-modules": [
                    "airflow_provider_azbatch.triggers.job",
                    "airflow_provider_azbatch.triggers.job_events",
                ],
            }
        ],
        "extra-links": ["airflow_provider_azbatch.links.job.AzureBatchJobLink"],
        "task-decorators": [
            {"name": "azure_batch", "class-name": "airflow_provider_azbatch.decorators.azure_batch.azure_batch_task"}
        ],
        # Azure Blob asset URIs, as OpenLineage names the data (hooks/dataset_names.py): the hook lineage collector's
        # assets, and outlets such as Asset("wasbs://models@acct.dfs.core.windows.net/runs"), become datasets.
        "asset-uris": [
            {
                "schemes": ["wasbs", "wasb"],
                "handler": "airflow_provider_azbatch.lineage.assets.sanitize_uri",
                "factory": "airflow_provider_azbatch.lineage.assets.create_asset",
                "to_openlineage_converter": "airflow_provider_azbatch.lineage.assets.convert_asset_to_openlineage",
            }
        ],
        "connection-types": [
            {
                "connection-type": "azbatch",
                "hook-class-name": "airflow_provider_azbatch.hooks.batch.AzureBatchHook",
                "hook-name": "Azure Batch (azbatch)",
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "port", "host"],
                    "relabeling": {
                        "login": "Batch account name",
                        "password": "Batch account key (shared key)",
                    },
                    "placeholders": {
                        "login": "mybatchaccount",
                        "account_url": "https://mybatchaccount.westeurope.batch.azure.com",
                    },
                },
                "conn-fields": CONN_FIELDS,
            }
        ],
        # ``airflow azbatch ...``; the module defines arguments only, the commands import the SDK when run.
        "cli": ["airflow_provider_azbatch.cli.definition.get_azbatch_cli_commands"],
        "config": {
            "azbatch": {
                "description": "Defaults for the Azure Batch (azbatch) provider's operators, sensor and trigger.",
                "options": CONFIG_OPTIONS,
            }
        },
    }


def _field(
    label: str,
    description: str,
    *,
    secret: bool = False,
    enum: list[str] | None = None,
    required: bool = False,
) -> dict[str, Any]:
    # A type without "null" is what the UI marks as required; a choice list starts at its default, the
    # value an empty field means, so the form never shows (nor offers) "null".
    schema: dict[str, Any] = {"type": "string" if required or enum else ["string", "null"]}
    if secret:
        schema["format"] = "password"
    if enum:
        schema["enum"] = list(enum)
        schema["default"] = enum[0]
    return {"label": label, "description": description, "schema": schema}


CONN_FIELDS: dict[str, Any] = {
    "account_url": _field(
        "Batch account URL",
        "Required. The account endpoint, e.g. https://mybatchaccount.westeurope.batch.azure.com (for the local "
        "Batch service, the URL it prints).",
        required=True,
    ),
    "auth_method": _field(
        "Authentication",
        "auto (the default): shared_key when a key is set, otherwise default. shared_key: account name + key; "
        "service_principal; managed_identity; workload_identity; default: DefaultAzureCredential.",
        enum=["auto", "shared_key", "service_principal", "managed_identity", "workload_identity", "default"],
    ),
    "tenant_id": _field("Tenant ID", "Microsoft Entra tenant (service principal, workload identity)."),
    "client_id": _field(
        "Client ID",
        "Application (client) ID of the service principal, or the client ID of a user-assigned managed identity.",
    ),
    "client_secret": _field("Client secret", "Secret of the service principal.", secret=True),
    "client_certificate_path": _field(
        "Client certificate path",
        "PEM file (private key + certificate) of the service principal, instead of a secret.",
    ),
    "client_certificate_password": _field(
        "Client certificate password", "Password of the certificate file, if it has one.", secret=True
    ),
    "federated_token_file": _field(
        "Federated token file",
        "Workload identity token file; empty: AZURE_FEDERATED_TOKEN_FILE from the environment.",
    ),
    "cloud": _field(
        "Azure cloud",
        "public (the default), us_government or china: picks the token scope, authority, portal and Resource "
        "Manager. custom: set authority_host and token_scope below (and resource_manager_url for the preflight "
        "check's quota reads).",
        enum=["public", "us_government", "china", "custom"],
    ),
    "authority_host": _field(
        "Authority host",
        "Override of the Entra authority, e.g. https://login.microsoftonline.us (or a local one).",
    ),
    "token_scope": _field(
        "Token scope", "Override of the Batch token scope, e.g. https://batch.core.windows.net//.default."
    ),
    "resource_manager_url": _field(
        "Resource Manager URL",
        "Override of the Azure Resource Manager endpoint the preflight check reads the account's quotas and the "
        "region's VM sizes from (default: the cloud's, e.g. https://management.azure.com; a custom cloud needs it).",
    ),
    "ca_bundle": _field(
        "CA bundle path",
        "Trust these CA certificates for the Batch endpoint and the authority (e.g. the local Batch service's "
        "--tls CA file). Empty: the system store.",
    ),
    "storage_account_url": _field(
        "Storage account URL",
        "Blob storage for task inputs, outputs and logs, e.g. https://mystorage.blob.core.windows.net (for "
        "Azurite: http://127.0.0.1:10000/devstoreaccount1).",
    ),
    "storage_account_key": _field(
        "Storage account key",
        "Key of that storage account; empty: the connection's Entra ID credential (the hook then signs SAS "
        "tokens with a user delegation key).",
        secret=True,
    ),
    "subscription_id": _field(
        "Subscription ID",
        "The Batch account's subscription: for links to the Azure portal, and for the preflight check's reads of "
        "the account's quotas (optional).",
    ),
    "resource_group": _field(
        "Resource group",
        "The Batch account's resource group: for links to the Azure portal (optional; the preflight check finds it "
        "from the subscription).",
    ),
}

CONFIG_OPTIONS: dict[str, Any] = {
    "default_conn_id": {
        "description": "Connection used when an operator, sensor or hook is not given one.",
        "version_added": "0.1.0",
        "type": "string",
        "example": "azbatch_prod",
        "default": "azbatch_default",
    },
    "poll_interval": {
        "description": "Seconds between polls of a running job, for the synchronous operator, the sensor and "
        "the trigger. Also how often new task output is read.",
        "version_added": "0.1.0",
        "type": "float",
        "example": "10",
        "default": "5",
    },
    "fail_fast": {
        "description": "The default of the operator's fail_fast: the first task that fails (for good, after its "
        "retries) terminates its job, ending the tasks still running; the Airflow task fails naming it.",
        "version_added": "0.3.0",
        "type": "boolean",
        "example": "True",
        "default": "False",
    },
    "max_result_bytes": {
        "description": "The largest result file (result_file=, and the return value of an @task.azure_batch "
        "function) read back into XCom, in bytes.",
        "version_added": "0.3.0",
        "type": "integer",
        "example": "65536",
        "default": "1048576",
    },
    "stream_task_output": {
        "description": "Stream Batch task stdout/stderr into the Airflow task log while the job runs.",
        "version_added": "0.1.0",
        "type": "boolean",
        "example": "False",
        "default": "True",
    },
    "max_streamed_tasks": {
        "description": "Stream live output of at most this many tasks of a job (the first ones by submission "
        "order); stderr of any failed task is printed whatever this limit.",
        "version_added": "0.1.0",
        "type": "integer",
        "example": "50",
        "default": "20",
    },
    "failure_tail_lines": {
        "description": "Lines of stderr quoted in the error raised for a failed Batch task.",
        "version_added": "0.1.0",
        "type": "integer",
        "example": "100",
        "default": "30",
    },
    "sas_hours": {
        "description": "Lifetime in hours of the SAS tokens the hook gives tasks for their inputs and outputs "
        "(read+list on input containers, create+write on output containers); at least the longest a job runs.",
        "version_added": "0.1.0",
        "type": "float",
        "example": "48",
        "default": "24",
    },
    "pool_check_interval": {
        "description": "Seconds between looks at the pool of a job whose tasks all wait (allocation errors, failed "
        "start tasks, a broken autoscale formula end the wait with the cause).",
        "version_added": "0.1.0",
        "type": "float",
        "example": "60",
        "default": "30",
    },
    "idle_node_margin": {
        "description": "Seconds a pool's node may stay idle beyond the pool's autoscale evaluation interval (5 "
        "minutes for a pool without autoscale) before `airflow azbatch pools list` flags the pool: a fixed pool, or "
        "an autoscale formula that does not give idle nodes back.",
        "version_added": "0.5.0",
        "type": "float",
        "example": "900",
        "default": "300",
    },
    "submit_retry_seconds": {
        "description": "How long a submission request (create job, add tasks, set the job's completion rule, "
        "create a pool) is repeated while the network or the service fail transiently (dropped connections, "
        "5xx, throttling). The requests are idempotent; after this the task fails saying which step failed.",
        "version_added": "0.2.0",
        "type": "float",
        "example": "600",
        "default": "300",
    },
    "quota_wait_seconds": {
        "description": "How long a submission waits for the Batch account to get below a quota it is at "
        "(ActiveJobAndScheduleQuotaReached, PoolQuotaReached) before failing. Deferrable tasks wait in the "
        "triggerer, not in a worker slot.",
        "version_added": "0.2.0",
        "type": "float",
        "example": "3600",
        "default": "1800",
    },
    "quota_retry_seconds": {
        "description": "Seconds between submission attempts while the account is at a quota.",
        "version_added": "0.2.0",
        "type": "float",
        "example": "120",
        "default": "60",
    },
    "checkpoint_interval": {
        "description": "Least seconds between two checkpoints of a deferred job's output positions (an XCom "
        "write through the execution API). After a triggerer crash at most this much output is shown again.",
        "version_added": "0.2.0",
        "type": "float",
        "example": "60",
        "default": "30",
    },
    "min_deferral_seconds": {
        "description": "Least seconds between a task's deferral and its trigger's event (a job that ends sooner "
        "waits in the triggerer until then): Airflow's scheduler can fail a task resumed before it processed the "
        "exit of the worker that deferred it (apache/airflow#67287, #72716). 0 turns the wait off.",
        "version_added": "0.3.0",
        "type": "float",
        "example": "5",
        "default": "10",
    },
    "idle_stream_interval": {
        "description": "Longest time between two looks at the output files of a running task whose output "
        "stays quiet (active ones are looked at every poll): the most new output can wait before it is seen.",
        "version_added": "0.2.0",
        "type": "float",
        "example": "60",
        "default": "30",
    },
    "stream_looks_per_second": {
        "description": "Looks at quiet output streams (one file listing each) a triggerer makes per second, all "
        "its deferred jobs together; a stream whose output grew is looked at every poll regardless. It bounds "
        "what following many quiet streams costs: with more quiet streams than this times idle_stream_interval, "
        "each is looked at every (quiet streams / this) seconds instead.",
        "version_added": "0.2.0",
        "type": "float",
        "example": "200",
        "default": "100",
    },
    "account_view": {
        "description": "Watch deferred jobs through one account view per Batch account and triggerer (one "
        "listing of the jobs that changed per poll, shared by all the account's triggers) instead of each trigger "
        "looking at its own job every poll (one request or more per job and poll). False: each trigger looks at "
        "its own job every poll, as before 0.4.",
        "version_added": "0.4.0",
        "type": "boolean",
        "example": "False",
        "default": "True",
    },
    "job_looks_per_second": {
        "description": "Per-job looks (task counts, and what they lead to) a triggerer makes per second at most "
        "for the deferred jobs of one Batch account, between the changes its account view reports. One periodic "
        "listing of the jobs whose state changed (the account view) tells every trigger of the account when its "
        "job ended; a trigger looks at its own job when it changed and otherwise every poll_interval, or every "
        "(deferred jobs of the account / this) seconds when that is longer (at most 60 s), for what the listing "
        "cannot show: progress, tasks blocked by failed dependencies, a pool that cannot give nodes; twice as far "
        "apart after each look at which nothing moved. Jobs resting on a pool with 12 or more of them (nothing "
        "moved at their last look) look only when the pool's nodes, listed every 5 s, show that their tasks "
        "started or ended (and otherwise 10 minutes apart or more).",
        "version_added": "0.4.0",
        "type": "float",
        "example": "50",
        "default": "20",
    },
    "output_requests_per_second": {
        "description": "Requests a triggerer makes per second at most to one Batch account to read its deferred "
        "jobs' task output (ranged reads of output files, file listings, the states of streamed tasks not started "
        "yet), with the account view on. Each followed file is read at its trigger's poll_interval while it grows "
        "and less often while it is quiet; when more reads are due than this allows, the files that grow fastest "
        "are read first and the others later: with N growing files, each is read about every N / this seconds "
        "(when that is longer than poll_interval), and new output is shown that much later. The triggerer's log "
        "and the task's log say when it holds output back. 0: no limit.",
        "version_added": "0.5.0",
        "type": "float",
        "example": "800",
        "default": "400",
    },
    "requests_in_flight": {
        "description": "Requests to one Batch account that a triggerer's polls have in flight at once, all its "
        "deferred jobs together (more wait their turn). Enough to cover what a triggerer's CPU can poll times "
        "the account's latency (500 requests/s at 30 ms: 15); more only lets requests pile up in the event "
        "loop, where they age into the garbage collector's oldest generation and its collections stall every "
        "trigger. Raise it when the account is far away (60 ms and more).",
        "version_added": "0.2.0",
        "type": "integer",
        "example": "32",
        "default": "16",
    },
    "partial_line_seconds": {
        "description": "An unfinished output line (a progress bar writing no newline) is shown as it is after "
        "waiting this long for its end.",
        "version_added": "0.2.0",
        "type": "float",
        "example": "30",
        "default": "10",
    },
    "workspace_max_mb": {
        "description": "Largest workspace (uncompressed, after its ignore rules) the operator packs and stages.",
        "version_added": "0.2.0",
        "type": "float",
        "example": "500",
        "default": "100",
    },
    "workspace_container": {
        "description": "Blob container (of the connection's storage account) where workspace archives are staged, "
        "named by their content hash.",
        "version_added": "0.2.0",
        "type": "string",
        "example": "team-code",
        "default": "azbatch-workspaces",
    },
    "workspace_prefix": {
        "description": "Blob path prefix of staged workspace archives (empty: at the container's root).",
        "version_added": "0.2.0",
        "type": "string",
        "example": "airflow/workspaces",
        "default": "",
    },
    "node_logs_container": {
        "description": "Blob container (of the connection's storage account) where Batch uploads the service "
        "logs of nodes a run failed on (a failed start task, an unusable node), before the run's pools are "
        "deleted; the failure report names where. Empty: not uploaded.",
        "version_added": "0.5.0",
        "type": "string",
        "example": "batch-node-logs",
        "default": "azbatch-node-logs",
    },
    "max_read_bytes": {
        "description": "Most bytes read from one task file per poll; a file growing faster is caught up "
        "over the next polls, so memory stays bounded.",
        "version_added": "0.1.0",
        "type": "integer",
        "example": "4194304",
        "default": "1048576",
    },
}
