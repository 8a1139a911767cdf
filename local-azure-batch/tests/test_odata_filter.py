"""The OData $filter subset used by the local Batch service's list operations."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import pytest

from local_azure_batch.rest.odata_filter import (
    ODataFilterError,
    compile_filter,
    parse_iso_datetime,
)

TASKS: list[dict[str, Any]] = [
    {
        "id": "task-1",
        "state": "completed",
        "executionInfo": {"exitCode": 1, "result": "failure"},
        "creationTime": "2025-11-26T07:38:00.880834Z",
        "multiInstanceSettings": None,
        "constraints": {"maxTaskRetryCount": 3},
    },
    {
        "id": "task-2",
        "state": "completed",
        "executionInfo": {"exitCode": 0, "result": "success"},
        "creationTime": "2025-11-26T07:39:00.1234567Z",
        "constraints": {"maxTaskRetryCount": 0},
    },
    {"id": "Task-3", "state": "running", "executionInfo": {}, "creationTime": "2025-11-26T07:40:00Z"},
    {"id": "other's", "state": "active", "creationTime": "not a date", "allowTaskPreemption": True},
    {
        "id": "x-5",
        "state": "Active",
        "creationTime": "2025-11-26T08:40:00+01:00",
        "allowTaskPreemption": False,
    },
]


def matching(text: str, entities: list[dict[str, Any]] = TASKS) -> list[str]:
    predicate = compile_filter(text)
    return [entity["id"] for entity in entities if predicate(entity)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("state eq 'completed'", ["task-1", "task-2"]),
        # Enum values compare case-insensitively, like the service.
        ("state eq 'Active'", ["other's", "x-5"]),
        ("state ne 'completed'", ["Task-3", "other's", "x-5"]),
        # Keywords are case-insensitive; property names are not.
        ("state EQ 'COMPLETED' AND executionInfo/exitCode Ne 0", ["task-1"]),
        ("State eq 'completed'", []),
        ("executionInfo/result eq 'failure'", ["task-1"]),
        ("executionInfo/exitCode eq 0", ["task-2"]),
        ("executionInfo/exitCode gt 0", ["task-1"]),
        ("executionInfo/exitCode ge 0", ["task-1", "task-2"]),
        ("executionInfo/exitCode lt 1", ["task-2"]),
        ("executionInfo/exitCode le 1", ["task-1", "task-2"]),
        ("executionInfo/exitCode ge -1", ["task-1", "task-2"]),
        ("executionInfo/exitCode eq 1.0", ["task-1"]),
        ("executionInfo/exitCode lt 0.5", ["task-2"]),
        # A literal on the left mirrors the operator.
        ("0 lt executionInfo/exitCode", ["task-1"]),
        ("1 ge executionInfo/exitCode", ["task-1", "task-2"]),
        ("constraints/maxTaskRetryCount eq 3", ["task-1"]),
    ],
)
def test_comparisons(text: str, expected: list[str]) -> None:
    assert matching(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Absent at any step of the path, or explicitly null, is null.
        ("executionInfo/exitCode eq null", ["Task-3", "other's", "x-5"]),
        ("executionInfo/exitCode ne null", ["task-1", "task-2"]),
        ("executionInfo eq null", ["other's", "x-5"]),
        ("multiInstanceSettings eq null", ["task-1", "task-2", "Task-3", "other's", "x-5"]),
        ("noSuchProperty/deeper/still eq null", ["task-1", "task-2", "Task-3", "other's", "x-5"]),
        ("null eq executionInfo/exitCode", ["Task-3", "other's", "x-5"]),
        # Orderings against null are false on both sides.
        ("executionInfo/exitCode gt null", []),
        ("executionInfo/exitCode le null", []),
        ("executionInfo/exitCode lt 5", ["task-1", "task-2"]),
        # null ne 0 is true: a missing exit code is not zero.
        ("executionInfo/exitCode ne 0", ["task-1", "Task-3", "other's", "x-5"]),
    ],
)
def test_null_semantics(text: str, expected: list[str]) -> None:
    assert matching(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # x-5's 08:40+01:00 is 07:40Z.
        ("creationTime ge datetime'2025-11-26T07:39:00Z'", ["task-2", "Task-3", "x-5"]),
        # Fractions are cut to microseconds on both sides, so task-2 is equal here, not greater.
        ("creationTime gt datetime'2025-11-26T07:39:00.1234567Z'", ["Task-3", "x-5"]),
        ("creationTime ge datetime'2025-11-26T07:39:00.1234567Z'", ["task-2", "Task-3", "x-5"]),
        ("creationTime eq datetime'2025-11-26T07:40:00Z'", ["Task-3", "x-5"]),
        # The literal's offset is honoured; text without an offset is UTC.
        ("creationTime lt datetime'2025-11-26T08:39:00+01:00'", ["task-1"]),
        ("creationTime lt datetime'2025-11-26T07:39:00'", ["task-1"]),
        ("creationTime le DateTime'2025-11-26'", []),
        # "not a date" is never equal to a datetime, so ne is true for it.
        ("creationTime ne datetime'2025-11-26T07:40:00Z'", ["task-1", "task-2", "other's"]),
        ("datetime'2025-11-26T07:39:30Z' lt creationTime", ["Task-3", "x-5"]),
    ],
)
def test_datetime_literals(text: str, expected: list[str]) -> None:
    assert matching(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("startswith(id, 'task')", ["task-1", "task-2", "Task-3"]),
        ("startswith(id,'TASK-1')", ["task-1"]),
        ("endswith(id, '-2')", ["task-2"]),
        ("substringof('ASK', id)", ["task-1", "task-2", "Task-3"]),
        ("contains(id, 'er''s')", ["other's"]),
        ("startswith(id, 'task') eq false", ["other's", "x-5"]),
        ("startswith(id, 'task') eq true and state eq 'running'", ["Task-3"]),
        ("not startswith(id, 'task')", ["other's", "x-5"]),
        ("startswith(executionInfo/result, 'fail')", ["task-1"]),
        ("startswith(id, state)", []),
        ("contains(state, 'act')", ["other's", "x-5"]),
        ("startswith(nothing, 'x')", []),
    ],
)
def test_functions(text: str, expected: list[str]) -> None:
    assert matching(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("state eq 'completed' or state eq 'running' and id eq 'nope'", ["task-1", "task-2"]),
        ("(state eq 'completed' or state eq 'running') and id eq 'Task-3'", ["Task-3"]),
        ("not state eq 'completed'", ["Task-3", "other's", "x-5"]),
        ("not (state eq 'completed' or state eq 'active')", ["Task-3"]),
        ("not not state eq 'running'", ["Task-3"]),
        ("state eq 'active' and not (id eq 'x-5')", ["other's"]),
        ("id eq 'task-1' or id eq 'task-2' or id eq 'x-5'", ["task-1", "task-2", "x-5"]),
        ("id ne 'task-1' and id ne 'task-2' and id ne 'x-5'", ["Task-3", "other's"]),
        ("((state eq 'running'))", ["Task-3"]),
    ],
)
def test_boolean_logic_and_precedence(text: str, expected: list[str]) -> None:
    assert matching(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("allowTaskPreemption eq true", ["other's"]),
        ("allowTaskPreemption eq false", ["x-5"]),
        ("allowTaskPreemption", ["other's"]),
        ("not allowTaskPreemption", ["task-1", "task-2", "Task-3", "x-5"]),
        ("true", ["task-1", "task-2", "Task-3", "other's", "x-5"]),
        ("FALSE", []),
        # Kinds never mix: a boolean is not 1, a string is not a number.
        ("allowTaskPreemption eq 1", []),
        ("id eq 5", []),
        ("id ne 5", ["task-1", "task-2", "Task-3", "other's", "x-5"]),
        ("executionInfo/exitCode eq '1'", []),
        ("executionInfo gt 0", []),
        ("'a' eq 'A'", ["task-1", "task-2", "Task-3", "other's", "x-5"]),
        ("1 eq 2", []),
    ],
)
def test_booleans_and_kind_mismatches(text: str, expected: list[str]) -> None:
    assert matching(text) == expected


def test_string_ordering_is_case_insensitive() -> None:
    assert matching("id gt 'TASK-1' and id lt 'x'") == ["task-2", "Task-3"]


def test_quote_escape_in_string_literal() -> None:
    assert matching("id eq 'OTHER''S'") == ["other's"]
    assert matching("id eq ''''") == []
    assert compile_filter("id eq ''''")({"id": "'"}) is True


def test_compiled_filter_is_reusable_and_plain_bool() -> None:
    predicate = compile_filter("state eq 'completed' and executionInfo/exitCode ne 0")
    results = [predicate(entity) for entity in TASKS]
    assert results == [True, False, False, False, False]
    assert all(type(result) is bool for result in results)
    assert [predicate(entity) for entity in TASKS] == results


def test_entity_datetime_values_are_compared_as_datetimes() -> None:
    predicate = compile_filter("when gt datetime'2025-01-01T00:00:00Z'")
    assert predicate({"when": datetime(2025, 6, 1, tzinfo=timezone.utc)}) is True
    assert predicate({"when": datetime(2024, 6, 1)}) is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-11-26T07:38:00.880834Z", datetime(2025, 11, 26, 7, 38, 0, 880834, tzinfo=timezone.utc)),
        ("2025-11-26T07:38:00.8808349Z", datetime(2025, 11, 26, 7, 38, 0, 880834, tzinfo=timezone.utc)),
        ("2025-11-26t07:38z", datetime(2025, 11, 26, 7, 38, tzinfo=timezone.utc)),
        ("2025-11-26", datetime(2025, 11, 26, tzinfo=timezone.utc)),
        ("2025-11-26T08:38:00+01:00", datetime(2025, 11, 26, 7, 38, tzinfo=timezone.utc)),
        ("2025-11-26T08:38:00+0100", datetime(2025, 11, 26, 7, 38, tzinfo=timezone.utc)),
        ("2025-02-30T00:00:00Z", None),
        ("yesterday", None),
    ],
)
def test_parse_iso_datetime(text: str, expected: datetime | None) -> None:
    assert parse_iso_datetime(text) == expected


@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ("", 0, "Syntax error at position 0: the filter is empty"),
        ("   ", 3, "Syntax error at position 3: the filter is empty"),
        ("state eq", 8, "Syntax error at position 8: expected a value after 'eq'"),
        ("executionInfo/exitCode EQ ", 26, "Syntax error at position 26: expected a value after 'EQ'"),
        ("state eq and id eq 'x'", 9, "Syntax error at position 9: expected a value after 'eq'"),
        ("state eq 'a' and", 16, "Syntax error at position 16: expected a condition after 'and'"),
        ("state eq 'a' or or", 16, "Syntax error at position 16: expected a condition after 'or'"),
        ("not", 3, "Syntax error at position 3: expected a condition after 'not'"),
        ("and state eq 'a'", 0, "Syntax error at position 0: expected a condition but found 'and'"),
        ("()", 1, "Syntax error at position 1: expected a condition after '('"),
        (
            "state eq 'active",
            9,
            "Syntax error at position 9: unterminated string literal "
            "(strings are quoted with ' and '' escapes a quote)",
        ),
        (
            "(state eq 'a'",
            13,
            "Syntax error at position 13: expected ')' to close the '(' at position 0",
        ),
        ("state eq 'a')", 12, "Syntax error at position 12: unmatched ')'"),
        (
            "state eq 'a' state eq 'b'",
            13,
            "Syntax error at position 13: expected 'and', 'or' or the end of the filter but found 'state'",
        ),
        (
            "state eq 'a' eq 'b'",
            13,
            "Syntax error at position 13: expected 'and', 'or' or the end of the filter but found 'eq'",
        ),
        (
            "state 'completed'",
            6,
            "Syntax error at position 6: expected a comparison operator (eq, ne, gt, ge, lt, le) "
            "after 'state' but found 'completed'",
        ),
        (
            "state equals 'completed'",
            6,
            "Syntax error at position 6: expected a comparison operator (eq, ne, gt, ge, lt, le) "
            "after 'state' but found 'equals'",
        ),
        (
            "'completed'",
            11,
            "Syntax error at position 11: expected a comparison operator (eq, ne, gt, ge, lt, le) after 'completed'",
        ),
        (
            "42",
            2,
            "Syntax error at position 2: expected a comparison operator (eq, ne, gt, ge, lt, le) after 42",
        ),
        (
            "state == 'completed'",
            6,
            "Syntax error at position 6: unexpected character '='",
        ),
        ('state eq "completed"', 9, "Syntax error at position 9: unexpected character '\"'"),
        ("exitCode eq 5L", 12, "Syntax error at position 12: malformed number '5L'"),
        ("exitCode eq -", 12, "Syntax error at position 12: unexpected character '-'"),
        (
            "executionInfo/ eq 1",
            15,
            "Syntax error at position 15: expected a property name after the '/' at position 13",
        ),
        (
            "executionInfo/'x' eq 1",
            14,
            "Syntax error at position 14: expected a property name after the '/' at position 13",
        ),
        (
            "creationTime gt datetime'26/11/2025'",
            16,
            "Syntax error at position 16: invalid datetime literal '26/11/2025' "
            "(expected e.g. datetime'2025-01-01T00:00:00Z')",
        ),
        (
            "length(id) eq 3",
            0,
            "Syntax error at position 0: unknown function 'length' "
            "(supported: contains, endswith, startswith, substringof)",
        ),
        ("startswith(id)", 0, "Syntax error at position 0: startswith() takes 2 arguments, got 1"),
        ("contains(id, 'a', 'b')", 0, "Syntax error at position 0: contains() takes 2 arguments, got 3"),
        (
            "startswith(id 'a')",
            14,
            "Syntax error at position 14: expected ',' or ')' in the call to startswith() "
            "opened at position 10 but found 'a'",
        ),
        (
            "startswith(, 'a')",
            11,
            "Syntax error at position 11: expected an argument for startswith() but found ','",
        ),
        (
            "startswith((id), 'a')",
            11,
            "Syntax error at position 11: arguments of startswith() must be a property or a literal",
        ),
        ("state eq 'a' # comment", 13, "Syntax error at position 13: unexpected character '#'"),
    ],
)
def test_syntax_errors(text: str, position: int, message: str) -> None:
    with pytest.raises(ODataFilterError) as caught:
        compile_filter(text)
    assert str(caught.value) == message
    assert caught.value.position == position
    assert isinstance(caught.value, ValueError)


def test_non_string_filter_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="filter must be a string, not int"):
        compile_filter(5)  # type: ignore[arg-type]


@pytest.mark.serial
def test_ten_thousand_entities_well_under_a_second() -> None:
    states = ["active", "running", "completed", "preparing"]
    entities = [
        {
            "id": f"task-{i}",
            "state": states[i % 4],
            "executionInfo": {"exitCode": i % 3, "result": "failure" if i % 3 else "success"} if i % 4 == 2 else {},
            "creationTime": f"2025-11-26T07:{i % 60:02d}:{i % 59:02d}.{i:07d}Z",
        }
        for i in range(10_000)
    ]
    predicate = compile_filter(
        "(state eq 'completed' and executionInfo/exitCode ne 0 "
        "and creationTime ge datetime'2025-11-26T07:30:00Z') "
        "or (startswith(id, 'task-99') and not (state eq 'active'))"
    )
    started = time.perf_counter()
    matched = sum(1 for entity in entities if predicate(entity))
    elapsed = time.perf_counter() - started
    expected = sum(
        1
        for i in range(10_000)
        if (i % 4 == 2 and i % 3 != 0 and i % 60 >= 30) or (str(i).startswith("99") and i % 4 != 0)
    )
    assert matched == expected
    assert elapsed < 0.5, f"filtering 10,000 entities took {elapsed:.3f}s"
