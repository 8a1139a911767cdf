"""The generated autoscale formula run by the local Batch service's formula engine, on sample histories."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import pytest

from airflow_provider_azbatch.compute.autoscale import autoscale_formula
from local_azure_batch.formula import Sample, evaluate_formula, validate_formula

NOW = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
AZURE = timedelta(seconds=30)
LOCAL = timedelta(seconds=1)


class PendingHistory:
    """``$PendingTasks`` as given, and ``$PreemptedNodeCount`` (0 unless given), every ``period``."""

    def __init__(self, pending: Sequence[float], period: timedelta, preempted: Sequence[float] = ()) -> None:
        self._series = {
            "$PendingTasks": self._at(pending, period),
            "$PreemptedNodeCount": self._at(preempted or [0] * len(pending), period),
        }

    @staticmethod
    def _at(values: Sequence[float], period: timedelta) -> list[Sample]:
        last = len(values) - 1
        return [Sample(NOW - period * (last - i), value) for i, value in enumerate(values)]

    def samples(self, variable: str) -> Sequence[Sample]:
        return self._series.get(variable, [])


def target(
    formula: str, pending: Sequence[float], period: timedelta = AZURE, preempted: Sequence[float] = ()
) -> tuple[int, int, str | None]:
    outcome = evaluate_formula(
        formula,
        PendingHistory(pending, period, preempted),
        now=NOW,
        current={"$TargetDedicatedNodes": 0.0, "$TargetLowPriorityNodes": 0.0},
        sample_period=period,
    )
    return outcome.target_dedicated_nodes, outcome.target_low_priority_nodes, outcome.node_deallocation_option


def test_the_formulas_are_valid_batch_formulas() -> None:
    for formula in (
        autoscale_formula(4, task_slots_per_node=2),
        autoscale_formula(20, min_nodes=2, low_priority=True, sample_window=timedelta(minutes=3)),
        autoscale_formula(1, sample_window=timedelta(seconds=30)),
        autoscale_formula(4, multi_node=3),
        autoscale_formula(4, multi_node=2, low_priority=True),
    ):
        validate_formula(formula)


@pytest.mark.parametrize(
    ("pending", "nodes"),
    [
        pytest.param([0] * 9 + [24], 4, id="a burst is scaled up to at once, up to max_nodes"),
        pytest.param([0] * 9 + [5], 3, id="ceil(pending / slots)"),
        pytest.param([24] * 9 + [0], 4, id="one sample without tasks keeps the nodes (a dip is bridged)"),
        pytest.param([24] * 8 + [0, 0], 0, id="two samples without tasks: every node goes"),
        pytest.param([8] * 8 + [8, 2], 3, id="a burst ending: the mean of the last two samples"),
        pytest.param([0, 0, 3, 0, 0], 0, id="samples older than the window do not count"),
        pytest.param([3], 2, id="right after creation, the samples there are"),
    ],
)
def test_targets_follow_the_last_two_samples(pending: list[float], nodes: int) -> None:
    formula = autoscale_formula(4, task_slots_per_node=2)

    assert target(formula, pending) == (nodes, 0, "taskcompletion")


@pytest.mark.parametrize(
    "pending",
    [[0] * 9 + [24], [24] * 9 + [0], [24] * 8 + [0, 0], [8] * 8 + [8, 2], [3], [0] * 200 + [7] * 5 + [1]],
)
def test_the_same_samples_give_the_same_targets_on_any_time_scale(pending: list[float]) -> None:
    # The window is a count of samples: the local service's 1-second samples stand for Azure's 30-second ones.
    formula = autoscale_formula(4, task_slots_per_node=2)

    assert target(formula, pending, LOCAL) == target(formula, pending, AZURE)


def test_low_priority_target_and_floor() -> None:
    formula = autoscale_formula(20, min_nodes=2, low_priority=True, task_slots_per_node=4)

    assert target(formula, [0, 0]) == (0, 2, "taskcompletion")
    assert target(formula, [0, 100]) == (0, 20, "taskcompletion")


@pytest.mark.parametrize(
    ("pending", "nodes"),
    [
        pytest.param([0, 0], 0, id="nothing pending: none (no minimum of 3 kept for good)"),
        pytest.param([0, 3], 3, id="a queued 3-instance task (counted as 3 by Batch) gets its 3 nodes"),
        pytest.param([0, 1], 3, id="one pending task, however Batch counts it: the 3 nodes of the largest task"),
        pytest.param([1, 1, 1], 3, id="the 3-node task running (one running task): its nodes stay"),
        pytest.param([1, 0], 3, id="a dip of one sample is bridged"),
        pytest.param([1, 1, 0, 0], 0, id="done: every node goes at the next evaluation"),
        pytest.param([3, 4], 4, id="more than the floor pending: up to max_nodes"),
    ],
)
def test_a_multi_node_pool_holds_its_tasks_nodes_only_while_tasks_are_pending(pending: list[float], nodes: int) -> None:
    formula = autoscale_formula(4, multi_node=3)

    assert target(formula, pending) == (nodes, 0, "taskcompletion")


def test_a_multi_node_pool_keeps_its_configured_minimum_when_idle() -> None:
    formula = autoscale_formula(4, min_nodes=1, multi_node=3)

    assert target(formula, [0, 0]) == (1, 0, "taskcompletion")
    assert target(formula, [0, 1]) == (3, 0, "taskcompletion")


def test_a_spot_pool_asks_for_a_node_for_each_preempted_one_while_tasks_are_pending() -> None:
    formula = autoscale_formula(4, low_priority=True)

    assert target(formula, [2, 2], preempted=[0, 1]) == (0, 3, "taskcompletion")
    assert target(formula, [4, 4], preempted=[0, 9]) == (0, 8, "taskcompletion")  # at most max_nodes more
    # Nothing pending: preempted nodes go with the rest.
    assert target(formula, [0, 0], preempted=[2, 2]) == (0, 0, "taskcompletion")
