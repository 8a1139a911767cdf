"""Reads that only inform never fail a watch: their classification, what a failed one leaves (a gap, said once), and
the cadence of a trigger's own looks (a waiting job backs off): no service."""

from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

from airflow_provider_azbatch.model import reads as read
from airflow_provider_azbatch.model.records import JobStatus, TaskCounts
from airflow_provider_azbatch.watching.calls import INFORMING, NEEDED, READ_METHODS, Gap, ask, informing
from airflow_provider_azbatch.watching.core import JobWatcher
from airflow_provider_azbatch.watching.gaps import gap_line
from airflow_provider_azbatch.watching.state import WatchState


class Refused(HttpResponseError):
    def __init__(self) -> None:
        super().__init__("This request is not authorized to perform this operation.")
        self.status_code = 403


def test_every_read_is_classed_needed_or_informing_once():
    assert set(NEEDED) | set(INFORMING) == set(READ_METHODS)
    assert not set(NEEDED) & set(INFORMING)
    assert set(INFORMING) == {"list_pool_nodes", "get_pool_snapshot", "list_nodes_in_states", "read_node_file_tail"}
    assert informing(read.list_pool_nodes("p"))
    assert not informing(read.get_task_counts("j"))


def test_a_needed_read_that_fails_raises_an_informing_one_comes_back_as_a_gap():
    refused = Refused()
    nodes_of_p = read.list_pool_nodes("p")
    step = ask(read.get_task_counts("j"), nodes_of_p)
    next(step)
    with pytest.raises(StopIteration) as stop:
        step.send([RUNNING, refused])
    counts, nodes = stop.value.value
    assert counts == RUNNING
    assert nodes == Gap(nodes_of_p, refused)
    step = ask(read.get_task_counts("j"), nodes_of_p)
    next(step)
    with pytest.raises(Refused):
        step.send([refused, []])


def test_a_refused_or_missing_pool_is_said_with_why_and_the_fix_a_passing_failure_is_not():
    refused = gap_line("j1", Gap(read.list_pool_nodes("p1"), Refused()))
    assert refused is not None
    assert refused[1] == (
        "Batch job j1: the nodes of pool p1 cannot be read with this connection's credential (403 This request is "
        "not authorized to perform this operation.): the job is watched as before, but the idle time of its "
        "nodes is not reported, and its Spot nodes are priced as dedicated ones. Fix: give the connection's "
        "credential a role on the Batch account that reads its pools and their nodes (the built-in Azure Batch "
        "Data Contributor does)"
    )
    gone = gap_line("j1", Gap(read.list_pool_nodes("p1"), None))
    assert gone is not None
    assert gone[1] == (
        "Batch job j1: pool p1 is gone (404 PoolNotFound): the idle time of its nodes is not reported, and its "
        "Spot nodes are priced as dedicated ones from now on"
    )
    busy = HttpResponseError("busy")
    busy.status_code = 503
    assert gap_line("j1", Gap(read.list_pool_nodes("p1"), busy)) is None
    assert gap_line("j1", Gap(read.list_pool_nodes("p1"), ResourceNotFoundError("gone")))[0] == gone[0]


def _watcher(lines: list[str], pool_id: str = "p1") -> JobWatcher:
    state = WatchState(job_id="j1", expected_tasks=1, pool_id=pool_id)
    return JobWatcher(state, lambda task, line: lines.append(line), stream_output=False, poll_interval=1.0)


RUNNING = TaskCounts(running=1)


def _look(watcher: JobWatcher, now: float, **answers: object) -> list[str]:
    """One look, each call answered by its method (``answers`` over a running job on a pool of no nodes); the
    methods asked, in order."""
    answers = {
        "get_task_counts": RUNNING,
        "get_job_status": JobStatus("active", pool_id="p1"),
        "get_pool_snapshot": None,
        "list_nodes_in_states": [],
        "list_pool_nodes": [],
        **answers,
    }
    asked: list[str] = []
    step = watcher.look(now)
    try:
        batch = next(step)
        while True:
            asked += [call.name for call in batch]
            batch = step.send([answers[call.name] for call in batch])
    except StopIteration:
        pass
    return asked


def test_a_refused_node_listing_is_said_once_and_not_asked_again_for_a_minute():
    lines: list[str] = []
    watcher = _watcher(lines)
    asked = [now for now in range(130) if "list_pool_nodes" in _look(watcher, float(now), list_pool_nodes=Refused())]
    assert asked == [0, 60, 120]
    said = [line for line in lines if "cannot be read" in line]
    assert len(said) == 1
    assert list(watcher.state.gaps) == ["p1:refused:nodes"]


def test_a_sample_of_a_pool_gone_is_said_once():
    lines: list[str] = []
    watcher = _watcher(lines)
    for now in (0.0, 60.0, 120.0):
        _look(watcher, now, list_pool_nodes=None)
    assert [line for line in lines if "is gone" in line] == [
        "Batch job j1: pool p1 is gone (404 PoolNotFound): the idle time of its nodes is not reported, and its "
        "Spot nodes are priced as dedicated ones from now on"
    ]


def test_a_waiting_job_whose_pool_cannot_be_read_goes_on_waiting():
    lines: list[str] = []
    watcher = _watcher(lines)
    asked = _look(watcher, 0.0, get_task_counts=TaskCounts(active=3), get_pool_snapshot=Refused())
    assert "get_pool_snapshot" in asked
    assert [line for line in lines if "cannot be read" in line] == [
        "Batch job j1: the nodes of pool p1 cannot be read with this connection's credential (403 This request is "
        "not authorized to perform this operation.): the job is watched as before, but a pool that cannot give the "
        "job nodes is not told apart from a busy one. Fix: give the connection's credential a role on the Batch "
        "account that reads its pools and their nodes (the built-in Azure Batch Data Contributor does)"
    ]


def test_the_first_look_is_no_move_the_next_that_changes_the_counts_is():
    watcher = _watcher([])
    _look(watcher, 0.0, get_task_counts=TaskCounts(running=2))
    assert watcher.last_look_moved is False
    _look(watcher, 1.0, get_task_counts=TaskCounts(running=2))
    assert watcher.last_look_moved is False
    _look(watcher, 2.0, get_task_counts=TaskCounts(running=1, completed=1, succeeded=1))
    assert watcher.last_look_moved is True
