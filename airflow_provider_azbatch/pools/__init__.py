"""Where jobs run: pool strategies, what the pools the provider creates are made of, their preparation and health."""

from airflow_provider_azbatch.compute.images import PoolImage
from airflow_provider_azbatch.pools.disks import DataDisk
from airflow_provider_azbatch.pools.errors import PoolStrategyError
from airflow_provider_azbatch.pools.mounts import BlobMount, CifsMount, FileShareMount, NfsMount
from airflow_provider_azbatch.pools.network import PoolNetwork
from airflow_provider_azbatch.pools.spot import SpotFallback
from airflow_provider_azbatch.pools.start_task import StartTask
from airflow_provider_azbatch.pools.strategy import BatchPool
from airflow_provider_azbatch.pools.users import PoolUser
from airflow_provider_azbatch.specs.identity import RunAs

__all__ = [
    "BatchPool",
    "BlobMount",
    "CifsMount",
    "DataDisk",
    "FileShareMount",
    "NfsMount",
    "PoolImage",
    "PoolNetwork",
    "PoolStrategyError",
    "PoolUser",
    "RunAs",
    "SpotFallback",
    "StartTask",
]
