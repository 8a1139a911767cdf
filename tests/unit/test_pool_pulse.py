"""The pool pulse's bookkeeping: which jobs a change of a pool's nodes names, when it covers a job: no service."""

from __future__ import annotations

from airflow_provider_azbatch.model.records import NodeTimes
from airflow_provider_azbatch.triggers import pool_pulse
from airflow_provider_azbatch.triggers.pool_pulse import PoolPulse, jobs_moved


def node(node_id: str, running: int, run: int, *jobs: str, state: str = "running") -> NodeTimes:
    return NodeTimes(node_id, True, None, state, running_tasks=running, tasks_run=run, recent_jobs=jobs)


class Sub:
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.quiet_pool: str | None = None
        self.asked = 0

    def look_soon(self) -> None:
        self.asked += 1


def test_a_node_whose_tasks_changed_names_the_jobs_that_recently_ran_there():
    before = [node("n1", 2, 5, "a", "b"), node("n2", 1, 3, "c")]
    assert jobs_moved(before, before) == set()
    # A task of b ended on n1 and one of d started there: n1's recent tasks name a, b and d; n2 did not change.
    after = [node("n1", 2, 6, "a", "b", "d"), node("n2", 1, 3, "c")]
    assert jobs_moved(before, after) == {"a", "b", "d"}


def test_a_change_no_node_explains_is_any_jobs():
    before = [node("n1", 1, 0)]
    assert jobs_moved(before, [node("n1", 0, 1)]) is None  # its tasks changed, it names no job
    assert jobs_moved(before, None) is None  # the pool is gone
    assert jobs_moved([node("n1", 1, 4)], []) is None  # a node with a running task left, naming no job


def test_nodes_that_come_or_go_name_the_jobs_of_their_tasks():
    assert jobs_moved([], [node("n1", 0, 0, state="idle")]) == set()  # a new node that runs nothing yet
    assert jobs_moved([], [node("n1", 1, 0, "a")]) == {"a"}
    assert jobs_moved([node("n1", 1, 4, "a"), node("n2", 0, 2, "b")], [node("n2", 0, 2, "b")]) == {"a"}
    assert jobs_moved([node("n1", 0, 4, "a")], []) == set()  # an idle node left: no task went back to a queue


def test_a_pool_is_pulsed_once_enough_quiet_jobs_wait_on_it_and_covers_them_after_its_first_listing(monkeypatch):
    monkeypatch.setattr(pool_pulse, "PULSE_MIN_JOBS", 3)
    pulse = PoolPulse()
    subs = [Sub(job) for job in "abcd"]
    assert [pulse.quiet(sub, "p") for sub in subs[:2]] == [False, False]
    assert pulse.due(0.0) == []  # two quiet jobs look at themselves (cheaper than a pulse)
    assert pulse.quiet(subs[2], "p") is False
    assert pulse.due(0.0) == ["p"]
    pulse.observe("p", [node("n1", 3, 0, "a", "b", "c")], 0.0, every=1.0)
    assert pulse.due(5.0) == []  # and again PULSE_SECONDS later
    assert pulse.due(pool_pulse.PULSE_SECONDS) == ["p"]
    assert [pulse.quiet(sub, "p") for sub in subs] == [True] * 4
    assert pulse.covered() == 4
    assert [sub.asked for sub in subs] == [0, 0, 0, 0]  # the first listing is what they saw already
    # A task of b ended: the jobs whose tasks ran on that node look (d ran elsewhere: on no node listed here).
    pulse.observe("p", [node("n1", 2, 1, "a", "b", "c")], 10.0, every=1.0)
    assert [sub.asked for sub in subs] == [1, 1, 1, 0]
    # Its listing serves the jobs' node samples until the next one is due.
    assert pulse.nodes("p", 10.0 + pool_pulse.PULSE_SECONDS) == [node("n1", 2, 1, "a", "b", "c")]
    assert pulse.nodes("p", 10.1 + pool_pulse.PULSE_SECONDS) is None


def test_a_covered_job_looks_at_itself_rarely_and_the_account_within_its_budget(monkeypatch):
    monkeypatch.setattr(pool_pulse, "PULSE_MIN_JOBS", 1)
    pulse = PoolPulse()
    few = [Sub(f"j{i}") for i in range(10)]
    for sub in few:
        pulse.quiet(sub, "p")
    pulse.observe("p", [], 0.0, every=1.0)
    assert pulse.covered() == 0  # they became quiet before the pulse ran: they look at themselves once more
    assert [pulse.quiet(sub, "p") for sub in few] == [True] * 10
    assert pulse.quiet_look_interval() == pool_pulse.QUIET_LOOK_SECONDS
    for i in range(1000):
        pulse.quiet(Sub(f"k{i}"), "p")
    # 1,010 covered jobs: each looks at itself every 10,100 s, 0.1 looks a second for the account.
    assert pulse.quiet_look_interval() == 1010 / pool_pulse.QUIET_LOOKS_PER_SECOND


def test_a_pulse_that_fails_long_enough_or_a_view_that_fails_sends_its_jobs_back_to_their_own_looks(monkeypatch):
    monkeypatch.setattr(pool_pulse, "PULSE_MIN_JOBS", 1)
    pulse = PoolPulse()
    a, b = Sub("a"), Sub("b")
    pulse.quiet(a, "p")
    pulse.quiet(b, "q")
    pulse.observe("p", [], 0.0, every=1.0)
    pulse.observe("q", [], 0.0, every=1.0)
    pulse.failed("p", 10.0, every=1.0)
    assert (a.asked, pulse.quiet(a, "p")) == (0, True)  # one failure: it still covers the job
    pulse.failed("p", 10.0 + pool_pulse.PULSE_STALE_SECONDS, every=1.0)
    assert (a.asked, a.quiet_pool) == (1, None)
    assert pulse.quiet(a, "p") is False  # not until the pulse answers again
    pulse.release_all()
    assert (b.asked, b.quiet_pool, pulse.covered()) == (1, None, 0)


def test_a_job_that_leaves_a_pool_is_no_longer_told_of_it():
    pulse = PoolPulse()
    a = Sub("a")
    pulse.quiet(a, "p")
    pulse.unquiet(a)
    assert (a.quiet_pool, pulse.due(0.0), pulse.covered()) == (None, [], 0)
    pulse.observe("p", [node("n1", 1, 1, "a")], 0.0, every=1.0)  # a listing of a pool nobody waits on
    assert a.asked == 0
