"""One ``azbatch`` connection per authentication method, as ``AIRFLOW_CONN_<ID>`` JSON (docs/howto/connection.md).

Each value is what the environment variable holds (``json.dumps`` of it). tests/docs loads each one as Airflow
does and reads it with the provider's connection checks; ``<...>`` are placeholders to fill in.
"""

from __future__ import annotations

# [START conn_shared_key]
AIRFLOW_CONN_AZBATCH_DEFAULT = {
    "conn_type": "azbatch",
    "login": "mybatch",
    "password": "<account key>",
    "extra": {"account_url": "https://mybatch.westeurope.batch.azure.com"},
}
# [END conn_shared_key]

# [START conn_service_principal]
AIRFLOW_CONN_AZBATCH_SP = {
    "conn_type": "azbatch",
    "extra": {
        "account_url": "https://mybatch.westeurope.batch.azure.com",
        "auth_method": "service_principal",
        "tenant_id": "<tenant id>",
        "client_id": "<application id>",
        "client_secret": "<client secret>",
    },
}
# [END conn_service_principal]

# [START conn_service_principal_certificate]
AIRFLOW_CONN_AZBATCH_SP_CERT = {
    "conn_type": "azbatch",
    "extra": {
        "account_url": "https://mybatch.westeurope.batch.azure.com",
        "auth_method": "service_principal",
        "tenant_id": "<tenant id>",
        "client_id": "<application id>",
        "client_certificate_path": "/opt/airflow/secrets/batch-sp.pem",
        "client_certificate_password": "<certificate password, if any>",
    },
}
# [END conn_service_principal_certificate]

# [START conn_managed_identity]
AIRFLOW_CONN_AZBATCH_MI = {
    "conn_type": "azbatch",
    "extra": {
        "account_url": "https://mybatch.westeurope.batch.azure.com",
        "auth_method": "managed_identity",
        # A user-assigned identity; leave client_id out for the machine's system-assigned one.
        "client_id": "<client id of the identity>",
    },
}
# [END conn_managed_identity]

# [START conn_workload_identity]
AIRFLOW_CONN_AZBATCH_WI = {
    "conn_type": "azbatch",
    "extra": {
        "account_url": "https://mybatch.westeurope.batch.azure.com",
        "auth_method": "workload_identity",
        "tenant_id": "<tenant id>",
        "client_id": "<client id of the federated identity>",
        # Left out: AZURE_FEDERATED_TOKEN_FILE, as the AKS workload identity webhook sets it.
        "federated_token_file": "/var/run/secrets/azure/tokens/azure-identity-token",
    },
}
# [END conn_workload_identity]

# [START conn_default]
AIRFLOW_CONN_AZBATCH_ENTRA = {
    "conn_type": "azbatch",
    # No key: auth_method "auto" means DefaultAzureCredential (environment, workload identity, managed
    # identity, Azure CLI login, ...).
    "extra": {"account_url": "https://mybatch.westeurope.batch.azure.com"},
}
# [END conn_default]

# [START conn_sovereign_cloud]
AIRFLOW_CONN_AZBATCH_GOV = {
    "conn_type": "azbatch",
    "extra": {
        "account_url": "https://mybatch.usgovvirginia.batch.usgovcloudapi.net",
        "auth_method": "service_principal",
        "cloud": "us_government",
        "tenant_id": "<tenant id>",
        "client_id": "<application id>",
        "client_secret": "<client secret>",
    },
}
# [END conn_sovereign_cloud]

# [START conn_storage_and_portal]
AIRFLOW_CONN_AZBATCH_FULL = {
    "conn_type": "azbatch",
    "login": "mybatch",
    "password": "<account key>",
    "extra": {
        "account_url": "https://mybatch.westeurope.batch.azure.com",
        # Blob storage for inputs, outputs, logs, workspaces and @task.azure_batch calls.
        "storage_account_url": "https://mystorage.blob.core.windows.net",
        "storage_account_key": "<storage account key>",
        # The "Azure Batch job" link to the portal.
        "subscription_id": "<subscription id>",
        "resource_group": "<resource group of the Batch account>",
    },
}
# [END conn_storage_and_portal]

# [START conn_local_service]
AIRFLOW_CONN_AZBATCH_LOCAL = {
    "conn_type": "azbatch",
    "login": "devbatchaccount1",
    "password": "<the development key in local-azure-batch/README.md>",
    "extra": {"account_url": "<the URL python -m local_azure_batch prints>"},
}
# [END conn_local_service]
