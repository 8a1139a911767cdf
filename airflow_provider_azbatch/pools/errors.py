"""The error a pool strategy raises for a setting that cannot work; the operator reports it as a parameter error."""

from __future__ import annotations


class PoolStrategyError(ValueError):
    """A pool setting cannot work (checked when the DAG is parsed, or when the pool is prepared)."""
