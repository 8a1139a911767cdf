"""Where jobs run: pool strategies (existing, shared, auto), their preparation, and their health."""

from airflow_provider_azbatch.pools.strategy import BatchPool, PoolStrategyError

__all__ = ["BatchPool", "PoolStrategyError"]
