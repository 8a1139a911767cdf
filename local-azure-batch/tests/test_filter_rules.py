"""Each list's $filter rules (rest/query_options.py): what the Batch docs allow, and the refusal of the rest.

Sources: "OData filters in Batch" (one table per list) and "Create queries to list Batch resources
efficiently" (and/or, parentheses, DateTime literals in W3C-DTF or RFC 1123 form, true/false). The HTTP
answers are in test_list_query_conformance.py.
"""

from __future__ import annotations

import pytest

from local_azure_batch.rest.odata_filter import ODataFilterError, ODataRuleError, compile_filter
from local_azure_batch.rest.query_options import OPTIONS

JOB = {
    "id": "nightly-7",
    "state": "completed",
    "stateTransitionTime": "2026-12-02T07:30:00.1234567Z",
    "creationTime": "2026-12-02T06:00:00Z",
    "lastModified": "2026-12-02T07:30:00Z",
    "executionInfo": {"startTime": "2026-12-02T06:00:00Z", "endTime": "2026-12-02T07:30:00Z", "poolId": "af-1"},
}


def _compile(operation: str, text: str):
    options = OPTIONS[operation]
    assert options.filter is not None
    return compile_filter(text, options.filter, options.name)


# (operation, filter): every documented property with one of its operators, and the documented combinations.
ALLOWED = [
    ("Jobs_ListJobs", "id eq 'nightly-7'"),
    ("Jobs_ListJobs", "startswith(id, 'nightly')"),
    ("Jobs_ListJobs", "id ge 'a' and id lt 'z'"),
    ("Jobs_ListJobs", "state eq 'completed'"),
    ("Jobs_ListJobs", "state ne 'active'"),
    ("Jobs_ListJobs", "stateTransitionTime gt datetime'2026-12-02T07:00:00Z'"),
    ("Jobs_ListJobs", "state eq 'completed' and stateTransitionTime ge datetime'2026-12-02T07:00:00Z'"),
    (
        "Jobs_ListJobs",
        "(state eq 'active' or state eq 'terminating') and lastModified ge datetime'2026-12-02T07:00:00Z'",
    ),
    ("Jobs_ListJobs", "creationTime le DateTime'Wed, 02 Dec 2026 07:00:00 GMT'"),
    ("Jobs_ListJobs", "executionInfo/startTime ge datetime'2026-12-02T00:00:00Z'"),
    ("Jobs_ListJobs", "executionInfo/endTime lt datetime'2026-12-03T00:00:00Z'"),
    ("Jobs_ListJobs", "startswith(executionInfo/poolId, 'af-') or executionInfo/poolId eq 'shared'"),
    ("Tasks_ListTasks", "state eq 'completed' and executionInfo/result eq 'failure'"),
    ("Tasks_ListTasks", "id eq 'a' or id eq 'b' or id eq 'c'"),
    ("Tasks_ListTasks", "state eq 'active'"),
    ("Tasks_ListTasks", "executionInfo/exitCode ne 0 and state eq 'completed'"),
    ("Tasks_ListTasks", "executionInfo/exitCode ge -1"),
    ("Tasks_ListTasks", "lastModifiedTime ge datetime'2026-12-02T07:00:00Z'"),
    ("Tasks_ListTasks", "(state eq 'running') and startswith(id, 'renderTask')"),
    (
        "Tasks_ListTasks",
        "executionInfo/startTime ge datetime'2026-12-02T07:00:00Z' and creationTime lt datetime'2027-01-01'",
    ),
    ("Pools_ListPools", "startswith(id, 'batch_ade_')"),
    ("Pools_ListPools", "state eq 'active' and allocationState eq 'steady'"),
    ("Pools_ListPools", "enableAutoScale eq true and vmSize ne 'standard_d2s_v3'"),
    ("Pools_ListPools", "enableInterNodeCommunication eq false"),
    ("Pools_ListPools", "allocationStateTransitionTime lt datetime'2026-12-02T07:00:00Z'"),
    ("Nodes_ListNodes", "state eq 'idle' or state eq 'running'"),
    ("Nodes_ListNodes", "startTaskInfo/state eq 'completed' and startTaskInfo/exitCode ne 0"),
    ("Nodes_ListNodes", "startTaskInfo/result eq 'failure'"),
    ("Nodes_ListNodes", "lastBootTime gt datetime'2026-12-02T07:00:00Z'"),
    ("Pools_ListPoolNodeCounts", "poolId eq 'shared'"),
    ("Tasks_ListTaskFiles", "startswith(name, 'wd/')"),
    ("Nodes_ListNodeFiles", "startswith(name, 'startup')"),
    (
        "Jobs_ListJobPreparationAndReleaseTaskStatus",
        "nodeId eq 'tvm-1' and jobPreparationTaskExecutionInfo/result eq 'failure'",
    ),
    ("Jobs_ListJobPreparationAndReleaseTaskStatus", "jobReleaseTaskExecutionInfo/state eq 'completed'"),
    ("Jobs_ListJobPreparationAndReleaseTaskStatus", "jobPreparationTaskExecutionInfo/exitCode gt 0"),
]


@pytest.mark.parametrize(("operation", "text"), ALLOWED)
def test_documented_filters_are_accepted(operation: str, text: str) -> None:
    _compile(operation, text)


def test_the_list_jobs_poll_of_an_account_view_matches_what_changed() -> None:
    since = "datetime'2026-12-02T07:00:00Z'"
    changed = _compile("Jobs_ListJobs", f"stateTransitionTime ge {since} or lastModified ge {since}")
    assert changed(JOB) is True
    assert (
        changed({**JOB, "stateTransitionTime": "2026-12-02T06:59:59Z", "lastModified": "2026-12-01T00:00:00Z"}) is False
    )
    ended = _compile("Jobs_ListJobs", f"state eq 'Completed' and executionInfo/endTime gt {since}")
    assert ended(JOB) is True
    assert _compile("Jobs_ListJobs", "creationTime ge DateTime'Wed, 02 Dec 2026 06:00:00 GMT'")(JOB) is True


def test_the_documented_task_name_last_modified_time_reads_the_tasks_last_modified() -> None:
    predicate = _compile("Tasks_ListTasks", "lastModifiedTime ge datetime'2026-12-02T07:00:00Z'")
    assert predicate({"id": "t", "lastModified": "2026-12-02T07:00:01Z"}) is True
    assert predicate({"id": "t", "lastModified": "2026-12-02T06:00:00Z"}) is False


# (operation, filter, reason): what each list refuses, and the Reason the error carries.
REFUSED = [
    (
        "Tasks_ListTasks",
        "nodeInfo/poolId eq 'p'",
        "List Tasks cannot filter on 'nodeInfo/poolId'; its filterable properties (names are case-sensitive) are: "
        "creationTime, executionInfo/endTime, executionInfo/exitCode, executionInfo/result, executionInfo/startTime, "
        "id, lastModified, lastModifiedTime, state, stateTransitionTime (at position 0)",
    ),
    (
        "Jobs_ListJobs",
        "State eq 'active'",
        "List Jobs cannot filter on 'State'; its filterable properties (names are case-sensitive) are: "
        "creationTime, executionInfo/endTime, executionInfo/poolId, executionInfo/startTime, id, lastModified, "
        "state, stateTransitionTime (at position 0)",
    ),
    (
        "Jobs_ListJobs",
        "state eq 'failed'",
        "'failed' is not a value of 'state': active, disabling, disabled, enabling, terminating, completed, deleting "
        "(at position 9)",
    ),
    ("Jobs_ListJobs", "state gt 'active'", "List Jobs allows only eq, ne on 'state', not 'gt' (at position 0)"),
    (
        "Jobs_ListJobs",
        "creationTime ge '2026-12-02T07:00:00Z'",
        "'creationTime' is a datetime and is compared with a datetime value such as "
        "datetime'2026-12-02T07:00:00Z' (at position 16)",
    ),
    (
        "Jobs_ListJobs",
        "startswith(state, 'act')",
        "List Jobs allows only eq, ne on 'state', not startswith (at position 0)",
    ),
    (
        "Jobs_ListJobs",
        "endswith(id, '-7')",
        "endswith() is not supported; the only function is startswith(<property>, '<prefix>') (at position 0)",
    ),
    (
        "Jobs_ListJobs",
        "not state eq 'active'",
        "'not' is not supported: use the opposite operator (ne for eq, lt for ge, ...) (at position 0)",
    ),
    (
        "Jobs_ListJobs",
        "executionInfo/endTime eq null",
        "'executionInfo/endTime' cannot be compared with null (at position 25)",
    ),
    (
        "Jobs_ListJobs",
        "'active' eq state",
        "the property must come first: write the condition as <property> eq 'active' (at position 0)",
    ),
    (
        "Jobs_ListJobs",
        "creationTime lt lastModified",
        "'creationTime lt' must be followed by a value, not 'lastModified' (at position 16)",
    ),
    (
        "Jobs_ListJobs",
        "startswith(id, 'x') eq true",
        "'startswith(id, 'x')' cannot be compared with 'eq': a condition is a property, an operator and a value, "
        "combined with 'and' and 'or' (at position 0)",
    ),
    (
        "Pools_ListPools",
        "enableAutoScale",
        "'enableAutoScale' is not a condition: write <property> <operator> <value>, e.g. state eq 'active' "
        "(at position 0)",
    ),
    (
        "Pools_ListPools",
        "enableAutoScale eq 'true'",
        "'enableAutoScale' is a boolean and is compared with a boolean value such as true or false (at position 19)",
    ),
    (
        "Pools_ListPools",
        "vmSize ge 'standard_d'",
        "List Pools allows only eq, ne on 'vmSize', not 'ge' (at position 0)",
    ),
    (
        "Nodes_ListNodes",
        "startTaskInfo/state ne 'running'",
        "List Nodes allows only eq on 'startTaskInfo/state', not 'ne' (at position 0)",
    ),
    (
        "Nodes_ListNodes",
        "startTaskInfo/exitCode eq '1'",
        "'startTaskInfo/exitCode' is an integer and is compared with an integer value such as 0 (at position 26)",
    ),
    (
        "Nodes_ListNodes",
        "id eq 'tvm-1'",
        "List Nodes cannot filter on 'id'; its filterable properties (names are case-sensitive) are: allocationTime, "
        "lastBootTime, startTaskInfo/endTime, startTaskInfo/exitCode, startTaskInfo/result, startTaskInfo/startTime, "
        "startTaskInfo/state, state, stateTransitionTime (at position 0)",
    ),
    (
        "Pools_ListPoolNodeCounts",
        "poolId ne 'shared'",
        "List Pool Node Counts allows only eq on 'poolId', not 'ne' (at position 0)",
    ),
    (
        "Tasks_ListTaskFiles",
        "name eq 'stdout.txt'",
        "List Task Files allows only startswith on 'name', not 'eq' (at position 0)",
    ),
    (
        "Nodes_ListNodeFiles",
        "isDirectory eq true",
        "List Node Files cannot filter on 'isDirectory'; its filterable properties (names are case-sensitive) are: "
        "name (at position 0)",
    ),
    (
        "Jobs_ListJobPreparationAndReleaseTaskStatus",
        "jobPreparationTaskExecutionInfo/retryCount gt 0",
        "List Job Preparation and Release Task Status cannot filter on 'jobPreparationTaskExecutionInfo/retryCount'; "
        "its filterable properties (names are case-sensitive) are: jobPreparationTaskExecutionInfo/endTime, "
        "jobPreparationTaskExecutionInfo/exitCode, jobPreparationTaskExecutionInfo/result, "
        "jobPreparationTaskExecutionInfo/startTime, jobPreparationTaskExecutionInfo/state, "
        "jobReleaseTaskExecutionInfo/endTime, jobReleaseTaskExecutionInfo/exitCode, "
        "jobReleaseTaskExecutionInfo/result, jobReleaseTaskExecutionInfo/startTime, "
        "jobReleaseTaskExecutionInfo/state, nodeId, poolId (at position 0)",
    ),
]


@pytest.mark.parametrize(("operation", "text", "reason"), REFUSED)
def test_what_the_docs_do_not_allow_is_refused_with_a_reason(operation: str, text: str, reason: str) -> None:
    with pytest.raises(ODataRuleError) as caught:
        _compile(operation, text)
    assert str(caught.value) == reason
    assert isinstance(caught.value, ODataFilterError)


def test_a_syntax_error_is_still_reported_as_one() -> None:
    with pytest.raises(ODataFilterError, match="Syntax error at position 8: expected a value after 'eq'"):
        _compile("Jobs_ListJobs", "state eq")


def test_every_served_list_has_rules_and_every_rule_a_known_kind_and_operators() -> None:
    for operation, options in OPTIONS.items():
        for name, rule in (options.filter or {}).items():
            assert rule.kind in ("string", "datetime", "int", "bool"), (operation, name)
            assert rule.operators <= {"eq", "ne", "ge", "gt", "le", "lt", "startswith"}, (operation, name)
