"""A watcher set up as the ``[azbatch]`` options say, writing to an Airflow logger (operator, sensor, CLI)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_azbatch import config
from airflow_provider_azbatch.watching.core import JobWatcher
from airflow_provider_azbatch.watching.output_log import log_emitter
from airflow_provider_azbatch.watching.state import WatchState

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import Log


def configured_watcher(state: WatchState, log: Log, *, stream_output: bool, poll_interval: float) -> JobWatcher:
    return JobWatcher(
        state,
        log_emitter(log),
        stream_output=stream_output,
        poll_interval=poll_interval,
        max_read_bytes=config.get_int("max_read_bytes"),
        idle_stream_seconds=config.get_float("idle_stream_interval"),
        partial_line_seconds=config.get_float("partial_line_seconds"),
    )
