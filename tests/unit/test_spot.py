"""Spot nodes, without I/O: telling preemptions from other requeues and retries, when the fallback is due, what the
report says, and what a Spot pool strategy accepts."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from airflow_provider_azbatch.model.records import NodeTimes, TaskAttempt
from airflow_provider_azbatch.pools import BatchPool, PoolStrategyError, SpotFallback
from airflow_provider_azbatch.results.preemptions import PreemptionReport
from airflow_provider_azbatch.watching.drivers import run_sync
from airflow_provider_azbatch.watching.preemption import (
    Requeue,
    SpotFallbackDue,
    check_fallback,
    requeues,
    spot_watch,
    track_attempts,
)
from airflow_provider_azbatch.watching.state import WatchState

T0 = "2026-01-01T00:00:00+00:00"
T1 = "2026-01-01T00:01:00+00:00"
T2 = "2026-01-01T00:02:00+00:00"
NOW = 1767225720.0  # 2026-01-01T00:02:00Z


@dataclass
class SpotAccount:
    """The read primitives the tracking uses: the job's tasks' attempts and the pool's nodes."""

    attempts: dict[str, TaskAttempt] = field(default_factory=dict)
    nodes: list[NodeTimes] = field(default_factory=list)

    def list_task_attempts(self, job_id: str, task_ids: tuple[str, ...] | None = None) -> dict[str, TaskAttempt]:
        if task_ids is None:
            return {task: a for task, a in self.attempts.items() if a.state == "running"}
        return {task: self.attempts[task] for task in task_ids if task in self.attempts}

    def list_pool_nodes(self, pool_id: str) -> list[NodeTimes]:
        return list(self.nodes)


def _state(running: int = 1, active: int = 0, fallback: dict | None = None) -> WatchState:
    state = WatchState(job_id="job", pool_id="pool", spot=spot_watch(fallback, {"mpi": 2}))
    state.counts = {"active": active, "running": running, "completed": 0, "succeeded": 0, "failed": 0}
    return state


def _track(state: WatchState, account: SpotAccount) -> list[str]:
    lines: list[str] = []
    run_sync(track_attempts(state, NOW, lambda task, line: lines.append(line)), account)
    return lines


def test_an_attempt_whose_spot_node_was_preempted_is_a_preemption():
    account = SpotAccount({"train": TaskAttempt("running", 0, "n1", T0)})
    state = _state()
    assert _track(state, account) == []
    account.attempts["train"] = TaskAttempt("active")
    account.nodes = [NodeTimes("n1", False, T0, "preempted", T1, None)]
    state.counts = {"active": 1, "running": 0, "completed": 0, "succeeded": 0, "failed": 0}
    assert _track(state, account) == [
        "Batch task train was preempted: Azure took back its Spot node n1 after 60 s of running, and Batch requeued "
        "the task (preemption 1 of this task, 1 of the job)"
    ]
    assert requeues(state) == [Requeue("train", "n1", T0, T1, preempted=True)]


def test_an_attempt_that_started_over_between_two_looks_on_a_node_that_booted_again_is_a_preemption():
    account = SpotAccount({"mpi": TaskAttempt("running", 0, "n1", T0)})
    state = _state()
    _track(state, account)
    account.attempts["mpi"] = TaskAttempt("running", 0, "n1", T2)
    account.nodes = [NodeTimes("n1", False, T0, "running", T2, T1)]  # back with its id, booted at T1
    (line,) = _track(state, account)
    assert line.startswith("Batch task mpi was preempted: Azure took back its Spot node n1 after ")
    # A 2-node task's lost attempt counts both nodes.
    assert requeues(state)[0].nodes == 2
    assert state.spot["attempts"] == {"mpi": {"node": "n1", "start": T2, "retry": 0}}


def test_retries_completions_and_requeues_off_spot_nodes_are_told_apart():
    account = SpotAccount(
        {
            "retried": TaskAttempt("running", 0, "d1", T0),
            "done": TaskAttempt("running", 0, "d1", T0),
            "moved": TaskAttempt("running", 0, "d1", T0),
            "gone": TaskAttempt("running", 0, "x1", T0),
        }
    )
    state = _state(running=4)
    _track(state, account)
    account.attempts.update(
        retried=TaskAttempt("active", 1),
        done=TaskAttempt("completed", 0, "d1", T0),
        moved=TaskAttempt("active", 0),
        gone=TaskAttempt("active", 0),
    )
    account.nodes = [NodeTimes("d1", True, T0, "idle", T1, T0)]
    lines = _track(state, account)
    assert lines == [
        "Batch task moved was requeued by Batch after 2.0 min on node d1 (its node is idle)",
        "Batch task gone was requeued by Batch after 2.0 min on node x1 (the node left the pool)",
    ]
    assert [r.preempted for r in requeues(state)] == [False, False]


def test_the_fallback_is_due_after_the_preemptions_it_names():
    state = _state(fallback={"after_preemptions": 2, "within_seconds": None})
    state.spot["requeues"] = [Requeue("a", "n1", T0, T1, True).to_json()]
    check_fallback(state, NOW)
    state.spot["requeues"].append(Requeue("a", "n1", T1, T2, True).to_json())
    with pytest.raises(SpotFallbackDue) as info:
        check_fallback(state, NOW)
    assert str(info.value) == "the job's tasks were preempted 2 times (spot_fallback after_preemptions=2)"
    state.spot["fell_back"] = {"to_pool": "pool-dedicated"}
    check_fallback(state, NOW)  # once only


def test_the_fallback_is_due_when_tasks_wait_with_none_running_for_the_time_limit():
    state = _state(running=0, active=1, fallback={"after_preemptions": None, "within_seconds": 600.0})
    check_fallback(state, NOW)
    check_fallback(state, NOW + 599)
    state.counts["running"] = 1  # a Spot node came: the clock starts again next time
    check_fallback(state, NOW + 700)
    assert state.spot["waiting_since"] is None
    state.counts["running"] = 0
    check_fallback(state, NOW + 800)
    with pytest.raises(SpotFallbackDue) as info:
        check_fallback(state, NOW + 1400)
    assert str(info.value) == (
        "no Spot node ran the job's waiting tasks for 10.0 min (spot_fallback no_spot_node_within=10.0 min)"
    )


def test_the_report_counts_each_tasks_preemptions_and_prices_the_lost_attempts():
    lost = [Requeue("a", "n1", T0, T1, True), Requeue("a", "n1", T1, T2, False), Requeue("b", "n2", T0, T1, True, 2)]
    report = PreemptionReport(lost, node_share=0.5, hourly_usd=3.6, fell_back=None)
    assert report.to_json() == {
        "preempted": 2,
        "requeued": 3,
        "lost_node_seconds": 120.0,  # (60 + 60 + 2 x 60) x 0.5
        "lost_usd": 0.12,
        "tasks": {
            "a": {"preempted": 1, "requeued": 2, "lost_node_seconds": 60.0},
            "b": {"preempted": 1, "requeued": 1, "lost_node_seconds": 60.0},
        },
        "fell_back": None,
    }
    assert report.lines("job") == [
        "Spot: Batch job job lost 2 task attempt(s) to preemptions and 1 to other requeues (a: 1 preempted, 2 "
        "requeued, b: 1 preempted, 1 requeued); the lost attempts ran 0.033 node-h, about $0.1200 at list prices (an "
        "upper bound: Spot nodes cost less)"
    ]
    assert PreemptionReport([]).lines("job") == ["Spot: no task of Batch job job was preempted or requeued"]


def test_the_reports_line_shows_the_rounded_values_the_xcom_holds():
    # 1.76 s is 0.000 node-h as it is, but the XCom holds 1.8 s: the log says 0.001, as the XCom does.
    report = PreemptionReport([Requeue("a", "n1", T0, "2026-01-01T00:00:01.760000+00:00", True)], hourly_usd=3.6)
    assert report.to_json()["lost_node_seconds"] == 1.8
    assert "the lost attempts ran 0.001 node-h, about $0.0018 at list prices" in report.lines("job")[0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {},
            "spot_fallback needs after_preemptions (a number of preemptions), no_spot_node_within (a timedelta) "
            "or both",
        ),
        ({"after_preemptions": 0}, "spot_fallback.after_preemptions must be a whole number >= 1, got 0"),
        ({"after_preemptions": True}, "spot_fallback.after_preemptions must be a whole number >= 1, got True"),
        (
            {"no_spot_node_within": 600},
            "spot_fallback.no_spot_node_within must be a positive timedelta (e.g. timedelta(minutes=20)), got 600",
        ),
        (
            {"after_preemptions": 1, "dedicated_pool_id": "a b"},
            "spot_fallback.dedicated_pool_id must be a pool id (letters, digits, hyphens and underscores, at most 64 "
            "characters), got 'a b'",
        ),
    ],
)
def test_spot_fallback_settings_are_checked(kwargs, message):
    with pytest.raises(PoolStrategyError) as info:
        SpotFallback(**kwargs)
    assert str(info.value) == message


def test_a_spot_pool_strategy_says_what_cannot_work():
    fallback = SpotFallback(after_preemptions=2)
    with pytest.raises(PoolStrategyError, match="spot_fallback is for pools of Spot nodes: add low_priority=True"):
        BatchPool.shared("p", requirements={"cpus": 1}, spot_fallback=fallback)
    with pytest.raises(PoolStrategyError, match="dedicated_pool_id is for shared pools"):
        BatchPool.auto(
            requirements={"cpus": 1, "low_priority": True},
            spot_fallback=SpotFallback(after_preemptions=1, dedicated_pool_id="other"),
        )
    with pytest.raises(PoolStrategyError, match="longer than the 64 characters Batch allows"):
        BatchPool.shared("p" * 60, requirements={"cpus": 1, "low_priority": True}, spot_fallback=fallback)
    with pytest.raises(PoolStrategyError) as info:
        BatchPool.shared(
            "p",
            requirements={"cpus": 1, "low_priority": True},
            pool_overrides={
                "virtualMachineConfiguration": {"osDisk": {"ephemeralOSDiskSettings": {"placement": "CacheDisk"}}}
            },
        )
    assert str(info.value) == (
        "pool_overrides.virtualMachineConfiguration.osDisk.ephemeralOSDiskSettings: Batch does not give Spot nodes "
        "(low_priority) ephemeral OS disks; leave it out, or ask for dedicated nodes"
    )


def test_a_shared_spot_pools_dedicated_twin_is_made_like_it_with_dedicated_nodes_from_zero():
    spot = BatchPool.shared(
        "gpu-spot",
        requirements={"cpus": 1, "low_priority": True},
        max_nodes=3,
        min_nodes=1,
        autoscale=False,
        spot_fallback=SpotFallback(no_spot_node_within=timedelta(minutes=20)),
    )
    twin = spot.dedicated_twin()
    assert (twin.pool_id, twin.autoscale, twin.min_nodes, twin.max_nodes) == ("gpu-spot-dedicated", True, 0, 3)
    assert twin.requirements.low_priority is False
    body = twin.pool_body(containers=False, multi_node=1)
    assert body["vmSize"] == spot.pool_body(containers=False, multi_node=1)["vmSize"]
    assert "$TargetDedicatedNodes = max(0, min($nodes, 3));" in body["autoScaleFormula"]
