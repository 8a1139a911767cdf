"""Airflow's hook lineage collector, told of every Blob read and write the provider does for a task.

What the collector gathers belongs to the task running in the process (the OpenLineage provider reads it when the
task ends, for operators that report no lineage of their own, such as ``AzureBatchJobSensor``): outside a task
(the command line, a triggerer) nothing is reported. Reporting never fails what it reports on.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_provider_azbatch.hooks.dataset_names import DatasetName

log = logging.getLogger(__name__)


def _in_task() -> bool:
    from airflow_provider_azbatch import airflowless

    if airflowless.active():  # a torchx command line that keeps Airflow out: no task
        return False
    from airflow.sdk import get_current_context

    try:
        get_current_context()
    except Exception:
        return False
    return True


def report(owner: Any, dataset: DatasetName, *, written: bool) -> None:
    """``owner`` (the hook) read (``written=False``) or wrote the data ``dataset`` names."""
    try:
        if not _in_task():
            return
        from airflow_provider_azbatch.compat import hook_lineage_collector

        collector = hook_lineage_collector()
        add = collector.add_output_asset if written else collector.add_input_asset
        add(context=owner, uri=dataset.asset_uri)
    except Exception as exc:  # lineage must never fail a read or a write
        log.debug("Could not report %s to the hook lineage collector: %s", dataset.asset_uri, exc)
