"""The OpenLineage facets of a run, for the OpenLineage provider's calls of an operator's
``get_openlineage_facets_on_start/complete/failure``.

Only those calls import this module, and only the OpenLineage provider makes them: without it nothing here is
imported. Inputs and outputs are the run's Blob data (:mod:`~airflow_provider_azbatch.lineage.run_facts`, named as
:mod:`~airflow_provider_azbatch.hooks.dataset_names` says); the run facet ``azureBatchJob`` is the Batch job
(account, job, pool, VM size, nodes, cost estimate, exit codes); a failed run carries the failure report as its
``errorMessage``; a TaskFlow function's source is the job's ``sourceCode`` facet (unless ``[openlineage]
disable_source_code``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import attr
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.facet_v2 import RunFacet, error_message_run, source_code_job

from airflow_provider_azbatch.lineage.run_facts import job_facts, run_io_of

if TYPE_CHECKING:
    from airflow_provider_azbatch.lineage.operator import LineageOperator

log = logging.getLogger(__name__)

# The run facet's key, and where its JSON schema ships (the package's lineage/AzureBatchJobRunFacet.json).
RUN_FACET = "azureBatchJob"
SCHEMA_URL = "urn:airflow-provider-azbatch:openlineage:AzureBatchJobRunFacet:1-0-0"


@attr.define
class AzureBatchJobRunFacet(RunFacet):
    """The Azure Batch job a run of the task was (docs/reference/lineage.md)."""

    account: str
    accountUrl: str
    jobId: str | None = attr.field(default=None)
    poolId: str | None = attr.field(default=None)
    vmSize: str | None = attr.field(default=None)
    nodeCount: int | None = attr.field(default=None)
    costEstimate: dict[str, Any] | None = attr.field(default=None)
    jobState: str | None = attr.field(default=None)
    terminateReason: str | None = attr.field(default=None)
    taskCount: int | None = attr.field(default=None)
    taskCounts: dict[str, int] | None = attr.field(default=None)
    exitCodes: dict[str, int | None] | None = attr.field(default=None)

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL


def facets(operator: LineageOperator, moment: str) -> OperatorLineage[Any, Any]:
    """The lineage of ``operator``'s run at ``moment`` (``start``, ``complete`` or ``failure``); what cannot be known
    (a request that does not check, a connection that cannot be read) is left out, never raised."""
    result = getattr(operator, "lineage_result", None) if moment != "start" else None
    try:
        settings = operator.hook.settings
        account, account_url, storage_url = (
            operator.hook.account_name,
            settings.account_url,
            settings.storage_account_url,
        )
    except Exception as exc:
        log.warning("No OpenLineage facets for %s: its connection cannot be read (%s)", operator.task_id, exc)
        return OperatorLineage()
    io = run_io_of(operator)
    job_id = result.job_id if result is not None else _job_id(operator)
    run_facets: dict[str, Any] = {
        RUN_FACET: AzureBatchJobRunFacet(
            **job_facts(
                account=account, account_url=account_url, job_id=job_id, pool_id=operator.pool_id, result=result
            )
        )
    }
    failure = getattr(operator, "lineage_failure", None)
    if moment == "failure" and failure:
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=failure, programmingLanguage="python"
        )
    job_facets: dict[str, Any] = {}
    source = _source(operator)
    if source is not None:
        job_facets["sourceCode"] = source_code_job.SourceCodeJobFacet(language="python", sourceCode=source)
    staged = result.staged_blobs if result is not None else ()
    inputs = io.input_datasets(storage_url, staged) if io is not None else []
    outputs = io.output_datasets(storage_url, job_id) if io is not None else []
    return OperatorLineage(
        inputs=[InputDataset(namespace=name.namespace, name=name.name) for name in inputs],
        outputs=[OutputDataset(namespace=name.namespace, name=name.name) for name in outputs],
        run_facets=run_facets,
        job_facets=job_facets,
    )


def _job_id(operator: LineageOperator) -> str | None:
    """The job the run submits: the operator's ``job_id``, or the one derived from the task instance."""
    claimed = getattr(getattr(operator, "__dict__", {}).get("run"), "job_id", None)
    if claimed:
        return str(claimed)
    if operator.job_id:
        return str(operator.job_id)
    from airflow_provider_azbatch.submission.job_ids import default_job_id

    try:
        from airflow.sdk import get_current_context

        context = get_current_context()
    except Exception:
        return None
    map_index = getattr(context["ti"], "map_index", None)
    return default_job_id(
        context["dag"].dag_id, operator.task_id, context["run_id"], -1 if map_index is None else map_index
    )


def _source(operator: LineageOperator) -> str | None:
    """A TaskFlow function's source, where OpenLineage may send source code."""
    get_source = getattr(operator, "get_python_source", None)
    if get_source is None:
        return None
    from airflow.providers.openlineage import conf

    if not conf.is_source_enabled():
        return None
    try:
        return str(get_source())
    except Exception:
        return None
