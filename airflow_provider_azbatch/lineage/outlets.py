"""Asset events of a successful run: which assets a task's outputs declare, and what each event carries.

An output names an asset with ``"asset": Asset(...)`` (or an asset's name); the operator lists it among its outlets
when it is built, so that Airflow schedules the DAGs that wait for it. An asset the operator's ``outlets=`` name
and no output does stands for every output. When the run succeeds, each such asset's event carries, as its extra
(docs/reference/lineage.md):

- ``job_id`` and ``batch_account``: the Batch job that wrote it;
- ``blobs``: the asset URIs of the blobs the job wrote to its outputs' destinations (listed once the job ended,
  those changed since it started; at most ``MAX_BLOBS``, ``blobs_truncated`` when there were more);
- ``results`` (by Batch task id) and, for a job of one task, ``return_value``: the values of the result files the
  tasks wrote (a TaskFlow function's return value), unless together larger than ``MAX_RESULTS_BYTES``
  (``results_truncated`` then).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch.hooks.errors import describe_error
from airflow_provider_azbatch.lineage.run_facts import Destination, RunIO, run_io_of

if TYPE_CHECKING:
    from datetime import datetime

    from airflow.sdk import Context

    from airflow_provider_azbatch.hooks.storage import BlobStorage
    from airflow_provider_azbatch.lineage.operator import EndedRun, LineageOperator

MAX_BLOBS = 1000
MAX_RESULTS_BYTES = 64 * 1024


def as_asset(value: Any) -> Any:
    """An output's ``asset`` as an Airflow Asset (a name becomes ``Asset(name)``)."""
    if isinstance(value, str):
        from airflow.sdk import Asset

        return Asset(value)
    return value


def _same(one: Any, other: Any) -> bool:
    return (getattr(one, "name", None), getattr(one, "uri", None)) == (
        getattr(other, "name", None),
        getattr(other, "uri", None),
    )


def declared_assets(job_outputs: Iterable[Any], tasks: Any) -> list[Any]:
    """The assets the outputs name (``job_outputs`` and each task's ``outputs``, as given), once each."""
    outputs = list(job_outputs or ())
    if isinstance(tasks, (list, tuple)):
        for task in tasks:
            task_outputs = task.get("outputs") if isinstance(task, Mapping) else getattr(task, "outputs", None)
            if isinstance(task_outputs, (list, tuple)):
                outputs += list(task_outputs)
    found: list[Any] = []
    for output in outputs:
        value = output.get("asset") if isinstance(output, Mapping) else getattr(output, "asset", None)
        if value is None or (isinstance(value, str) and ("{{" in value or "{%" in value)):
            continue  # a templated name is refused by the request's check, naming the field
        asset = as_asset(value)
        if not any(_same(asset, known) for known in found):
            found.append(asset)
    return found


def add_outlets(outlets: list[Any], assets: Sequence[Any]) -> list[Any]:
    return [*outlets, *(asset for asset in assets if not any(_same(asset, known) for known in outlets))]


def _is_asset(outlet: Any) -> bool:
    from airflow.sdk import Asset

    return isinstance(outlet, Asset)


def destinations_of(outlet: Any, io: RunIO) -> list[Destination]:
    """The outputs an outlet stands for: those that name it, or (named by none) all of them."""
    named = [item for item in io.destinations if item.asset is not None and _same(as_asset(item.asset), outlet)]
    return named or list(io.destinations)


def written_blobs(
    storage: BlobStorage, destinations: Sequence[Destination], since: datetime | None
) -> tuple[list[str], bool]:
    """(asset URIs of the blobs the job wrote to ``destinations``, whether there were more than ``MAX_BLOBS``)."""
    uris: list[str] = []
    for item in destinations:
        if item.is_directory:
            prefix = f"{item.blob_path}/" if item.blob_path else None
            names = None
        else:
            prefix, names = item.blob_path, {item.blob_path}
        for blob in storage.list_blobs(item.container, prefix, since, limit=MAX_BLOBS + 1 - len(uris)):
            if names is None or blob.name in names:
                uri = storage.dataset(item.container, blob.name).asset_uri
                if uri not in uris:
                    uris.append(uri)
        if len(uris) > MAX_BLOBS:
            return uris[:MAX_BLOBS], True
    return uris, False


def event_extra(
    *, job_id: str, account: str, blobs: list[str] | None, truncated: bool, results: Mapping[str, Any] | None
) -> dict[str, Any]:
    extra: dict[str, Any] = {"job_id": job_id, "batch_account": account}
    if blobs is not None:
        extra["blobs"] = blobs
        if truncated:
            extra["blobs_truncated"] = True
    if results:
        if len(json.dumps(results, default=str)) > MAX_RESULTS_BYTES:
            extra["results_truncated"] = True
        else:
            extra["results"] = dict(results)
            if len(results) == 1:
                extra["return_value"] = next(iter(results.values()))
    return extra


def record_events(operator: LineageOperator, context: Context, result: EndedRun) -> None:
    """Give the event of each asset among ``operator``'s outlets its extra, for a run that succeeded."""
    outlets = [outlet for outlet in operator.outlets if _is_asset(outlet)]
    if not outlets:
        return
    log = operator.log
    io = run_io_of(operator) or RunIO()
    storage = operator.hook.blob_storage("Asset events of outputs") if io.destinations else None
    since = result.started_at.replace(microsecond=0) if result.started_at is not None else None
    results = operator.asset_results(result)
    for outlet in outlets:
        destinations = destinations_of(outlet, io)
        blobs: list[str] | None = None
        truncated = False
        if destinations and storage is not None:
            try:
                blobs, truncated = written_blobs(storage, destinations, since)
            except Exception as exc:  # the event still names the job and its results
                log.warning(
                    "Asset %s: could not list the blobs job %s wrote: %s",
                    outlet.uri,
                    result.job_id,
                    describe_error(exc),
                )
        extra = event_extra(
            job_id=result.job_id, account=operator.hook.account_name, blobs=blobs, truncated=truncated, results=results
        )
        if extra.get("results_truncated"):
            log.warning(
                "Asset %s: the tasks' results are larger than %d bytes and are left out of its event",
                outlet.uri,
                MAX_RESULTS_BYTES,
            )
        accessor = context["outlet_events"][outlet]
        accessor.extra = {**(accessor.extra or {}), **extra}
        written = f"{len(blobs)}{'+' if truncated else ''} blob(s) written" if blobs is not None else "no outputs"
        log.info("Asset event %s: Batch job %s, %s", outlet.uri, result.job_id, written)
