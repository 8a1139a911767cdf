"""Autoscale formula evaluation: the documented examples, every operator and every error path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone

import pytest

from local_azure_batch.formula import (
    EVALUATION_ERROR,
    FORMULA_TOO_LONG,
    INSUFFICIENT_SAMPLE_DATA,
    NOT_SUPPORTED,
    SUPPORTED_SUMMARY,
    SYNTAX_ERROR,
    AutoScaleFormulaError,
    AutoScaleOutcome,
    Sample,
    evaluate_formula,
    functions,
    validate_formula,
    vocabulary,
)

# A Wednesday.
NOW = datetime(2025, 11, 26, 8, 0, 0, tzinfo=timezone.utc)


class History:
    def __init__(self, series: Mapping[str, Sequence[Sample]] | None = None) -> None:
        self.series = dict(series or {})
        self.asked: list[str] = []

    def samples(self, variable: str) -> Sequence[Sample]:
        self.asked.append(variable)
        return self.series.get(variable, ())


def every(values: Sequence[float], seconds: float = 30, end: datetime = NOW) -> list[Sample]:
    """Samples ``seconds`` apart, the last one at ``end``, oldest first."""
    count = len(values)
    return [
        Sample(end - timedelta(seconds=seconds * (count - 1 - index)), float(value))
        for index, value in enumerate(values)
    ]


def pending(*values: float, seconds: float = 30) -> History:
    return History({"$PendingTasks": every(values, seconds)})


def run(
    formula: str,
    history: History | None = None,
    current: Mapping[str, float] | None = None,
    **kwargs: object,
) -> AutoScaleOutcome:
    return evaluate_formula(formula, history or History(), now=NOW, current=current or {}, **kwargs)  # type: ignore[arg-type]


def value_of(expression: str, history: History | None = None) -> str:
    """How the results string renders ``x = expression``."""
    results = run(f"x = {expression}", history).results
    prefix = "$TargetDedicatedNodes=0;$TargetLowPriorityNodes=0;$NodeDeallocationOption=requeue;x="
    assert results.startswith(prefix), results
    return results[len(prefix) :]


def error_of(formula: str, history: History | None = None, **kwargs: object) -> tuple[str, str, str]:
    with pytest.raises(AutoScaleFormulaError) as caught:
        run(formula, history, **kwargs)  # type: ignore[arg-type]
    error = caught.value
    assert len(error.values) == 1
    name, detail = error.values[0]
    assert name == "Message"
    return error.code, error.message, detail


# --- The documented example formulas ---------------------------------------------------------------

CANONICAL = """startingNumberOfVMs = 1; maxNumberofVMs = 25;
pendingTaskSamplePercent = $PendingTasks.GetSamplePercent(180 * TimeInterval_Second);
pendingTaskSamples = pendingTaskSamplePercent < 70 ? startingNumberOfVMs :
    avg($PendingTasks.GetSample(180 * TimeInterval_Second));
$TargetDedicatedNodes = min(maxNumberofVMs, pendingTaskSamples);
$NodeDeallocationOption = taskcompletion;
"""


def test_canonical_formula_with_enough_samples_averages_the_last_three_minutes() -> None:
    # Seven samples; the window (07:57:00, 08:00:00] holds the last six: 2..12, average 7.
    outcome = run(CANONICAL, pending(100, 2, 4, 6, 8, 10, 12))
    assert outcome == AutoScaleOutcome(
        target_dedicated_nodes=7,
        target_low_priority_nodes=0,
        node_deallocation_option="taskcompletion",
        results="$TargetDedicatedNodes=7;$TargetLowPriorityNodes=0;$NodeDeallocationOption=taskcompletion;"
        "maxNumberofVMs=25;pendingTaskSamplePercent=100;pendingTaskSamples=7;startingNumberOfVMs=1",
    )


def test_canonical_formula_caps_at_max_vms() -> None:
    outcome = run(CANONICAL, pending(40, 50, 60, 70, 80, 90))
    assert outcome.target_dedicated_nodes == 25
    assert "pendingTaskSamples=65;" in outcome.results


def test_canonical_formula_with_too_few_samples_starts_one_vm() -> None:
    # Three of the six expected samples: 50% < 70%, so avg(GetSample(...)) is never evaluated.
    outcome = run(CANONICAL, pending(30, 40, 50))
    assert outcome.target_dedicated_nodes == 1
    assert outcome.results == (
        "$TargetDedicatedNodes=1;$TargetLowPriorityNodes=0;$NodeDeallocationOption=taskcompletion;"
        "maxNumberofVMs=25;pendingTaskSamplePercent=50;pendingTaskSamples=1;startingNumberOfVMs=1"
    )


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        ((), 1),  # no history at all: 0%
        ((9, 9, 9, 9), 1),  # 4 of 6 = 66.7%
        ((9, 9, 9, 9, 9), 9),  # 5 of 6 = 83.3%
    ],
)
def test_canonical_formula_threshold(samples: tuple[float, ...], expected: int) -> None:
    assert run(CANONICAL, pending(*samples)).target_dedicated_nodes == expected


def test_canonical_formula_with_a_gap_in_the_history() -> None:
    series = every([5, 6, 7, 8, 9, 10])
    del series[2:4]  # two samples lost: 4 of 6 = 66.7%
    outcome = run(CANONICAL, History({"$PendingTasks": series}))
    assert outcome.target_dedicated_nodes == 1
    assert "pendingTaskSamplePercent=66.66666666666667;" in outcome.results


def test_canonical_formula_percentages_follow_the_local_sample_period() -> None:
    # The local service samples every 5 s: 180 s should hold 36 samples, not 6.
    samples = [3.0] * 36
    assert run(CANONICAL, pending(*samples, seconds=5), sample_period=timedelta(seconds=5)).results == (
        "$TargetDedicatedNodes=3;$TargetLowPriorityNodes=0;$NodeDeallocationOption=taskcompletion;"
        "maxNumberofVMs=25;pendingTaskSamplePercent=100;pendingTaskSamples=3;startingNumberOfVMs=1"
    )
    # Six samples 30 s apart are only 1/6 of what a 5 s sampler should have produced.
    outcome = run(CANONICAL, pending(3, 3, 3, 3, 3, 3), sample_period=timedelta(seconds=5))
    assert outcome.target_dedicated_nodes == 1
    assert "pendingTaskSamplePercent=16.666666666666668;" in outcome.results


SCALE_FROM_ZERO = (
    "maxNodes = 4; pending = $PendingTasks.GetSample(1); "
    "$TargetDedicatedNodes = max(0, min(maxNodes, pending)); $NodeDeallocationOption = taskcompletion;"
)


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        ((0, 0, 3), 3),
        ((5, 0), 0),  # only the newest sample counts
        ((9,), 4),
        ((0,), 0),
    ],
)
def test_scale_from_zero_reads_the_newest_sample_as_a_vector(samples: tuple[float, ...], expected: int) -> None:
    outcome = run(SCALE_FROM_ZERO, pending(*samples), current={"$TargetDedicatedNodes": 2})
    # GetSample(1) is a doubleVec of one value; min/max take it as part of their doubleVecList.
    assert outcome.results == (
        f"$TargetDedicatedNodes={expected};$TargetLowPriorityNodes=0;$NodeDeallocationOption=taskcompletion;"
        f"maxNodes=4;pending=[{samples[-1]:g}]"
    )


def test_scale_from_zero_without_any_sample_fails_instead_of_scaling() -> None:
    code, message, detail = error_of(SCALE_FROM_ZERO, History())
    assert code == INSUFFICIENT_SAMPLE_DATA == "InsufficientSampleData"
    assert message == "Autoscale evaluation failed due to insufficient sample data"
    assert detail == "Line 1, Col 25: Insufficient data from data set: $PendingTasks wanted 1 sample, received 0"


def test_single_assignment_matches_the_recorded_service_results() -> None:
    assert run("$TargetDedicatedNodes=3").results == (
        "$TargetDedicatedNodes=3;$TargetLowPriorityNodes=0;$NodeDeallocationOption=requeue"
    )


TIME_BASED = """$curTime = time();
$workHours = $curTime.hour >= 8 && $curTime.hour < 18;
$isWeekday = $curTime.weekday >= 1 && $curTime.weekday <= 5;
$isWorkingWeekdayHour = $workHours && $isWeekday;
$TargetDedicatedNodes = $isWorkingWeekdayHour ? 20:10;"""


def test_documented_time_based_formula_and_its_sorted_results() -> None:
    # The docs show exactly these results (user variables sorted by name) for this moment.
    documented = datetime(2016, 10, 13, 19, 18, 47, 805000, tzinfo=timezone.utc)
    outcome = evaluate_formula(TIME_BASED, History(), now=documented, current={})
    assert outcome.results == (
        "$TargetDedicatedNodes=10;$TargetLowPriorityNodes=0;$NodeDeallocationOption=requeue;"
        "$curTime=2016-10-13T19:18:47.805Z;$isWeekday=1;$isWorkingWeekdayHour=0;$workHours=0"
    )
    assert run(TIME_BASED).target_dedicated_nodes == 20  # Wednesday 08:00


TASK_BASED = """// Get pending tasks for the past 15 minutes.
$samples = $PendingTasks.GetSamplePercent(TimeInterval_Minute * 15);
// If we have fewer than 70 percent data points, we use the last sample point,
// otherwise we use the maximum of last sample point and the history average.
$tasks = $samples < 70 ? max(0,$PendingTasks.GetSample(1)) :
    max( $PendingTasks.GetSample(1), avg($PendingTasks.GetSample(TimeInterval_Minute * 15)));
// If number of pending tasks is not 0, set targetVM to pending tasks, otherwise
// half of current dedicated.
$targetVMs = $tasks > 0? $tasks:max(0, $TargetDedicatedNodes/2);
// The pool size is capped at 20, if target VM value is more than that, set it
// to 20. This value should be adjusted according to your use case.
$TargetDedicatedNodes = max(0, min($targetVMs, 20));
// Set node deallocation mode - let running tasks finish before removing a node
$NodeDeallocationOption = taskcompletion;
"""


def test_documented_task_based_formula() -> None:
    busy = run(TASK_BASED, pending(*([6] * 29), 12))
    assert busy.results == (
        "$TargetDedicatedNodes=12;$TargetLowPriorityNodes=0;$NodeDeallocationOption=taskcompletion;"
        "$samples=100;$targetVMs=12;$tasks=12"
    )
    idle = run(TASK_BASED, pending(*([0] * 30)), current={"$TargetDedicatedNodes": 8})
    assert idle.results == (
        "$TargetDedicatedNodes=4;$TargetLowPriorityNodes=0;$NodeDeallocationOption=taskcompletion;"
        "$samples=100;$targetVMs=4;$tasks=0"
    )


# --- Operators and types -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", "7"),
        ("(1 + 2) * 3", "9"),
        ("7 / 2", "3.5"),
        ("2 - 3 - 4", "-5"),
        ("12 / 3 / 2", "2"),
        ("-2 - -3", "1"),
        ("- (2 + 3)", "-5"),
        ("1.5e3", "1500"),
        (".5 + 1", "1.5"),
        ("0.1 + 0.2", "0.30000000000000004"),
        ("1e20", "1E+20"),
        ("2.5e-7", "2.5E-07"),
        ("123456789012345", "123456789012345"),
        ("1 / 0", "Infinity"),
        ("-1 / 0", "-Infinity"),
        ("0 / 0", "NaN"),
        ("!0", "1"),
        ("!5", "0"),
        ("!!5", "1"),
        ("1 < 2", "1"),
        ("2 <= 1", "0"),
        ("2 >= 2", "1"),
        ("3 > 4", "0"),
        ("1 == 1", "1"),
        ("1 != 1", "0"),
        ("1 + 1 == 2", "1"),
        ("1 < 2 == 1", "1"),
        ("0 / 0 == 0 / 0", "0"),
        ("1 && 0", "0"),
        ("2 && 3", "1"),
        ("0 || 2", "1"),
        ("0 || 0", "0"),
        ("1 || 0 && 0", "1"),
        ("1 ? 10 : 20", "10"),
        ("0 ? 10 : 1 ? 30 : 40", "30"),
        ("0 ? 1 : 2 + 3", "5"),
        ('"abc" < "abd"', "1"),
        ('"a" == "a"', "1"),
        ('"B" < "a"', "1"),
        ('"say \\"hi\\""', 'say "hi"'),
        ('"x" != "y" ? "yes" : "no"', "yes"),
    ],
)
def test_double_and_string_operators(expression: str, expected: str) -> None:
    assert value_of(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("$PendingTasks.GetSample(3) * 2", "[2,4,6]"),
        ("$PendingTasks.GetSample(3) / 2", "[0.5,1,1.5]"),
        ("10 - $PendingTasks.GetSample(3)", "[9,8,7]"),
        ("$PendingTasks.GetSample(3) + $PendingTasks.GetSample(3)", "[2,4,6]"),
        ("$PendingTasks.GetSample(3) * $PendingTasks.GetSample(3)", "[1,4,9]"),
        ("-$PendingTasks.GetSample(2)", "[-2,-3]"),
        ("$PendingTasks.GetSample(10)", "[1,2,3]"),  # fewer samples than asked for
        ("$PendingTasks.GetSample(2.9)", "[2,3]"),
    ],
)
def test_vector_operators(expression: str, expected: str) -> None:
    assert value_of(expression, pending(1, 2, 3)) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("180 * TimeInterval_Second", "00:03:00"),
        ("TimeInterval_Minute * 1.5", "00:01:30"),
        ("TimeInterval_Day + TimeInterval_Hour", "1.01:00:00"),
        ("TimeInterval_Hour - TimeInterval_Day", "-23:00:00"),
        ("-TimeInterval_Second", "-00:00:01"),
        ("TimeInterval_Millisecond", "00:00:00.0010000"),
        ("TimeInterval_100ns", "00:00:00.0000001"),
        ("TimeInterval_Microsecond * 3", "00:00:00.0000030"),
        ("TimeInterval_Week / 7", "1.00:00:00"),
        ("TimeInterval_Year", "365.00:00:00"),
        ("TimeInterval_Zero", "00:00:00"),
        ("TimeInterval_Minute > 59 * TimeInterval_Second", "1"),
        ("TimeInterval_Minute == 60 * TimeInterval_Second", "1"),
    ],
)
def test_time_intervals(expression: str, expected: str) -> None:
    assert value_of(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("time()", "2025-11-26T08:00:00.000Z"),
        ('time("")', "2025-11-26T08:00:00.000Z"),
        ("time() + TimeInterval_Hour", "2025-11-26T09:00:00.000Z"),
        ("TimeInterval_Hour + time()", "2025-11-26T09:00:00.000Z"),
        ("time() - TimeInterval_Day", "2025-11-25T08:00:00.000Z"),
        ('time() - time("2025-11-26T07:00:00Z")', "01:00:00"),
        ('time("Wed, 26 Nov 2025 07:38:00 GMT")', "2025-11-26T07:38:00.000Z"),
        ('time("2025-11-26T09:38:00.25+01:00")', "2025-11-26T08:38:00.250Z"),
        ('time("2025-11-26")', "2025-11-26T00:00:00.000Z"),
        ("time().year", "2025"),
        ("time().month", "11"),
        ("time().day", "26"),
        ("time().hour", "8"),
        ("time().minute", "0"),
        ('time("2025-11-26T08:09:10Z").second', "10"),
        ("time().weekday", "3"),
        ('time("2025-11-30T12:00:00Z").weekday', "0"),  # Sunday
        ('time("2025-11-29").weekday', "6"),
        ("(time() + TimeInterval_Day).day", "27"),
        ('time() > time("2025-01-01T00:00:00Z")', "1"),
        ('time("2025-11-26T08:00:00Z") == time()', "1"),
    ],
)
def test_timestamps(expression: str, expected: str) -> None:
    assert value_of(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("avg(1, 2, 3, 4)", "2.5"),
        ("avg($PendingTasks.GetSample(3), 7)", "3.25"),
        ("sum($PendingTasks.GetSample(3), 4)", "10"),
        ("len($PendingTasks.GetSample(3), 4, 5)", "5"),
        ("max(0, $PendingTasks.GetSample(3))", "3"),
        ("min(5, $PendingTasks.GetSample(3))", "1"),
        ("norm(3, 4)", "5"),
        ("range($PendingTasks.GetSample(3), 10)", "9"),
        ("std(2, 4, 4, 4, 5, 5, 7, 9)", "2.138089935299395"),
        ("std(5)", "0"),
        ("percentile($PendingTasks.GetSample(3), 50)", "2"),
        ("percentile($PendingTasks.GetSample(3), 0)", "1"),
        ("percentile($PendingTasks.GetSample(3), 100)", "3"),
        ("percentile(7, 90)", "7"),
        ("val($PendingTasks.GetSample(3), 0)", "1"),
        ("val($PendingTasks.GetSample(3), 2.7)", "3"),
        ("lg(8)", "3"),
        ("ln(1)", "0"),
        ("log(1000)", "3"),
        ("log($PendingTasks.GetSample(1))", "[0.47712125471966244]"),
        ("lg(1, 2, 4)", "[0,1,2]"),
        ("lg(0)", "-Infinity"),
        ("ln(-1)", "NaN"),
        ("ceil(1.2)", "2"),
        ("floor(-1.5)", "-2"),
        ("round(2.5)", "2"),  # banker's rounding, like .NET
        ("round(3.5)", "4"),
        ("round(-2.5)", "-2"),
        ("ceil($PendingTasks.GetSample(3) / 2)", "[1,1,2]"),
        ("floor(1.5, 2.5)", "[1,2]"),
        ("ceil(1 / 0)", "Infinity"),
    ],
)
def test_functions(expression: str, expected: str) -> None:
    assert value_of(expression, pending(1, 2, 3)) == expected


def test_rand(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(functions.random, "random", lambda: 0.25)
    assert value_of("rand() * 4") == "1"


# --- Sample access ------------------------------------------------------------------------------

# 21 samples, one every 30 s from 07:50:00 (value 0) to 08:00:00 (value 20).
TEN_MINUTES = list(range(21))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("$PendingTasks.GetSample(TimeInterval_Minute * 2)", "[17,18,19,20]"),
        ("$PendingTasks.GetSample(TimeInterval_Minute, TimeInterval_Minute * 2)", "[17,18]"),
        ("$PendingTasks.GetSample(TimeInterval_Minute * 2, TimeInterval_Minute)", "[17,18]"),
        (
            "$PendingTasks.GetSample(1 * TimeInterval_Minute, 6 * TimeInterval_Minute)",
            "[9,10,11,12,13,14,15,16,17,18]",
        ),
        ("$PendingTasks.GetSample(TimeInterval_Minute * 2, 100)", "[17,18,19,20]"),
        ("$PendingTasks.GetSample(60 * TimeInterval_Second, 120 * TimeInterval_Second, 75)", "[17,18]"),
        ('$PendingTasks.GetSample(time("2025-11-26T07:59:00Z"))', "[19,20]"),
        ('$PendingTasks.GetSample(time("2025-11-26T07:58:00Z"), time("2025-11-26T07:59:00Z"))', "[17,18]"),
        ("$PendingTasks.GetSample(3)", "[18,19,20]"),
        ("$PendingTasks.GetSamplePercent(TimeInterval_Minute * 10)", "100"),
        ("$PendingTasks.GetSamplePercent(TimeInterval_Minute * 20)", "52.5"),
        ("$PendingTasks.GetSamplePercent(TimeInterval_Minute, TimeInterval_Minute * 2)", "100"),
        ("$PendingTasks.GetSamplePercent(TimeInterval_Zero)", "0"),
        ("$PendingTasks.Count()", "21"),
        ("$PendingTasks.HistoryBeginTime()", "2025-11-26T07:50:00.000Z"),
        ("$PendingTasks.GetSamplePeriod()", "00:00:30"),
        ("$FailedTasks.Count()", "0"),
    ],
)
def test_sample_methods(expression: str, expected: str) -> None:
    assert value_of(expression, pending(*TEN_MINUTES)) == expected


def test_documented_sample_percentage_example() -> None:
    # "If the last minute of history was not available, only 18 samples would be returned":
    # 90%, so a 95% requirement fails and an 80% one succeeds.
    history = History({"$PendingTasks": every(TEN_MINUTES, end=NOW)[:-2]})
    assert value_of("$PendingTasks.GetSamplePercent(TimeInterval_Minute * 10)", history) == "90"
    assert value_of("len($PendingTasks.GetSample(TimeInterval_Minute * 10, 80))", history) == "18"
    code, message, detail = error_of("x = $PendingTasks.GetSample(TimeInterval_Minute * 10, 95)", history)
    assert (code, message) == (
        INSUFFICIENT_SAMPLE_DATA,
        "Autoscale evaluation failed due to insufficient sample data",
    )
    assert detail == "Line 1, Col 5: Insufficient data from data set: $PendingTasks wanted 95%, received 90%"


def test_get_sample_period_follows_the_local_sampler() -> None:
    outcome = run("p = $ActiveTasks.GetSamplePeriod()", sample_period=timedelta(seconds=5))
    assert outcome.results.endswith(";p=00:00:05")


def test_samples_after_now_are_not_visible_and_naive_times_are_utc() -> None:
    naive = [Sample(datetime(2025, 11, 26, 7, 59, 30), 1.0), Sample(datetime(2025, 11, 26, 8, 0, 0), 2.0)]
    future = [Sample(NOW + timedelta(seconds=30), 99.0)]
    history = History({"$RunningTasks": naive + future})
    assert value_of("$RunningTasks.Count()", history) == "2"
    assert value_of("$RunningTasks.GetSample(5)", history) == "[1,2]"


def test_each_sampled_variable_reads_its_own_history() -> None:
    history = History({name: every([index]) for index, name in enumerate(vocabulary.SAMPLED_VARIABLES)})
    formula = ";".join(
        f"v{index} = val({name}.GetSample(1), 0)" for index, name in enumerate(vocabulary.SAMPLED_VARIABLES)
    )
    results = run(formula, history).results
    assert results.endswith(";v0=0;v1=1;v2=2;v3=3;v4=4;v5=5;v6=6;v7=7;v8=8")
    assert history.asked == list(vocabulary.SAMPLED_VARIABLES)  # each fetched once, then cached


# --- Service variables, targets, results -------------------------------------------------------------


def test_service_variables_start_at_their_current_values() -> None:
    outcome = run("x = 1", current={"$TargetDedicatedNodes": 5, "$TargetLowPriorityNodes": 2})
    assert outcome.results == "$TargetDedicatedNodes=5;$TargetLowPriorityNodes=2;$NodeDeallocationOption=requeue;x=1"
    assert run("$TargetDedicatedNodes = $TargetDedicatedNodes + 1", current={"$TargetDedicatedNodes": 2}).results == (
        "$TargetDedicatedNodes=3;$TargetLowPriorityNodes=0;$NodeDeallocationOption=requeue"
    )
    # Keys may leave out the '$'.
    assert run("", current={"TargetDedicatedNodes": 4}).target_dedicated_nodes == 4


def test_node_count_variables_read_as_plain_numbers() -> None:
    current = {"$CurrentDedicatedNodes": 10, "$CurrentLowPriorityNodes": 3}
    assert run("x = $CurrentDedicatedNodes + $CurrentLowPriorityNodes", current=current).results.endswith(";x=13")
    # Without a current value the newest sample stands in, then zero.
    history = History({"$CurrentDedicatedNodes": every([2, 4])})
    assert value_of("$CurrentDedicatedNodes", history) == "4"
    assert value_of("$CurrentLowPriorityNodes", history) == "0"
    assert value_of("$TaskSlotsPerNode") == "1"
    assert run("x = $TaskSlotsPerNode", current={"$TaskSlotsPerNode": 4}).results.endswith(";x=4")


def test_documented_target_aliases() -> None:
    assert run("$TargetDedicated = 4").target_dedicated_nodes == 4
    assert run("$TargetLowPriority = 3").target_low_priority_nodes == 3
    # "the value assigned to the fully named variable will take precedence"
    assert run("$TargetDedicatedNodes = 2; $TargetDedicated = 4").target_dedicated_nodes == 2
    assert run("$TargetDedicated = 4; $TargetDedicatedNodes = 2").target_dedicated_nodes == 2
    assert run("$TargetDedicated = 4; x = $TargetDedicatedNodes").results.endswith(";x=4")


@pytest.mark.parametrize(
    ("assignment", "dedicated"),
    [("-3", 0), ("2.9", 2), ("1e3 / 7", 142), ("0.99", 0), ("-0.5", 0)],
)
def test_targets_are_clamped_and_truncated(assignment: str, dedicated: int) -> None:
    outcome = run(f"$TargetDedicatedNodes = {assignment}; $TargetLowPriorityNodes = -1")
    assert (outcome.target_dedicated_nodes, outcome.target_low_priority_nodes) == (dedicated, 0)
    assert outcome.results == (
        f"$TargetDedicatedNodes={dedicated};$TargetLowPriorityNodes=0;$NodeDeallocationOption=requeue"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("requeue", "requeue"),
        ("terminate", "terminate"),
        ("taskcompletion", "taskcompletion"),
        ("retaineddata", "retaineddata"),
        ("TaskCompletion", "taskcompletion"),
        ('"Terminate"', "terminate"),
    ],
)
def test_node_deallocation_option(value: str, expected: str) -> None:
    outcome = run(f"$NodeDeallocationOption = {value}")
    assert outcome.node_deallocation_option == expected
    assert outcome.results.endswith(f";$NodeDeallocationOption={expected}")


def test_node_deallocation_option_reads_back() -> None:
    assert value_of("$NodeDeallocationOption") == "requeue"
    outcome = run('$NodeDeallocationOption = terminate; y = $NodeDeallocationOption == "terminate"')
    assert outcome.results.endswith(";$NodeDeallocationOption=terminate;y=1")


def test_user_variables_with_and_without_dollar() -> None:
    outcome = run("$x = 2; y = $x * 3; $TargetDedicatedNodes = y")
    assert (
        outcome.results == "$TargetDedicatedNodes=6;$TargetLowPriorityNodes=0;$NodeDeallocationOption=requeue;$x=2;y=6"
    )


def test_reassigned_user_variable_reports_its_last_value() -> None:
    assert run("a = 1; a = a + 1; a = a * 10").results.endswith(";a=20")


def test_an_option_name_can_be_a_user_variable() -> None:
    assert run("requeue = 3; $TargetDedicatedNodes = requeue").target_dedicated_nodes == 3


def test_stop_keeps_what_was_assigned_before_it() -> None:
    outcome = run("$TargetDedicatedNodes = 2; x = 1; stop(); $TargetDedicatedNodes = 5; y = 2")
    assert outcome.results == "$TargetDedicatedNodes=2;$TargetLowPriorityNodes=0;$NodeDeallocationOption=requeue;x=1"


def test_stop_in_a_branch_leaves_the_current_targets() -> None:
    formula = (
        "x = 1; $TargetDedicatedNodes = $PendingTasks.GetSamplePercent(TimeInterval_Minute) < 50 ? stop() : 3; y = 2"
    )
    outcome = run(formula, current={"$TargetDedicatedNodes": 7})
    assert outcome.results == "$TargetDedicatedNodes=7;$TargetLowPriorityNodes=0;$NodeDeallocationOption=requeue;x=1"
    assert run(formula, pending(1, 1), current={"$TargetDedicatedNodes": 7}).target_dedicated_nodes == 3


def test_comments_blank_statements_and_line_breaks() -> None:
    formula = """
    // leading comment
    $TargetDedicatedNodes = /* inline */ 2;  // trailing comment
    ;;
    x = "// not a comment";
    $TargetLowPriorityNodes =
        1 +
        1
    """
    assert run(formula).results == (
        "$TargetDedicatedNodes=2;$TargetLowPriorityNodes=2;$NodeDeallocationOption=requeue;x=// not a comment"
    )


def test_empty_formula_keeps_everything() -> None:
    assert run("  ;  ", current={"$TargetDedicatedNodes": 1}).results == (
        "$TargetDedicatedNodes=1;$TargetLowPriorityNodes=0;$NodeDeallocationOption=requeue"
    )


def test_naive_now_is_utc() -> None:
    outcome = evaluate_formula("x = time()", History(), now=NOW.replace(tzinfo=None), current={})
    assert outcome.results.endswith(";x=2025-11-26T08:00:00.000Z")


def test_sample_period_must_be_positive() -> None:
    with pytest.raises(ValueError, match="sample_period must be positive"):
        run("x = 1", sample_period=timedelta(0))


# --- Limits ----------------------------------------------------------------------------------------


def test_formula_length_limit() -> None:
    longest = "x = 1" + " " * (vocabulary.MAX_FORMULA_LENGTH - 5)
    assert run(longest).results.endswith(";x=1")
    with pytest.raises(AutoScaleFormulaError) as caught:
        run(longest + " ")
    assert caught.value.to_error_body() == {
        "code": "AutoScaleFormulaTooLong",
        "message": "The specified auto-scaling formula exceeds lengths limit.",
        "values": [{"name": "Message", "value": "The formula is 8193 characters long; the limit is 8192"}],
    }


def test_statement_limit() -> None:
    hundred = ";;".join(f"v{index} = {index}" for index in range(100)) + ";;"
    assert run(hundred).results.endswith(";v99=99")
    too_many = hundred + "\nv100 = 100"
    code, message, detail = error_of(too_many)
    assert (code, message) == (FORMULA_TOO_LONG, "The specified auto-scaling formula exceeds lengths limit.")
    assert detail == "Line 2, Col 1: the formula has more than 100 statements"


# --- Errors ------------------------------------------------------------------------------------------

SAMPLED_LIST = (
    "$ActiveTasks, $RunningTasks, $PendingTasks, $SucceededTasks, $FailedTasks, "
    "$CurrentDedicatedNodes, $CurrentLowPriorityNodes, $PreemptedNodeCount, $UsableNodeCount"
)
FUNCTION_LIST = (
    "avg, ceil, floor, len, lg, ln, log, max, min, norm, percentile, rand, range, round, std, stop, sum, time, val"
)


@pytest.mark.parametrize(
    ("formula", "detail"),
    [
        ("x = 1 +", "Line 1, Col 8: expected a value after '+'"),
        ("x = 1 &&;", "Line 1, Col 9: expected a value after '&&'"),
        ("x = ", "Line 1, Col 5: expected a value but the statement ended"),
        ("x = )", "Line 1, Col 5: expected a value but found ')'"),
        (
            "x = (1",
            "Line 1, Col 7: expected ')' to close the '(' at line 1, col 5 but found the end of the statement",
        ),
        (
            "x = min(1, 2",
            "Line 1, Col 13: expected ',' or ')' in the call to min() opened at line 1, col 8 "
            "but found the end of the statement",
        ),
        (
            "x = min(1 2)",
            "Line 1, Col 11: expected ',' or ')' in the call to min() opened at line 1, col 8 but found '2'",
        ),
        ("x = 1 = 2", "Line 1, Col 7: only a variable can be assigned; use '==' to compare"),
        ("x = (y = 2)", "Line 1, Col 6: variable 'y' is used before it is assigned"),
        ("x = (1 = 2)", "Line 1, Col 8: expected ')' to close the '(' at line 1, col 5 but found '='"),
        (
            "x = 1 ? 2",
            "Line 1, Col 10: expected ':' after the '?' at line 1, col 7 but found the end of the statement",
        ),
        ("a = 1; b = 2 c = 3", "Line 1, Col 14: expected ';' or an operator but found 'c'"),
        ("x = 1\ny = 2", "Line 2, Col 1: expected ';' or an operator but found 'y'"),
        ('x = "abc', "Line 1, Col 5: unterminated string literal"),
        ("x = 'abc'", "Line 1, Col 5: strings are written in double quotes"),
        ("x = 1; /* never closed", "Line 1, Col 8: unterminated /* comment"),
        ("x = 5 % 2", "Line 1, Col 7: '%' is not an autoscale operator"),
        ("x = 1 & 2", "Line 1, Col 7: '&' is not an autoscale operator; use '&&'"),
        ("x = 1 | 2", "Line 1, Col 7: '|' is not an autoscale operator; use '||'"),
        (
            "x = [1, 2]",
            "Line 1, Col 5: vector literals and indexing with '[' are not part of the autoscale language; "
            "use val(v, i)",
        ),
        ("x = 5m", "Line 1, Col 5: malformed number '5m'"),
        ("x = #", "Line 1, Col 5: unexpected character '#'"),
        ("$ = 1", "Line 1, Col 1: expected a variable name after '$'"),
        ("x = y", "Line 1, Col 5: variable 'y' is used before it is assigned"),
        ("x = x + 1", "Line 1, Col 5: variable 'x' is used before it is assigned"),
        ("x == 1", "Line 1, Col 1: variable 'x' is used before it is assigned"),
        ("x = $y", "Line 1, Col 5: variable '$y' is used before it is assigned"),
        ("x = abs(-1)", f"Line 1, Col 5: unknown function 'abs' (supported: {FUNCTION_LIST})"),
        (
            "x = Max(1)",
            "Line 1, Col 5: unknown function 'Max'; names are case-sensitive, did you mean max()?",
        ),
        ("x = avg()", "Line 1, Col 5: avg() takes at least 1 argument, got 0"),
        ("x = val(1)", "Line 1, Col 5: val() takes 2 arguments, got 1"),
        ("x = time(1, 2)", "Line 1, Col 5: time() takes 0 to 1 arguments, got 2"),
        ("x = rand(1)", "Line 1, Col 5: rand() takes 0 arguments, got 1"),
        ("x = stop(1)", "Line 1, Col 5: stop() takes 0 arguments, got 1"),
        (
            "$PendingTasks = 3",
            "Line 1, Col 1: $PendingTasks is a read-only service-defined variable and cannot be assigned",
        ),
        (
            "$CurrentDedicatedNodes = 3",
            "Line 1, Col 1: $CurrentDedicatedNodes is a read-only service-defined variable and cannot be assigned",
        ),
        (
            "$CPUPercent = 3",
            "Line 1, Col 1: $CPUPercent is a read-only service-defined variable and cannot be assigned",
        ),
        (
            "x = $PendingTasks",
            "Line 1, Col 5: $PendingTasks is a sampled service variable; read it with a method, "
            "e.g. $PendingTasks.GetSample(1) or $PendingTasks.GetSample(TimeInterval_Minute * 5)",
        ),
        (
            "x = max(0, $UsableNodeCount)",
            "Line 1, Col 12: $UsableNodeCount is a sampled service variable; read it with a method, "
            "e.g. $UsableNodeCount.GetSample(1) or $UsableNodeCount.GetSample(TimeInterval_Minute * 5)",
        ),
        (
            "x = $PendingTasks.GetSample",
            "Line 1, Col 5: $PendingTasks is a sampled service variable; read it with a method, "
            "e.g. $PendingTasks.GetSample(1) or $PendingTasks.GetSample(TimeInterval_Minute * 5)",
        ),
        ("x = $PendingTasks.GetSample()", "Line 1, Col 19: GetSample() takes 1 to 3 arguments, got 0"),
        (
            "x = $PendingTasks.GetSamplePercent(1, 2, 3)",
            "Line 1, Col 19: GetSamplePercent() takes 1 to 2 arguments, got 3",
        ),
        ("x = $PendingTasks.Count(1)", "Line 1, Col 19: Count() takes 0 arguments, got 1"),
        (
            "x = $PendingTasks.GetAverage(1)",
            "Line 1, Col 19: unknown method GetAverage() "
            "(sampled variables have GetSample, GetSamplePercent, GetSamplePeriod, Count, HistoryBeginTime)",
        ),
        (
            "x = $TargetDedicatedNodes.GetSample(1)",
            f"Line 1, Col 27: $TargetDedicatedNodes has no sample history, so it has no GetSample() method "
            f"(sampled variables: {SAMPLED_LIST})",
        ),
        (
            "x = 1; y = x.GetSample(1)",
            f"Line 1, Col 14: GetSample() is a method of the sampled service variables ({SAMPLED_LIST}) only",
        ),
        (
            "x = time().foo",
            "Line 1, Col 12: unknown member '.foo' (a timestamp has year, month, day, weekday, hour, minute, second)",
        ),
        (
            "x = time().",
            "Line 1, Col 12: expected a member name after '.' but found the end of the statement",
        ),
        (
            "$targetDedicatedNodes = 1",
            "Line 1, Col 1: unknown variable $targetDedicatedNodes: names are case-sensitive, "
            "did you mean $TargetDedicatedNodes?",
        ),
        (
            "x = $pendingTasks.GetSample(1)",
            "Line 1, Col 5: unknown variable $pendingTasks: names are case-sensitive, did you mean $PendingTasks?",
        ),
        (
            "x = TimeInterval_minute",
            "Line 1, Col 5: unknown time interval 'TimeInterval_minute': names are case-sensitive, "
            "did you mean TimeInterval_Minute?",
        ),
        (
            "x = TimeInterval_Minutes",
            "Line 1, Col 5: unknown time interval 'TimeInterval_Minutes': the constants are "
            "TimeInterval_Zero, "
            "TimeInterval_100ns, TimeInterval_Microsecond, TimeInterval_Millisecond, TimeInterval_Second, "
            "TimeInterval_Minute, TimeInterval_Hour, TimeInterval_Day, TimeInterval_Week, TimeInterval_Year",
        ),
        (
            "TimeInterval_Second = 3",
            "Line 1, Col 1: TimeInterval_Second is a constant and cannot be assigned",
        ),
        (
            "$NodeDeallocationOption = later",
            "Line 1, Col 27: 'later' is not a node deallocation option; "
            "use one of requeue, terminate, taskcompletion, retaineddata",
        ),
    ],
)
def test_syntax_errors(formula: str, detail: str) -> None:
    code, message, actual = error_of(formula, pending(1, 2, 3))
    assert (code, message) == (SYNTAX_ERROR, "The specified auto-scaling formula has a syntax error.")
    assert code == "AutoScalingFormulaSyntaxError"
    assert actual == detail


@pytest.mark.parametrize("metric", vocabulary.RESOURCE_METRICS)
def test_resource_metrics_are_not_supported(metric: str) -> None:
    code, message, detail = error_of(f"x = avg({metric}.GetSample(TimeInterval_Minute))")
    assert code == NOT_SUPPORTED
    assert message == "The autoscale formula uses a feature that the local Batch service does not support"
    assert detail == (
        f"Line 1, Col 9: {metric} is not supported by the local Batch service, which records no node "
        f"resource metrics; use the task and node-count variables ({SAMPLED_LIST})"
    )


def test_documented_cpu_formula_is_rejected_before_evaluation() -> None:
    formula = """$totalDedicatedNodes =
    (min($CPUPercent.GetSample(TimeInterval_Minute * 10)) > 0.7) ?
    ($CurrentDedicatedNodes * 1.1) : $CurrentDedicatedNodes;"""
    history = History()
    code, _message, detail = error_of(formula, history)
    assert code == NOT_SUPPORTED
    assert detail.startswith("Line 2, Col 10: $CPUPercent is not supported by the local Batch service")
    assert history.asked == []


EMPTY_WINDOW = "$PendingTasks.GetSample(TimeInterval_Minute * 2, TimeInterval_Minute * 3)"


@pytest.mark.parametrize(
    ("formula", "detail"),
    [
        ("x = time() + 1", "Line 1, Col 12: operator '+' is not defined for a timestamp and a double"),
        ('x = "a" + 1', "Line 1, Col 9: operator '+' is not defined for a string and a double"),
        (
            "x = time() + time()",
            "Line 1, Col 12: operator '+' is not defined for a timestamp and a timestamp",
        ),
        (
            "x = TimeInterval_Second * TimeInterval_Second",
            "Line 1, Col 25: operator '*' is not defined for a timeinterval and a timeinterval",
        ),
        (
            "x = 2 / TimeInterval_Second",
            "Line 1, Col 7: operator '/' is not defined for a double and a timeinterval",
        ),
        ("x = time() < 1", "Line 1, Col 12: operator '<' cannot compare a timestamp with a double"),
        (
            "x = $PendingTasks.GetSample(1) < 2",
            "Line 1, Col 32: operator '<' cannot compare a doubleVec with a double",
        ),
        (
            "x = $PendingTasks.GetSample(1) + $PendingTasks.GetSample(2)",
            "Line 1, Col 32: operator '+' needs doubleVecs of the same length, not 1 and 2",
        ),
        ("x = -time()", "Line 1, Col 5: operator '-' is not defined for a timestamp"),
        ("x = !TimeInterval_Second", "Line 1, Col 5: operator '!' is not defined for a timeinterval"),
        (
            "x = TimeInterval_Second ? 1 : 2",
            "Line 1, Col 5: '?' needs a double condition, not a timeinterval",
        ),
        (
            "x = $PendingTasks.GetSample(1) && 1",
            "Line 1, Col 5: '&&' needs a double condition, not a doubleVec",
        ),
        ('x = 0 || "s"', "Line 1, Col 10: '||' needs a double condition, not a string"),
        ("x = avg(time())", "Line 1, Col 5: avg() takes doubles and doubleVecs, not a timestamp"),
        (f"x = avg({EMPTY_WINDOW})", "Line 1, Col 5: avg() of an empty doubleVec"),
        (f"x = max({EMPTY_WINDOW})", "Line 1, Col 5: max() of an empty doubleVec"),
        (f"x = percentile({EMPTY_WINDOW}, 50)", "Line 1, Col 5: percentile() of an empty doubleVec"),
        (
            "x = percentile($PendingTasks.GetSample(2), 101)",
            "Line 1, Col 5: percentile() needs a percentage between 0 and 100, not 101",
        ),
        (
            'x = percentile($PendingTasks.GetSample(2), "half")',
            "Line 1, Col 5: percentile() needs a double percentage, not a string",
        ),
        (
            "x = val($PendingTasks.GetSample(2), 5)",
            "Line 1, Col 5: val(): index 5 is outside a doubleVec of length 2",
        ),
        (
            "x = val($PendingTasks.GetSample(2), -1)",
            "Line 1, Col 5: val(): index -1 is outside a doubleVec of length 2",
        ),
        (
            "x = val(time(), 0)",
            "Line 1, Col 5: val() takes a doubleVec and a double index, not a timestamp and a double",
        ),
        ('x = time("nope")', 'Line 1, Col 5: time(): "nope" is neither a W3C-DTF nor an RFC 1123 date'),
        ("x = time(5)", "Line 1, Col 5: time() takes a string, not a double"),
        ("x = time().hour.day", "Line 1, Col 16: '.day' needs a timestamp, not a double"),
        (
            "x = $PendingTasks.GetSample(0)",
            "Line 1, Col 5: $PendingTasks.GetSample() needs a count of at least 1, not 0",
        ),
        (
            "x = $PendingTasks.GetSample(TimeInterval_Minute, 170)",
            "Line 1, Col 5: $PendingTasks.GetSample() needs a sample percentage between 0 and 100, not 170",
        ),
        (
            "x = $PendingTasks.GetSample(10, 70)",
            "Line 1, Col 5: $PendingTasks.GetSample() takes a timeinterval or a timestamp here, not a double",
        ),
        (
            "x = $PendingTasks.GetSamplePercent(5)",
            "Line 1, Col 5: $PendingTasks.GetSamplePercent() takes a timeinterval or a timestamp here, not a double",
        ),
        (
            "x = $PendingTasks.GetSample(TimeInterval_Minute, TimeInterval_Hour, TimeInterval_Day)",
            "Line 1, Col 5: $PendingTasks.GetSample() takes (count), (start[, percent]) or (start, end[, percent])",
        ),
        (
            "$TargetDedicatedNodes = $PendingTasks.GetSample(1)",
            "Line 1, Col 1: $TargetDedicatedNodes must be assigned a double, not a doubleVec",
        ),
        (
            "$TargetLowPriorityNodes = TimeInterval_Second",
            "Line 1, Col 1: $TargetLowPriorityNodes must be assigned a double, not a timeinterval",
        ),
        (
            "$TargetDedicatedNodes = 0 / 0",
            "Line 1, Col 1: $TargetDedicatedNodes evaluated to NaN; a target node count must be a finite number",
        ),
        (
            "x = 1;\n$TargetDedicated = 1 / 0",
            "Line 2, Col 1: $TargetDedicatedNodes evaluated to Infinity; a target node count must be a finite number",
        ),
        (
            "$TargetLowPriorityNodes = -1 / 0",
            "Line 1, Col 1: $TargetLowPriorityNodes evaluated to -Infinity; "
            "a target node count must be a finite number",
        ),
        (
            "$NodeDeallocationOption = 3",
            "Line 1, Col 1: $NodeDeallocationOption must be one of requeue, terminate, taskcompletion, "
            "retaineddata, not a double",
        ),
        (
            '$NodeDeallocationOption = "later"',
            "Line 1, Col 1: $NodeDeallocationOption must be one of requeue, terminate, taskcompletion, "
            "retaineddata, not later",
        ),
    ],
)
def test_evaluation_errors(formula: str, detail: str) -> None:
    code, message, actual = error_of(formula, pending(1, 2, 3))
    assert (code, message) == (EVALUATION_ERROR, "Autoscale evaluation failed due to an error in the formula")
    assert actual == detail


@pytest.mark.parametrize(
    ("formula", "detail"),
    [
        (
            "x = 1;\n  y = $FailedTasks.GetSample(1)",
            "Line 2, Col 7: Insufficient data from data set: $FailedTasks wanted 1 sample, received 0",
        ),
        (
            "y = $FailedTasks.GetSample(3)",
            "Line 1, Col 5: Insufficient data from data set: $FailedTasks wanted 3 samples, received 0",
        ),
        (
            "y = $PendingTasks.GetSample(TimeInterval_Minute * 3, 70)",
            "Line 1, Col 5: Insufficient data from data set: $PendingTasks wanted 70%, received 50%",
        ),
        (
            "y = $PendingTasks.GetSample(TimeInterval_Minute * 2, TimeInterval_Minute * 3, 1)",
            "Line 1, Col 5: Insufficient data from data set: $PendingTasks wanted 1%, received 0%",
        ),
        (
            "y = $SucceededTasks.HistoryBeginTime()",
            "Line 1, Col 5: Insufficient data from data set: $SucceededTasks has no samples yet",
        ),
    ],
)
def test_insufficient_sample_data(formula: str, detail: str) -> None:
    code, message, actual = error_of(formula, pending(1, 2, 3))
    assert (code, message) == (
        INSUFFICIENT_SAMPLE_DATA,
        "Autoscale evaluation failed due to insufficient sample data",
    )
    assert actual == detail


def test_error_renders_as_the_service_autoscale_run_error() -> None:
    with pytest.raises(AutoScaleFormulaError) as caught:
        run(
            "$TargetDedicatedNodes = avg($PendingTasks.GetSample(TimeInterval_Minute * 3, 70))",
            pending(1, 2, 3),
        )
    error = caught.value
    assert error.to_error_body() == {
        "code": "InsufficientSampleData",
        "message": "Autoscale evaluation failed due to insufficient sample data",
        "values": [
            {
                "name": "Message",
                "value": "Line 1, Col 29: Insufficient data from data set: $PendingTasks wanted 70%, received 50%",
            }
        ],
    }
    assert str(error) == (
        "InsufficientSampleData: Autoscale evaluation failed due to insufficient sample data "
        "(Line 1, Col 29: Insufficient data from data set: $PendingTasks wanted 70%, received 50%)"
    )
    assert AutoScaleFormulaError("X", "y").values == []
    assert str(AutoScaleFormulaError("X", "y")) == "X: y"


def test_validate_formula_checks_without_evaluating() -> None:
    validate_formula(CANONICAL)
    validate_formula("x = 1 / 0; y = avg($PendingTasks.GetSample(TimeInterval_Minute, 100))")
    with pytest.raises(AutoScaleFormulaError) as caught:
        validate_formula("x = $CPUPercent.GetSample(1)")
    assert caught.value.code == NOT_SUPPORTED
    with pytest.raises(AutoScaleFormulaError) as caught:
        validate_formula("x = ")
    assert caught.value.values == [("Message", "Line 1, Col 5: expected a value but the statement ended")]


def test_supported_summary_names_both_sides() -> None:
    assert "Supported:" in SUPPORTED_SUMMARY
    assert "Not supported" in SUPPORTED_SUMMARY
    for name in (*vocabulary.SAMPLED_VARIABLES, *vocabulary.RESOURCE_METRICS, *vocabulary.FUNCTIONS):
        assert name in SUPPORTED_SUMMARY, name
    assert all(len(line) <= 110 for line in SUPPORTED_SUMMARY.splitlines())
