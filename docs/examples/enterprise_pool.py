"""A pool an enterprise accepts: VNet, no public IP, gallery image, a file share, a start task.

Included by docs/howto/enterprise-pools.md.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

# [START howto_enterprise_pool]
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool, FileShareMount, PoolImage, PoolNetwork, StartTask

GENOMICS = BatchPool.shared(
    "genomics",
    requirements={"cpus": 8, "memory": "32Gi"},
    vm_size="standard_d8s_v5",
    image=PoolImage.gallery(
        "/subscriptions/<sub>/resourceGroups/images/providers/Microsoft.Compute/galleries/corp/"
        "images/ubuntu-2404-hardened/versions/2026.11.0",
        node_agent_sku_id="batch.node.ubuntu 24.04",
    ),
    network=PoolNetwork(
        subnet_id="/subscriptions/<sub>/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/"
        "corp-vnet/subnets/batch",
        public_ips="none",
    ),
    mounts=[
        FileShareMount(
            "https://corpgenomics.file.core.windows.net/references",
            "refs",
            conn_id="genomics_files",
            options="-o vers=3.0,dir_mode=0755,file_mode=0644,serverino",
        )
    ],
    start_task=StartTask("apt-get update && apt-get install -y samtools"),  # runs as an administrator
    max_nodes=10,
    fill="pack",
    metadata={"cost-center": "research"},
    pool_overrides={"virtualMachineConfiguration": {"securityProfile": {"encryptionAtHost": True}}},
)
# [END howto_enterprise_pool]

with DAG(dag_id="docs_enterprise_pool", start_date=datetime(2026, 1, 1), schedule=None) as dag:
    # [START howto_enterprise_pool_task]
    AzureBatchJobOperator(
        task_id="align",
        batch_pool=GENOMICS,
        command="samtools faidx $AZ_BATCH_NODE_MOUNTS_DIR/refs/GRCh38.fa",
        azbatch_conn_id="azbatch_entra",  # a pool in a virtual network needs Microsoft Entra ID
    )
    # [END howto_enterprise_pool_task]
