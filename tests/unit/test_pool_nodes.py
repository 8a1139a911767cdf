"""A pool's shared listing: one per pool whatever the number of jobs, failures that back off per pool, the jobs a
change names, resting and the pulse: no service (a lister that counts, a clock the test moves)."""

from __future__ import annotations

import asyncio

import pytest

from airflow_provider_azbatch.model.records import NodeTimes
from airflow_provider_azbatch.triggers import pool_nodes
from airflow_provider_azbatch.triggers.pool_nodes import (
    FAILED_LISTING_SECONDS,
    LISTING_SECONDS,
    PULSE_MIN_JOBS,
    REST_LOOK_SECONDS,
    PoolListings,
    jobs_moved,
)


def node(node_id: str, running: int, run: int, *jobs: str, state: str = "running") -> NodeTimes:
    return NodeTimes(node_id, True, None, state, running_tasks=running, tasks_run=run, recent_jobs=jobs)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(pool_nodes, "time", clock)
    return clock


class Lister:
    """Answers ``answers`` in turn (an exception is raised), counting the listings; ``gate`` holds them."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.gate: asyncio.Event | None = None

    async def list_pool_nodes(self, pool_id: str) -> list[NodeTimes] | None:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        answer = self.answers[min(self.calls, len(self.answers)) - 1]
        if isinstance(answer, BaseException):
            raise answer
        return answer  # type: ignore[return-value]


class Sub:
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.asked = 0

    def look_soon(self) -> None:
        self.asked += 1


class Refused(Exception):
    status_code = 403


def test_a_node_whose_tasks_changed_names_the_jobs_that_recently_ran_there():
    before = {n.id: n for n in (node("n1", 2, 5, "a", "b"), node("n2", 1, 3, "c"))}
    assert jobs_moved(before, list(before.values())) == set()
    after = [node("n1", 2, 6, "a", "b", "d"), node("n2", 1, 3, "c")]
    assert jobs_moved(before, after) == {"a", "b", "d"}


def test_a_change_no_node_explains_is_any_jobs():
    assert jobs_moved({"n1": node("n1", 1, 0)}, [node("n1", 0, 1)]) is None  # its tasks changed, it names no job
    assert jobs_moved({"n1": node("n1", 0, 0, state="idle")}, [node("n1", 0, 0, state="unusable")]) is None
    assert jobs_moved({"n1": node("n1", 1, 0)}, None) is None  # the pool is gone
    assert jobs_moved({"n1": node("n1", 1, 4)}, []) is None  # a node with a running task left, naming no job


def test_nodes_that_come_or_go_name_the_jobs_of_their_tasks():
    assert jobs_moved({}, [node("n1", 0, 0, state="idle")]) == set()  # a new node that runs nothing yet
    assert jobs_moved({}, [node("n1", 1, 0, "a")]) == {"a"}
    before = {"n1": node("n1", 1, 4, "a"), "n2": node("n2", 0, 2, "b")}
    assert jobs_moved(before, [node("n2", 0, 2, "b")]) == {"a"}
    assert jobs_moved({"n1": node("n1", 0, 4, "a")}, []) == set()  # an idle node left: no task went back


def test_a_thousand_jobs_asking_at_once_list_their_pool_once(clock):
    async def run() -> tuple[int, list[object]]:
        listings = PoolListings()
        lister = Lister([node("n1", 1, 1, "j0")])
        lister.gate = asyncio.Event()
        asks = [asyncio.ensure_future(listings.nodes("p", lister)) for _ in range(1000)]
        await asyncio.sleep(0)
        lister.gate.set()
        answers = await asyncio.gather(*asks)
        clock.now += LISTING_SECONDS - 0.1  # still fresh: no new listing
        answers.append(await listings.nodes("p", lister))
        return lister.calls, answers

    calls, answers = asyncio.run(run())
    assert calls == 1
    assert all(answer == [node("n1", 1, 1, "j0")] for answer in answers)


def test_a_listing_older_than_the_listing_interval_is_listed_again(clock):
    async def run() -> int:
        listings = PoolListings()
        lister = Lister([], [node("n1", 0, 0, state="idle")])
        await listings.nodes("p", lister)
        clock.now += LISTING_SECONDS
        assert await listings.nodes("p", lister) == [node("n1", 0, 0, state="idle")]
        return lister.calls

    assert asyncio.run(run()) == 2


def test_a_refused_listing_is_tried_again_ever_later_up_to_once_a_minute_never_once_per_job(clock):
    async def run() -> list[float]:
        listings = PoolListings()
        lister = Lister(Refused("AuthorizationFailure"))
        tried_at: list[float] = []
        for _ in range(200):  # a job asks every second for 200 s
            calls = lister.calls
            with pytest.raises(Refused):
                await listings.nodes("p", lister)
            if lister.calls > calls:
                tried_at.append(clock.now - 1000.0)
            clock.now += 1.0
        return tried_at

    # 2 x, 4 x, 8 x LISTING_SECONDS after each failure, then FAILED_LISTING_SECONDS.
    assert asyncio.run(run()) == [0.0, 10.0, 30.0, 70.0, 130.0, 190.0]
    assert FAILED_LISTING_SECONDS == 60.0


def test_a_pool_gone_is_answered_none_and_not_listed_again_at_every_ask(clock):
    async def run() -> tuple[list[object], int]:
        listings = PoolListings()
        lister = Lister(None)
        answers = []
        for _ in range(9):
            answers.append(await listings.nodes("p", lister))
            clock.now += 1.0
        return answers, lister.calls

    answers, calls = asyncio.run(run())
    assert answers == [None] * 9
    assert calls == 1


def test_jobs_rest_once_the_pulse_covers_their_pool_and_a_listing_tells_only_those_it_names(clock):
    async def run() -> None:
        listings = PoolListings()
        lister = Lister([node("n1", 2, 2, "j0", "j1")], [node("n1", 2, 3, "j1", "j2")])
        await listings.nodes("p", lister)
        looked_at = clock.now + 0.1  # their looks started after the listing
        subs = [Sub(f"j{i}") for i in range(PULSE_MIN_JOBS)]
        rests = [listings.rest(sub, "p", looked_at) for sub in subs]
        # Until PULSE_MIN_JOBS rest on the pool, the pulse does not run: they back off on their own.
        assert rests[:-1] == [None] * (PULSE_MIN_JOBS - 1)
        assert rests[-1] == REST_LOOK_SECONDS
        assert listings.due(clock.now, 1.0) == []  # listed less than LISTING_SECONDS ago
        clock.now += LISTING_SECONDS
        assert listings.due(clock.now, 1.0) == ["p"]
        listings.pulse(lister, 1.0)
        await asyncio.sleep(0.01)
        # n1's tasks changed: the jobs it named before or names now (j0, j1, j2) look; the others rest on.
        assert [sub.asked for sub in subs[:4]] == [1, 1, 1, 0]
        assert sum(sub.asked for sub in subs) == 3

    asyncio.run(run())


def test_a_job_whose_look_came_before_the_listing_does_not_rest_on_it(clock):
    async def run() -> float | None:
        listings = PoolListings()
        for i in range(PULSE_MIN_JOBS):
            listings.rest(Sub(f"other{i}"), "p", clock.now)
        looked_at = clock.now
        clock.now += 1.0
        await listings.nodes("p", Lister([]))  # listed after its look: a change between the two is in neither
        return listings.rest(Sub("late"), "p", looked_at)

    assert asyncio.run(run()) is None


def test_a_failing_listing_sends_its_resting_jobs_back_to_their_own_looks(clock):
    async def run() -> tuple[int, float | None]:
        listings = PoolListings()
        lister = Lister([], Refused("AuthorizationFailure"))
        await listings.nodes("p", lister)
        subs = [Sub(f"j{i}") for i in range(PULSE_MIN_JOBS)]
        for sub in subs:
            listings.rest(sub, "p", clock.now)
        clock.now += LISTING_SECONDS
        with pytest.raises(Refused):
            await listings.nodes("p", lister)
        return sum(sub.asked for sub in subs), listings.rest(subs[0], "p", clock.now)

    asked, rest = asyncio.run(run())
    assert asked == PULSE_MIN_JOBS
    assert rest is None
