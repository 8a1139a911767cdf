"""What each operation accepts in ``$filter``, ``$select`` and ``$expand``, and the refusal of anything else.

The Batch service filters each list on its own documented set of properties, each with its own operators
("OData filters in Batch", learn.microsoft.com/rest/api/batchservice/odata-filters-in-batch; its source,
docs-ref-conceptual/batchservice/odata-filters-in-batch.md, revision of 2018-08-27, holds every table below).
The current page differs from that revision where it shows ``state`` as ``eq, ne`` (lists of nodes,
certificates, job schedules and the jobs of a schedule): ``ne`` is accepted on every ``state`` here, a
documented guess for the lists whose current table could not be read (jobs, tasks, pools, preparation and
release status). "Create queries to list Batch resources efficiently" (learn.microsoft.com/azure/batch/
batch-efficient-list-queries) adds the common rules: conditions combine with ``and`` and ``or`` (and
parentheses, as its example ``(state eq 'running') and startswith(id, 'renderTask')``); property names are
case-sensitive, values are not; times are ``DateTime'...'`` literals in W3C-DTF or RFC 1123 form;
booleans are ``true`` or ``false``; ``$select`` names properties of the entity; ``$expand`` supports only
``stats`` (jobs, job schedules, tasks, pools); "If an invalid property or operator is specified, a 400 (Bad
Request) error will result."

Which operation takes which of the three parameters is the REST reference's (api-version 2025-06-01, as
azure-batch 15.1 sends them): a parameter an operation does not take is ``UnsupportedQueryParameter``.

The error bodies: ``400 InvalidQueryParameterValue``, "Value for one of the query parameters specified in
the request URI is invalid.", with ``QueryParameterName``/``QueryParameterValue``/``Reason`` values, is the
shape "Batch Status and Error Codes" (learn.microsoft.com/rest/api/batchservice/batch-status-and-error-codes)
shows for an invalid query parameter, and the message a real response carries (Azure/azure-sdk-for-python
issue 20972). No recorded response to a refused ``$filter`` is public: that the parameter named is
``$filter`` (or ``$select``, ``$expand``) with the whole clause as its value, and the ``Reason`` texts, are
this service's (documented guess). ``UnsupportedQueryParameter`` ("One of the query parameters specified in
the request URI is not supported.") is the code of the same table; its ``QueryParameterName`` value is a
guess too.

Not checked: the filters of operations this service does not serve (certificates, pool usage metrics); what a
``not``, a ``null`` or a comparison of two properties would do on the service is not documented, so they are
refused (documented guess: the grammar the docs give is "property name, operator, and value").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from local_azure_batch.model.errors import BatchServiceError, invalid_query

__all__ = ["FilterProperty", "QueryOptions", "check_query_options", "options_for"]

EQUALITY = frozenset({"eq", "ne"})
ORDERING = frozenset({"eq", "ne", "ge", "gt", "le", "lt"})
ID_OPERATORS = ORDERING | {"startswith"}


@dataclass(frozen=True)
class FilterProperty:
    """One filterable property: its type (string, datetime, int, bool), operators and, for enums, values.

    ``path`` is the entity property it reads when the documented name differs (List Tasks documents
    ``lastModifiedTime`` for the task's ``lastModified``).
    """

    kind: str
    operators: frozenset[str]
    values: tuple[str, ...] | None = None
    path: str | None = None


@dataclass(frozen=True)
class QueryOptions:
    """What one operation takes: ``filter`` None takes no ``$filter``; ``select`` None takes no ``$select``."""

    name: str
    filter: Mapping[str, FilterProperty] | None = None
    select: frozenset[str] | None = None
    expand: frozenset[str] = field(default_factory=frozenset)
    takes_expand: bool = False


def _enum(*values: str) -> FilterProperty:
    return FilterProperty("string", EQUALITY, values)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _times(*names: str) -> dict[str, FilterProperty]:
    return {name: FilterProperty("datetime", ORDERING) for name in names}


# Enum values: the REST reference's (BatchJobState, BatchTaskState, BatchPoolState, AllocationState,
# BatchNodeState, BatchStartTaskState, BatchTaskExecutionResult, BatchJobPreparationTaskState and
# BatchJobReleaseTaskState, api-version 2025-06-01).
JOB_STATES = ("active", "disabling", "disabled", "enabling", "terminating", "completed", "deleting")
JOB_SCHEDULE_STATES = ("active", "completed", "disabled", "terminating", "deleting")
TASK_STATES = ("active", "preparing", "running", "completed")
POOL_STATES = ("active", "deleting")
ALLOCATION_STATES = ("steady", "resizing", "stopping")
NODE_STATES = (
    "idle",
    "rebooting",
    "reimaging",
    "running",
    "unusable",
    "creating",
    "starting",
    "waitingforstarttask",
    "starttaskfailed",
    "unknown",
    "leavingpool",
    "offline",
    "preempted",
    "upgradingos",
    "deallocated",
    "deallocating",
)
RESULTS = ("success", "failure")
SIDE_TASK_STATES = ("running", "completed")

# Top-level properties of each entity (the REST reference's models, api-version 2025-06-01): what $select may name.
JOB_PROPERTIES = _words(
    "id displayName usesTaskDependencies url eTag lastModified creationTime state stateTransitionTime previousState "
    "previousStateTransitionTime priority allowTaskPreemption maxParallelTasks constraints jobManagerTask "
    "jobPreparationTask jobReleaseTask commonEnvironmentSettings poolInfo onAllTasksComplete onTaskFailure "
    "networkConfiguration metadata executionInfo stats"
)
TASK_PROPERTIES = _words(
    "id displayName url eTag lastModified creationTime exitConditions state stateTransitionTime previousState "
    "previousStateTransitionTime commandLine containerSettings resourceFiles outputFiles environmentSettings "
    "affinityInfo constraints requiredSlots userIdentity executionInfo nodeInfo multiInstanceSettings stats "
    "dependsOn applicationPackageReferences"
)
POOL_PROPERTIES = _words(
    "id displayName url eTag lastModified creationTime state stateTransitionTime allocationState "
    "allocationStateTransitionTime vmSize virtualMachineConfiguration resizeTimeout resizeErrors "
    "currentDedicatedNodes currentLowPriorityNodes targetDedicatedNodes targetLowPriorityNodes enableAutoScale "
    "autoScaleFormula autoScaleEvaluationInterval autoScaleRun enableInterNodeCommunication networkConfiguration "
    "startTask applicationPackageReferences taskSlotsPerNode taskSchedulingPolicy userAccounts metadata stats "
    "mountConfiguration identity upgradePolicy"
)
NODE_PROPERTIES = _words(
    "id url state schedulingState stateTransitionTime lastBootTime allocationTime ipAddress ipv6Address affinityId "
    "vmSize totalTasksRun runningTasksCount runningTaskSlotsCount totalTasksSucceeded recentTasks startTask "
    "startTaskInfo errors isDedicated endpointConfiguration nodeAgentInfo virtualMachineInfo"
)
JOB_SCHEDULE_PROPERTIES = _words(
    "id displayName url eTag lastModified creationTime state stateTransitionTime previousState "
    "previousStateTransitionTime schedule jobSpecification executionInfo metadata stats"
)
SUBTASK_PROPERTIES = _words(
    "id nodeInfo startTime endTime exitCode containerInfo failureInfo state stateTransitionTime previousState "
    "previousStateTransitionTime result"
)
PREPARATION_STATUS_PROPERTIES = _words(
    "poolId nodeId nodeUrl jobPreparationTaskExecutionInfo jobReleaseTaskExecutionInfo"
)
STATS = frozenset({"stats"})

JOB_FILTER: dict[str, FilterProperty] = {
    "id": FilterProperty("string", ID_OPERATORS),
    "state": _enum(*JOB_STATES),
    **_times("stateTransitionTime", "creationTime", "lastModified", "executionInfo/startTime", "executionInfo/endTime"),
    "executionInfo/poolId": FilterProperty("string", ID_OPERATORS),
}
# List Job Schedules ("OData filters in Batch"): id, state, and the schedule's times.
JOB_SCHEDULE_FILTER: dict[str, FilterProperty] = {
    "id": FilterProperty("string", ID_OPERATORS),
    "state": _enum(*JOB_SCHEDULE_STATES),
    **_times(
        "stateTransitionTime",
        "creationTime",
        "lastModified",
        "executionInfo/nextRunTime",
        "executionInfo/endTime",
    ),
}
TASK_FILTER: dict[str, FilterProperty] = {
    "id": FilterProperty("string", ID_OPERATORS),
    "state": _enum(*TASK_STATES),
    **_times("stateTransitionTime", "creationTime", "executionInfo/startTime", "executionInfo/endTime"),
    # The table names it lastModifiedTime; the task's property is lastModified (both taken: documented guess).
    "lastModifiedTime": FilterProperty("datetime", ORDERING, path="lastModified"),
    "lastModified": FilterProperty("datetime", ORDERING),
    "executionInfo/exitCode": FilterProperty("int", ORDERING),
    "executionInfo/result": _enum(*RESULTS),
}
POOL_FILTER: dict[str, FilterProperty] = {
    "id": FilterProperty("string", ID_OPERATORS),
    "state": _enum(*POOL_STATES),
    "allocationState": _enum(*ALLOCATION_STATES),
    **_times("stateTransitionTime", "allocationStateTransitionTime", "creationTime", "lastModified"),
    "enableAutoScale": FilterProperty("bool", EQUALITY),
    "vmSize": FilterProperty("string", EQUALITY),
    "enableInterNodeCommunication": FilterProperty("bool", EQUALITY),
}
NODE_FILTER: dict[str, FilterProperty] = {
    "state": _enum(*NODE_STATES),
    **_times(
        "stateTransitionTime", "lastBootTime", "allocationTime", "startTaskInfo/startTime", "startTaskInfo/endTime"
    ),
    "startTaskInfo/state": FilterProperty("string", frozenset({"eq"}), SIDE_TASK_STATES),
    "startTaskInfo/result": _enum(*RESULTS),
    "startTaskInfo/exitCode": FilterProperty("int", ORDERING),
}
PREPARATION_STATUS_FILTER: dict[str, FilterProperty] = {
    "poolId": FilterProperty("string", EQUALITY),
    "nodeId": FilterProperty("string", EQUALITY),
}
for _side in ("jobPreparationTaskExecutionInfo", "jobReleaseTaskExecutionInfo"):
    PREPARATION_STATUS_FILTER.update(
        {
            f"{_side}/state": FilterProperty("string", frozenset({"eq"}), SIDE_TASK_STATES),
            **_times(f"{_side}/startTime", f"{_side}/endTime"),
            f"{_side}/exitCode": FilterProperty("int", ORDERING),
            f"{_side}/result": _enum(*RESULTS),
        }
    )
NODE_EXTENSION_PROPERTIES = frozenset({"provisioningState", "vmExtension", "instanceView"})
NODE_COUNTS_FILTER = {"poolId": FilterProperty("string", frozenset({"eq"}))}
FILES_FILTER = {"name": FilterProperty("string", frozenset({"startswith"}))}

OPTIONS: dict[str, QueryOptions] = {
    "Jobs_ListJobs": QueryOptions("List Jobs", JOB_FILTER, JOB_PROPERTIES, STATS, True),
    "Jobs_GetJob": QueryOptions("Get Job", None, JOB_PROPERTIES, STATS, True),
    "Jobs_ListJobsFromSchedule": QueryOptions("List Jobs From Schedule", JOB_FILTER, JOB_PROPERTIES, STATS, True),
    "JobSchedules_ListJobSchedules": QueryOptions(
        "List Job Schedules", JOB_SCHEDULE_FILTER, JOB_SCHEDULE_PROPERTIES, STATS, True
    ),
    "JobSchedules_GetJobSchedule": QueryOptions("Get Job Schedule", None, JOB_SCHEDULE_PROPERTIES, STATS, True),
    "Tasks_ListTasks": QueryOptions("List Tasks", TASK_FILTER, TASK_PROPERTIES, STATS, True),
    "Tasks_GetTask": QueryOptions("Get Task", None, TASK_PROPERTIES, STATS, True),
    "Tasks_ListSubTasks": QueryOptions("List Subtasks", None, SUBTASK_PROPERTIES),
    "Pools_ListPools": QueryOptions("List Pools", POOL_FILTER, POOL_PROPERTIES, STATS, True),
    "Pools_GetPool": QueryOptions("Get Pool", None, POOL_PROPERTIES, STATS, True),
    "Nodes_ListNodes": QueryOptions("List Nodes", NODE_FILTER, NODE_PROPERTIES),
    "Nodes_GetNode": QueryOptions("Get Node", None, NODE_PROPERTIES),
    "Pools_ListPoolNodeCounts": QueryOptions("List Pool Node Counts", NODE_COUNTS_FILTER),
    # A documented guess: the images' verification type, the filter a client asks for verified images with.
    "Pools_ListSupportedImages": QueryOptions(
        "List Supported Images", {"verificationType": _enum("verified", "unverified")}
    ),
    "Tasks_ListTaskFiles": QueryOptions("List Task Files", FILES_FILTER),
    "Nodes_ListNodeFiles": QueryOptions("List Node Files", FILES_FILTER),
    "Nodes_ListNodeExtensions": QueryOptions("List Node Extensions", None, NODE_EXTENSION_PROPERTIES),
    "Nodes_GetNodeExtension": QueryOptions("Get Node Extension", None, NODE_EXTENSION_PROPERTIES),
    "Jobs_ListJobPreparationAndReleaseTaskStatus": QueryOptions(
        "List Job Preparation and Release Task Status", PREPARATION_STATUS_FILTER, PREPARATION_STATUS_PROPERTIES
    ),
}
# Operations that take none of the three: a $filter, $select or $expand sent to them is not supported.
NONE = QueryOptions("this operation")
QUERY_OPTION_NAMES = ("$filter", "$select", "$expand")


def options_for(operation: str) -> QueryOptions:
    return OPTIONS.get(operation, NONE)


def unsupported_query_parameter(name: str, operation_name: str) -> BatchServiceError:
    return BatchServiceError(
        400,
        "UnsupportedQueryParameter",
        "One of the query parameters specified in the request URI is not supported.",
        [("QueryParameterName", name), ("Reason", f"{operation_name} does not take {name}.")],
    )


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",")]


def _check_names(parameter: str, text: str, allowed: frozenset[str], what: str) -> list[str]:
    names = _names(text)
    for name in names:
        if name not in allowed:
            known = ", ".join(sorted(allowed))
            reason = (
                f"'{name}' is not {what}; property names are case-sensitive: {known}."
                if name
                else f"An empty name in {parameter}."
            )
            raise invalid_query(parameter, text, reason)
    return names


def check_query_options(operation: str, query: Mapping[str, str]) -> None:
    """Refuse a ``$filter``, ``$select`` or ``$expand`` the operation does not take or whose content it refuses.

    The filter itself is compiled (and checked against ``options.filter``) where the list is answered.
    """
    options = options_for(operation)
    for parameter in QUERY_OPTION_NAMES:
        if parameter not in query:
            continue
        taken = {
            "$filter": options.filter is not None,
            "$select": options.select is not None,
            "$expand": options.takes_expand,
        }[parameter]
        if not taken:
            raise unsupported_query_parameter(parameter, options.name)
    select = query.get("$select")
    if select is not None and options.select is not None:
        _check_names("$select", select, options.select, f"a property {options.name} returns")
    expand = query.get("$expand")
    if expand is not None:
        _check_names("$expand", expand, options.expand, f"something {options.name} can expand (only stats)")
