from datetime import timedelta

import pytest

from local_azure_batch.faults import FaultInjector, FaultSpecError
from local_azure_batch.lang.times import (
    UNLIMITED_TEXT,
    DurationError,
    format_duration,
    parse_duration,
)
from local_azure_batch.rest.urls import OPERATIONS


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("PT06M00S", "PT6M"),
        ("PT15M", "PT15M"),
        ("P7D", "P7D"),
        ("PT02H00M00S", "PT2H"),
        ("P1DT2H3M4.5S", "P1DT2H3M4.5S"),
        ("PT0S", "PT0S"),
        (UNLIMITED_TEXT, UNLIMITED_TEXT),
    ],
)
def test_durations_normalize_like_the_service(text, normalized):
    assert format_duration(parse_duration(text)) == normalized


def test_duration_values():
    assert parse_duration("PT1H30M") == timedelta(hours=1, minutes=30)
    with pytest.raises(DurationError, match="'1 hour' is not an ISO-8601 duration"):
        parse_duration("1 hour")
    with pytest.raises(DurationError):
        parse_duration("PT")


def test_fault_schedule_and_actions():
    injector = FaultInjector.parse(
        "Jobs_GetJobTaskCounts:503/retry-after=2#1-2;Tasks_GetTaskFile:latency=0.25;*:drop#5", OPERATIONS
    )
    first = injector.decide("Jobs_GetJobTaskCounts")
    assert (first.status, first.retry_after) == (503, 2.0)
    assert injector.decide("Jobs_GetJobTaskCounts").status == 503
    assert injector.decide("Jobs_GetJobTaskCounts").status is None
    file_read = injector.decide("Tasks_GetTaskFile")
    assert (file_read.latency, file_read.status) == (0.25, None)
    # the wildcard rule counts every request: this is its 5th match
    assert injector.decide("Jobs_GetJob").drop is True


def test_drop_after_is_its_own_action():
    injector = FaultInjector.parse("Jobs_CreateJob:drop-after#1", OPERATIONS)
    first = injector.decide("Jobs_CreateJob")
    assert (first.drop_after, first.drop, first.status) == (True, False, None)
    assert injector.decide("Jobs_CreateJob").drop_after is False


def test_fault_rates_are_reproducible_with_a_seed():
    picks = []
    for _ in range(2):
        injector = FaultInjector.parse("*:429@0.5", OPERATIONS, seed=7)
        picks.append([injector.decide("Jobs_GetJob").status for _ in range(20)])
    assert picks[0] == picks[1]
    assert set(picks[0]) == {429, None}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("Jobs_Nope:503", "unknown operation(s) Jobs_Nope"),
        ("*:418", "action must be 429, 503, 500, 403, drop, drop-after or latency=SECONDS"),
        ("*:503@2", "rate must be from 0 to 1"),
        ("*:503#x", "schedule part 'x' is not N, N-M or N-"),
        ("Jobs_GetJob", "expected OPERATIONS:ACTION"),
        ("*:503/wait=1", "unknown option 'wait=1'"),
    ],
)
def test_fault_spec_errors_say_what_to_fix(spec, message):
    with pytest.raises(FaultSpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        FaultInjector.parse(spec, OPERATIONS)
