"""What one run read and wrote, and which Batch job it was: the facts both OpenLineage events and asset events are
made of, from the job request and the run's result. No I/O, and nothing of OpenLineage.

Read: each input (``inputs=``, a task's own: a container prefix, or a URL), and each blob staged for the tasks (a
workspace archive, a TaskFlow function's call). Written: each output's destination (its container, or the
operator's ``output_container``, and its ``path``), the job's uploaded logs (``<output_container>/<logs_prefix>/<job
id>``) and each task's uploaded result file beside them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch.hooks.dataset_names import DatasetName, blob_dataset, url_dataset
from airflow_provider_azbatch.specs.blob_io import InputSpec, OutputSpec
from airflow_provider_azbatch.submission.job import RESULT_FILES_DIR

if TYPE_CHECKING:
    from airflow_provider_azbatch.lineage.operator import EndedRun, LineageOperator

log = logging.getLogger(__name__)

# Result files are named one by one for at most this many tasks; beyond, the logs' dataset holds them.
MAX_NAMED_RESULT_FILES = 20
# Exit codes in the run facet, at most (the XCom result lists as many).
MAX_EXIT_CODES = 1000


@dataclass(frozen=True)
class Destination:
    """Where an output is uploaded: ``path`` in ``container`` (a blob for a single file, else a virtual directory)."""

    container: str
    path: str | None
    pattern: str
    asset: Any = None

    @property
    def is_directory(self) -> bool:
        return any(char in self.pattern for char in "*?[")

    @property
    def blob_path(self) -> str:
        """The blob a single file is uploaded as (Batch: ``path``, else the file's name at the container's root), or
        the virtual directory files matching a wildcard go to."""
        if self.is_directory:
            return (self.path or "").strip("/")
        return (self.path or self.pattern.rsplit("/", 1)[-1]).strip("/")


@dataclass(frozen=True)
class RunIO:
    """A run's Blob inputs and outputs as declared (before anything ran)."""

    inputs: Sequence[InputSpec] = ()
    destinations: Sequence[Destination] = ()
    # The logs' container and prefix, when the job uploads them.
    logs: tuple[str, str] | None = None
    # Task id -> result file (its path in the working directory).
    result_files: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        job_inputs: Sequence[InputSpec],
        job_outputs: Sequence[OutputSpec],
        tasks: Iterable[Any],
        *,
        output_container: str | None,
        upload_logs: bool | None,
        logs_prefix: str,
        result_file: str | None,
    ) -> RunIO:
        """From a checked request's parts (``tasks``: its task specs, each with ``inputs``, ``outputs``, ``id`` and
        ``result_file``)."""
        inputs = list(job_inputs)
        destinations: list[Destination] = []
        result_files: dict[str, str] = {}

        def add(output: OutputSpec) -> None:
            container = output.container or output_container
            if container:
                destinations.append(Destination(container, output.path, output.pattern, output.asset))

        for output in job_outputs:
            add(output)
        for task in tasks:
            inputs += [item for item in task.inputs if item not in inputs]
            for output in task.outputs:
                add(output)
            if task.result_file or result_file:
                result_files[task.id] = str(task.result_file or result_file)
        uploads_logs = upload_logs if upload_logs is not None else output_container is not None
        logs = (output_container, logs_prefix.strip("/")) if uploads_logs and output_container else None
        return cls(inputs, destinations, logs, result_files)

    # -- datasets ----------------------------------------------------------------------------------------
    def input_datasets(self, storage_url: str | None, staged: Sequence[tuple[str, str]] = ()) -> list[DatasetName]:
        found: list[DatasetName] = []
        for item in self.inputs:
            if item.url is not None:
                found.append(url_dataset(item.url, storage_url))
            elif storage_url and item.container:
                found.append(blob_dataset(storage_url, item.container, item.prefix))
        if storage_url:
            found += [blob_dataset(storage_url, container, name) for container, name in staged]
        return list(dict.fromkeys(found))

    def output_datasets(self, storage_url: str | None, job_id: str | None) -> list[DatasetName]:
        if not storage_url:
            return []
        found = [blob_dataset(storage_url, item.container, item.blob_path) for item in self.destinations]
        if self.logs is not None and job_id:
            container, prefix = self.logs
            logs = "/".join(part for part in (prefix, job_id) if part)
            found.append(blob_dataset(storage_url, container, logs))
            if 0 < len(self.result_files) <= MAX_NAMED_RESULT_FILES:
                found += [
                    blob_dataset(storage_url, container, f"{logs}/{task}/{RESULT_FILES_DIR}/{path}")
                    for task, path in sorted(self.result_files.items())
                ]
        return list(dict.fromkeys(found))


def job_facts(
    *,
    account: str,
    account_url: str,
    job_id: str | None,
    pool_id: str | None,
    result: EndedRun | None = None,
) -> dict[str, Any]:
    """The Batch job of a run, as the run facet gives it (``result``: the run's RunResult once it ended)."""
    facts: dict[str, Any] = {"account": account, "accountUrl": account_url}
    if job_id:
        facts["jobId"] = job_id
    if pool_id:
        facts["poolId"] = pool_id
    if result is None:
        return facts
    xcom = result.xcom
    facts["jobId"] = result.job_id
    if xcom.get("pool_id"):
        facts["poolId"] = xcom["pool_id"]
    cost = xcom.get("cost") or {}
    if cost.get("vm_size"):
        facts["vmSize"] = cost["vm_size"]
    facts["nodeCount"] = result.nodes
    if cost:
        facts["costEstimate"] = {
            "usd": cost.get("estimate_usd"),
            "basis": cost.get("basis"),
            "region": cost.get("region"),
            "pricesDate": cost.get("prices_date"),
        }
    if xcom.get("job_state"):
        facts["jobState"] = xcom["job_state"]
    if xcom.get("terminate_reason"):
        facts["terminateReason"] = xcom["terminate_reason"]
    counts = xcom.get("task_counts") or {}
    facts["taskCount"] = result.total
    if counts:
        facts["taskCounts"] = counts
    tasks = xcom.get("tasks") or {}
    facts["exitCodes"] = {task: outcome.get("exit_code") for task, outcome in list(tasks.items())[:MAX_EXIT_CODES]}
    return facts


def run_io_of(operator: LineageOperator) -> RunIO | None:
    """The Blob inputs and outputs of ``operator``'s (rendered) request; None when it does not check (the run says
    why)."""
    try:
        request = operator.job_request()
        checked = request.check(rendered=True)
    except Exception as exc:
        log.debug("No inputs or outputs in the lineage of %s: %s", operator.task_id, exc)
        return None
    blob = request.blob
    return RunIO.of(
        checked.inputs,
        checked.outputs,
        checked.specs,
        output_container=blob.output_container,
        upload_logs=blob.upload_logs,
        logs_prefix=blob.logs_prefix,
        result_file=request.result_file,
    )
