"""Pools from resource requirements (docs/howto/pools.md)."""

from __future__ import annotations

from datetime import timedelta

# [START howto_pools_requirements]
from airflow_provider_azbatch.pools import BatchPool, SpotFallback, StartTask

BatchPool.existing("nightly", requirements={"cpus": 8, "memory": "32Gi"})  # checked: exists, VM size fits
BatchPool.shared("gpu-a100", requirements={"gpus": 4, "gpu_kind": "A100", "memory": "64Gi"}, max_nodes=4)
BatchPool.auto(requirements={"cpus": 2, "memory": "8Gi", "low_priority": True}, max_nodes=10)
# [END howto_pools_requirements]

# [START howto_pools_22_04]
LEGACY = BatchPool.shared(
    "made-by-0.2",
    requirements={"cpus": 2, "os_image": "ubuntu-22.04"},
    start_task=StartTask("./setup.sh", run_as="nonadmin"),
)
# [END howto_pools_22_04]

# [START howto_pools_spot]
BatchPool.shared(
    "train-spot",
    requirements={"gpus": 1, "gpu_kind": "A100", "low_priority": True},
    max_nodes=4,
    # Dedicated nodes (pool train-spot-dedicated) after 2 preemptions, or 20 minutes without a Spot node.
    spot_fallback=SpotFallback(after_preemptions=2, no_spot_node_within=timedelta(minutes=20)),
)
# [END howto_pools_spot]
