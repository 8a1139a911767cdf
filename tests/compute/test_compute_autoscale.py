from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_provider_azbatch.compute.autoscale import AutoscaleSettings, autoscale_formula, iso8601_duration
from airflow_provider_azbatch.compute.errors import InvalidAutoscaleError


def test_formula_for_dedicated_nodes() -> None:
    assert autoscale_formula(10) == (
        "$tasks = max(0, $PendingTasks.GetSample(1), avg($PendingTasks.GetSample(2)));\n"
        "$nodes = ceil($tasks / 1);\n"
        "$TargetDedicatedNodes = max(0, min($nodes, 10));\n"
        "$TargetLowPriorityNodes = 0;\n"
        "$NodeDeallocationOption = taskcompletion;"
    )


def test_formula_for_low_priority_nodes_with_slots_and_a_floor() -> None:
    formula = autoscale_formula(
        20, min_nodes=2, low_priority=True, sample_window=timedelta(seconds=90), task_slots_per_node=4
    )

    assert formula == (
        "$tasks = max(0, $PendingTasks.GetSample(1), avg($PendingTasks.GetSample(3)));\n"
        "$nodes = ceil($tasks / 4);\n"
        "$TargetLowPriorityNodes = max(2, min($nodes, 20));\n"
        "$TargetLowPriorityNodes = $TargetLowPriorityNodes"
        " + ($nodes > 0 ? min($PreemptedNodeCount.GetSample(1), 20) : 0);\n"
        "$TargetDedicatedNodes = 0;\n"
        "$NodeDeallocationOption = taskcompletion;"
    )


def test_formula_for_multi_node_tasks_has_a_floor_while_tasks_are_pending() -> None:
    assert autoscale_formula(4, multi_node=3) == (
        "$tasks = max(0, $PendingTasks.GetSample(1), avg($PendingTasks.GetSample(2)));\n"
        "$tasks = $tasks > 0 ? max($tasks, 3) : 0;\n"
        "$nodes = ceil($tasks / 1);\n"
        "$TargetDedicatedNodes = max(0, min($nodes, 4));\n"
        "$TargetLowPriorityNodes = 0;\n"
        "$NodeDeallocationOption = taskcompletion;"
    )


def test_a_one_sample_window_is_the_last_sample() -> None:
    formula = autoscale_formula(3, sample_window=timedelta(seconds=30))

    assert formula.splitlines()[0] == "$tasks = max(0, $PendingTasks.GetSample(1));"


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((0,), {}, "autoscale.max_nodes must be a whole number >= 1, got 0"),
        ((2.5,), {}, "autoscale.max_nodes must be a whole number >= 1, got 2.5"),
        ((10,), {"min_nodes": 11}, "autoscale.min_nodes must be a whole number between 0 and 10, got 11"),
        ((10,), {"min_nodes": -1}, "autoscale.min_nodes must be a whole number between 0 and 10, got -1"),
        (
            (10,),
            {"task_slots_per_node": 0},
            "autoscale.task_slots_per_node must be a whole number between 1 and 256, got 0",
        ),
        (
            (10,),
            {"task_slots_per_node": 257},
            "autoscale.task_slots_per_node must be a whole number between 1 and 256, got 257",
        ),
        ((10,), {"low_priority": "yes"}, "autoscale.low_priority must be True or False, got 'yes'"),
        ((4,), {"multi_node": 5}, "autoscale.multi_node must be a whole number between 1 and 4, got 5"),
        ((4,), {"multi_node": 0}, "autoscale.multi_node must be a whole number between 1 and 4, got 0"),
        (
            (4,),
            {"multi_node": 2, "task_slots_per_node": 2},
            "autoscale.multi_node=2 needs task_slots_per_node=1 (Batch runs multi-instance tasks only on pools with "
            "one task slot per node), got 2",
        ),
        *(
            (
                (10,),
                {"sample_window": window},
                "autoscale.sample_window must be a timedelta of whole 30-second samples (30 s, 1 min, 90 s, ...), "
                f"got {window!r}",
            )
            for window in (
                timedelta(0),
                timedelta(seconds=-30),
                timedelta(seconds=45),
                timedelta(seconds=60, microseconds=5),
                60,
            )
        ),
    ],
)
def test_formula_arguments_are_validated(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidAutoscaleError) as info:
        autoscale_formula(*args, **kwargs)

    assert str(info.value) == message


def test_settings_default_interval_is_five_minutes() -> None:
    settings = AutoscaleSettings("$TargetDedicatedNodes = 1;")

    assert settings.evaluation_interval == timedelta(minutes=5)
    assert settings.evaluation_interval_iso == "PT5M"


@pytest.mark.parametrize("interval", [timedelta(minutes=5), timedelta(hours=1), timedelta(hours=168)])
def test_settings_accept_the_service_range(interval: timedelta) -> None:
    assert AutoscaleSettings("$x = 1;", interval).evaluation_interval == interval


@pytest.mark.parametrize(
    ("interval", "shown"),
    [
        (timedelta(minutes=4, seconds=59), "datetime.timedelta(seconds=299)"),
        (timedelta(hours=168, seconds=1), "datetime.timedelta(days=7, seconds=1)"),
        (timedelta(0), "datetime.timedelta(0)"),
        (300, "300"),
    ],
)
def test_settings_reject_intervals_outside_the_service_range(interval: timedelta, shown: str) -> None:
    with pytest.raises(InvalidAutoscaleError) as info:
        AutoscaleSettings("$x = 1;", interval)

    assert str(info.value) == (
        "autoscale.evaluation_interval must be between 5 minutes and 168 hours "
        f"(the range the Batch service accepts), got {shown}"
    )


@pytest.mark.parametrize("formula", ["", "   ", None])
def test_settings_reject_an_empty_formula(formula: str | None) -> None:
    with pytest.raises(InvalidAutoscaleError) as info:
        AutoscaleSettings(formula)  # type: ignore[arg-type]

    assert str(info.value) == f"autoscale.formula must be a non-empty string, got {formula!r}"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(minutes=5), "PT5M"),
        (timedelta(hours=168), "PT168H"),
        (timedelta(minutes=90), "PT1H30M"),
        (timedelta(seconds=90), "PT1M30S"),
        (timedelta(hours=1, seconds=5), "PT1H5S"),
        (timedelta(seconds=1.5), "PT1.5S"),
        (timedelta(0), "PT0S"),
    ],
)
def test_iso8601_duration(value: timedelta, text: str) -> None:
    assert iso8601_duration(value) == text


def test_iso8601_duration_rejects_negative() -> None:
    with pytest.raises(InvalidAutoscaleError) as info:
        iso8601_duration(timedelta(seconds=-1))

    assert str(info.value) == "a duration must not be negative, got datetime.timedelta(days=-1, seconds=86399)"
