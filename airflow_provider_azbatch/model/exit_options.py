"""Which of a task's exit options the Batch service applies to how the task ended. No I/O.

The service's documented matching order (``ExitConditions`` in the REST reference): an exit code listed in
``exitCodes``, else one inside an ``exitCodeRanges`` range, else ``preProcessingError`` for a task that could
not start (no exit code), ``fileUploadError`` for a task whose output upload failed (an exit code mapped above
wins over it), else ``default`` for any other failure. What no entry says takes the documented defaults:
``dependencyAction`` ``satisfy`` for success and ``block`` for failure; ``jobAction`` ``none`` for success and,
when the job's ``onTaskFailure`` is ``performexitoptionsjobaction``, ``terminate`` for failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_azbatch.model.verdict import TASK_ENDED

# Failure codes of a task whose output files could not be uploaded (the service's and the local service's).
UPLOAD_FAILURE_PREFIX = "FileUpload"


@dataclass(frozen=True)
class AppliedExitOptions:
    job_action: str
    dependency_action: str
    # The options came from an exitCodes or exitCodeRanges entry naming this exit code.
    by_exit_code: bool


def applied_exit_options(
    conditions: Mapping[str, Any] | None,
    *,
    failed: bool,
    exit_code: int | None,
    failure_code: str | None,
    acts_on_failure: bool = False,
) -> AppliedExitOptions:
    """The options the service applies to a completed task (``conditions``: its REST ``exitConditions``)."""
    conditions = conditions or {}
    matched: Mapping[str, Any] | None = None
    by_code = False
    if exit_code is not None:
        for item in conditions.get("exitCodes") or ():
            if item.get("code") == exit_code:
                matched, by_code = item.get("exitOptions") or {}, True
                break
        else:
            for item in conditions.get("exitCodeRanges") or ():
                if int(item.get("start", 0)) <= exit_code <= int(item.get("end", -1)):
                    matched, by_code = item.get("exitOptions") or {}, True
                    break
    if matched is None and failed:
        if failure_code and failure_code.startswith(UPLOAD_FAILURE_PREFIX):
            matched = conditions.get("fileUploadError")
        elif exit_code is None and failure_code != TASK_ENDED:
            matched = conditions.get("preProcessingError")
        if matched is None:
            matched = conditions.get("default")
    matched = matched or {}
    return AppliedExitOptions(
        job_action=matched.get("jobAction") or ("terminate" if failed and acts_on_failure else "none"),
        dependency_action=matched.get("dependencyAction") or ("block" if failed else "satisfy"),
        by_exit_code=by_code,
    )
