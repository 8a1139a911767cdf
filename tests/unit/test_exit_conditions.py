"""Exit conditions, fail-fast and skip codes: the provider's shape, checked and mapped to what Batch is sent."""

from __future__ import annotations

import pytest

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.model.exit_options import applied_exit_options
from airflow_provider_azbatch.specs.exit_conditions import ExitConditions, skip_codes, to_rest


def test_no_conditions_and_no_job_actions_send_nothing():
    assert to_rest(None, fail_fast=False, acts_on_job=False) is None


def test_without_job_actions_only_dependency_actions_are_sent():
    conditions = ExitConditions.parse(
        {"exit_codes": {3: {"dependency_action": "satisfy"}}, "default": {"dependency_action": "block"}}, "x"
    )
    assert to_rest(conditions, fail_fast=False, acts_on_job=False) == {
        "exitCodes": [{"code": 3, "exitOptions": {"dependencyAction": "satisfy"}}],
        "default": {"dependencyAction": "block"},
    }


def test_fail_fast_terminates_at_failures_but_not_at_accepted_or_skip_codes():
    conditions = ExitConditions.parse(
        {
            "exit_codes": {3: {"dependency_action": "satisfy"}, 0: {}},
            "exit_code_ranges": [{"start": 10, "end": 19, "dependency_action": "block"}],
            "pre_processing_error": {},
        },
        "x",
    )
    assert to_rest(conditions, fail_fast=True, acts_on_job=True, skip=frozenset({42})) == {
        "exitCodes": [
            {"code": 0, "exitOptions": {"jobAction": "none"}},
            {"code": 3, "exitOptions": {"jobAction": "none", "dependencyAction": "satisfy"}},
            {"code": 42, "exitOptions": {"jobAction": "none"}},
        ],
        "exitCodeRanges": [
            {"start": 10, "end": 19, "exitOptions": {"jobAction": "terminate", "dependencyAction": "block"}}
        ],
        "preProcessingError": {"jobAction": "terminate"},
        "default": {"jobAction": "terminate"},
    }


def test_a_job_action_elsewhere_spells_out_none_for_every_other_task():
    # onTaskFailure=performexitoptionsjobaction would terminate the job at any failure that says nothing.
    assert to_rest(None, fail_fast=False, acts_on_job=True) == {"default": {"jobAction": "none"}}
    conditions = ExitConditions.parse({"exit_codes": {4: {"job_action": "disable"}}}, "x")
    assert conditions.acts_on_job
    assert to_rest(conditions, fail_fast=False, acts_on_job=True) == {
        "exitCodes": [{"code": 4, "exitOptions": {"jobAction": "disable"}}],
        "default": {"jobAction": "none"},
    }


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        (
            {"exit_codez": {}},
            "x",
            "has unknown field(s) exit_codez (did you mean 'exit_codes'?); known: exit_codes, exit_code_ranges",
        ),
        ({"exit_codes": {3: {"job_action": "stop"}}}, "x.exit_codes[3].job_action", "must be one of none, disable"),
        ({"default": {"dependency_action": "skip"}}, "x.default.dependency_action", "must be one of satisfy, block"),
        ({"default": {"on": "x"}}, "x.default", "has unknown field(s) on"),
        ({"exit_codes": {"3": {}}}, "x.exit_codes['3']", "must be a whole number (an exit code), got str '3'"),
        ({"exit_codes": {True: {}}}, "x.exit_codes[True]", "must be a whole number (an exit code), got bool"),
        ({"exit_codes": {2**31: {}}}, "x.exit_codes[2147483648]", "must be between -2147483648 and 2147483647"),
        ({"exit_codes": [3]}, "x.exit_codes", "must map exit codes to options"),
        ({"exit_codes": {3: "satisfy"}}, "x.exit_codes[3]", "must be a mapping with job_action"),
        ({"exit_code_ranges": [{"start": 9, "end": 1}]}, "x.exit_code_ranges[0]", "starts after it ends (9 > 1)"),
        ({"exit_code_ranges": [{"start": 1}]}, "x.exit_code_ranges[0]", "must be a mapping with start and end"),
        (
            {"exit_code_ranges": [{"start": 1, "end": 5}, {"start": 5, "end": 9}]},
            "x.exit_code_ranges[1]",
            "(5..9) overlaps x.exit_code_ranges[0] (1..5)",
        ),
        ({"exit_code_ranges": [{"start": 1, "end": 2.5}]}, "x.exit_code_ranges[0].end", "must be a whole number"),
        ("terminate", "x", "must be a mapping (exit_codes, exit_code_ranges"),
    ],
)
def test_bad_conditions_name_the_field(value, field, words):
    with pytest.raises(AzureBatchValidationError) as info:
        ExitConditions.parse(value, "x")
    assert info.value.field == field
    assert words in str(info.value)


def test_skip_codes():
    assert skip_codes(None, "s") is None
    assert skip_codes(42, "s") == frozenset({42})
    assert skip_codes([42, 43], "s") == frozenset({42, 43})
    with pytest.raises(AzureBatchValidationError, match="cannot hold 0"):
        skip_codes([0], "s")
    with pytest.raises(AzureBatchValidationError, match=r"s\[1\] must be a whole number"):
        skip_codes([1, "2"], "s")


@pytest.mark.parametrize(
    ("exit_code", "failure", "expected"),
    [
        (3, "FailureExitCode", ("none", "satisfy", True)),  # an exitCodes entry
        (15, "FailureExitCode", ("terminate", "satisfy", True)),  # a range (no jobAction: the failure default)
        (7, "FailureExitCode", ("terminate", "block", False)),  # default
        (None, "ResourceContainerAccessDenied", ("none", "block", False)),  # could not start: preProcessingError
        (3, "FileUploadMiscError", ("none", "satisfy", True)),  # the exit code's entry wins over an upload error
        (0, "FileUploadMiscError", ("none", "satisfy", False)),  # fileUploadError
        (None, "TaskEnded", ("terminate", "block", False)),  # ended by a terminate request: default
    ],
)
def test_which_exit_options_the_service_applies(exit_code, failure, expected):
    conditions = {
        "exitCodes": [{"code": 3, "exitOptions": {"jobAction": "none", "dependencyAction": "satisfy"}}],
        "exitCodeRanges": [{"start": 10, "end": 19, "exitOptions": {"dependencyAction": "satisfy"}}],
        "preProcessingError": {"jobAction": "none"},
        "fileUploadError": {"jobAction": "none", "dependencyAction": "satisfy"},
        "default": {"jobAction": "terminate"},
    }
    applied = applied_exit_options(
        conditions, failed=True, exit_code=exit_code, failure_code=failure, acts_on_failure=True
    )
    assert (applied.job_action, applied.dependency_action, applied.by_exit_code) == expected


def test_the_documented_defaults():
    success = applied_exit_options(None, failed=False, exit_code=0, failure_code=None, acts_on_failure=True)
    assert (success.job_action, success.dependency_action) == ("none", "satisfy")
    failure = applied_exit_options(None, failed=True, exit_code=1, failure_code="FailureExitCode")
    assert (failure.job_action, failure.dependency_action) == ("none", "block")
