"""What ``pool_overrides`` of a pool the provider creates may hold (see ``specs/overrides.py``).

Fields with a parameter of their own are refused with that parameter's name; the rest of the pool model (security
profile, OS disk, extensions, node placement, upgrade policy, endpoint configuration, resize timeout, ...) merges
over the generated pool.
"""

from __future__ import annotations

from azure.batch import models as batch_models

from airflow_provider_azbatch.specs.overrides import OverrideSchema, Owned

_POOL_OWNED = {
    "id": Owned("the pool id", "BatchPool.shared(pool_id)"),
    "vmSize": Owned("the VM size", "vm_size= or requirements"),
    "virtualMachineConfiguration.imageReference": Owned("the image", "image= or requirements os_image"),
    "virtualMachineConfiguration.nodeAgentSKUId": Owned("the node agent of the image", "image="),
    "virtualMachineConfiguration.containerConfiguration.containerImageNames": Owned(
        "the images the nodes pre-fetch", "container_images"
    ),
    "virtualMachineConfiguration.containerConfiguration.containerRegistries": Owned(
        "the registry credentials, from a connection", "registry_conn_id"
    ),
    "virtualMachineConfiguration.dataDisks": Owned("the data disks", "data_disks="),
    "targetDedicatedNodes": Owned("the pool's size", "max_nodes, autoscale and requirements low_priority"),
    "targetLowPriorityNodes": Owned("the pool's size", "max_nodes, autoscale and requirements low_priority"),
    "enableAutoScale": Owned("whether the pool scales", "autoscale"),
    "enableInterNodeCommunication": Owned("set for tasks on several nodes", "num_nodes"),
    "taskSlotsPerNode": Owned("the task slots per node", "task_slots_per_node"),
    "taskSchedulingPolicy.nodeFillType": Owned("how tasks fill nodes", "fill="),
    "taskSchedulingPolicy.jobDefaultOrder": Owned("the order of jobs of equal priority", "job_order="),
    "startTask.commandLine": Owned("the start task's command, handed to a shell", "start_task="),
    "startTask.userIdentity": Owned("who runs the start task", "StartTask(run_as=)"),
    "startTask.environmentSettings": Owned("the start task's environment", "StartTask(environment=)"),
    "startTask.maxTaskRetryCount": Owned("the start task's retries", "StartTask(max_retries=)"),
    "startTask.waitForSuccess": Owned("whether nodes wait for the start task", "StartTask(wait_for_success=)"),
    "networkConfiguration.subnetId": Owned("the subnet", "network=PoolNetwork(subnet_id=)"),
    "networkConfiguration.publicIPAddressConfiguration.provision": Owned(
        "the public IP addresses", "network=PoolNetwork(public_ips=)"
    ),
    "networkConfiguration.publicIPAddressConfiguration.ipAddressIds": Owned(
        "the public IP addresses", "network=PoolNetwork(public_ips=)"
    ),
    "networkConfiguration.enableAcceleratedNetworking": Owned(
        "accelerated networking", "network=PoolNetwork(accelerated_networking=)"
    ),
    "mountConfiguration": Owned("the mounts, with secrets from connections", "mounts="),
    "userAccounts": Owned("the pool's users, with passwords from connections", "users="),
    "metadata": Owned("with a name of its own (azbatch-pool-spec)", "metadata="),
}

SHARED_POOL_OVERRIDES = OverrideSchema(batch_models.BatchPoolCreateOptions, _POOL_OWNED)
AUTO_POOL_OVERRIDES = OverrideSchema(batch_models.BatchPoolSpecification, _POOL_OWNED)
