"""The OpenLineage parent run of a task, handed to its Batch tasks as environment variables, so that code on a node
can report its own lineage as the task's child.

``OPENLINEAGE_CONTEXT`` is the JSON OpenLineage's integrations read since OpenLineage/OpenLineage#4682 (proposed in
#4412): ``{"parent": {"run": {"runId"}, "job": {"namespace", "name"}, "root": {"run": {...}, "job": {...}}}}``, the
shape of the ``parent`` run facet; ``OPENLINEAGE_PARENT_ID`` and ``OPENLINEAGE_ROOT_PARENT_ID``
(``{namespace}/{job name}/{run id}``) are the older variables the same integrations fall back to. The values are the
OpenLineage provider's own (its ``lineage_*`` macros): the task is the parent, its DAG run the root.

Only when the OpenLineage provider is installed and enabled; nothing of it is imported otherwise.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.sdk.types import RuntimeTaskInstanceProtocol

log = logging.getLogger(__name__)

PARENT_ID = "OPENLINEAGE_PARENT_ID"
ROOT_PARENT_ID = "OPENLINEAGE_ROOT_PARENT_ID"
CONTEXT = "OPENLINEAGE_CONTEXT"


def parent_environment(context: Context) -> dict[str, str]:
    """The variables for the task instance of ``context`` (none without an enabled OpenLineage provider)."""
    from airflow_provider_azbatch.compat import openlineage_enabled

    if not openlineage_enabled():
        return {}
    try:
        return _environment(context["ti"])
    except Exception as exc:  # lineage must never fail the run
        log.warning("The Batch tasks get no OpenLineage parent run: %s", exc)
        return {}


def _environment(ti: RuntimeTaskInstanceProtocol) -> dict[str, str]:
    from airflow.providers.openlineage.plugins import macros

    parent = {
        "run": {"runId": macros.lineage_run_id(ti)},
        "job": {"namespace": macros.lineage_job_namespace(), "name": macros.lineage_job_name(ti)},
    }
    environment = {PARENT_ID: _identifier(parent)}
    if hasattr(macros, "lineage_root_run_id"):  # the root macros came after the parent's
        # The root's own namespace macro came later still (a DAG run's conf can name another root): before, the
        # root is in the task's namespace.
        root_namespace = getattr(macros, "lineage_root_job_namespace", None)
        root = {
            "run": {"runId": macros.lineage_root_run_id(ti)},
            "job": {
                "namespace": root_namespace(ti) if root_namespace else macros.lineage_job_namespace(),
                "name": macros.lineage_root_job_name(ti),
            },
        }
        parent["root"] = root
        environment[ROOT_PARENT_ID] = _identifier(root)
    environment[CONTEXT] = json.dumps({"parent": parent}, separators=(",", ":"))
    return environment


def _identifier(run: dict[str, Any]) -> str:
    return f"{run['job']['namespace']}/{run['job']['name']}/{run['run']['runId']}"
