"""Pools whose nodes stay idle too long: a fixed pool, or an autoscale formula that does not give nodes back.

A pool autoscaled by this provider's formula gives an idle node back at the first evaluation whose samples show
nothing pending (its evaluation interval, five minutes at least, and a minute of samples), and the node then
takes a little while to go. So a node idle for longer than the pool's ``autoScaleEvaluationInterval`` (five
minutes for a pool without autoscale, the shortest Batch allows) plus ``[azbatch] idle_node_margin`` is paid for
nothing and will stay so. A node is idle since its ``stateTransitionTime``, when it entered the ``idle`` state.
No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from airflow_provider_azbatch.compute.autoscale import MIN_EVALUATION_INTERVAL, parse_iso8601_duration


def evaluation_interval(pool: Any) -> timedelta:
    """The pool's autoscale evaluation interval; the shortest Batch allows for a pool without autoscale."""
    interval = (
        getattr(pool, "auto_scale_evaluation_interval", None) if getattr(pool, "enable_auto_scale", False) else None
    )
    if isinstance(interval, timedelta):
        return interval
    if isinstance(interval, str):
        return parse_iso8601_duration(interval) or MIN_EVALUATION_INTERVAL
    return MIN_EVALUATION_INTERVAL


def longest_idle(idle_since: Iterable[datetime | None], now: datetime) -> float | None:
    """Seconds the longest-idle node has been idle (None: no idle node)."""
    ages = [(now - since).total_seconds() for since in idle_since if since is not None]
    return max(ages) if ages else None


def idle_verdict(
    pool: Any, idle_since: Iterable[datetime | None], now: datetime, margin_seconds: float
) -> dict[str, Any]:
    """``{"idle_seconds", "idle_threshold_seconds", "idle_too_long"}`` of one pool."""
    threshold = evaluation_interval(pool).total_seconds() + margin_seconds
    seconds = longest_idle(idle_since, now)
    return {
        "idle_seconds": None if seconds is None else round(seconds, 1),
        "idle_threshold_seconds": threshold,
        "idle_too_long": seconds is not None and seconds > threshold,
    }
