"""The cadence of a trigger's own looks at its job (triggers/subscription.py): no service."""

from __future__ import annotations

from airflow_provider_azbatch.triggers.account_view import AccountView, Subscription
from airflow_provider_azbatch.triggers.pool_nodes import PULSE_MIN_JOBS, REST_LOOK_SECONDS
from airflow_provider_azbatch.triggers.subscription import MAX_LOOK_SECONDS, look_after
from airflow_provider_azbatch.watching.core import JobWatcher
from airflow_provider_azbatch.watching.state import WatchState


def _subscribed(jobs: int = 1) -> tuple[AccountView, list[Subscription]]:
    view = AccountView("conn")
    view.healthy = True
    subs = [Subscription(view, f"j{i}", 1.0) for i in range(jobs)]
    for sub in subs:
        view._subscribers.setdefault(sub.job_id, []).append(sub)
        view._count += 1
    return view, subs


def _waiting(job_id: str = "j0") -> JobWatcher:
    state = WatchState(job_id=job_id, expected_tasks=1000, pool_id="p")
    state.counts = {"active": 1000, "running": 0, "completed": 0, "succeeded": 0, "failed": 0}
    return JobWatcher(state, lambda task, line: None, stream_output=False, poll_interval=1.0)


def test_a_waiting_job_whose_counts_do_not_move_backs_off_to_a_minute():
    _, (sub,) = _subscribed()
    watcher = _waiting()
    every = sub.job_look_interval()
    cadence = []
    for _ in range(8):
        every = look_after(sub, watcher, every, looked_at=0.0)
        cadence.append(every)
    assert cadence == [2.0, 4.0, 8.0, 16.0, 32.0, MAX_LOOK_SECONDS, MAX_LOOK_SECONDS, MAX_LOOK_SECONDS]
    # In its first minute: looks at 0, 2, 6, 14 and 30 s (and the view's listing every poll).


def test_a_job_that_moved_or_streams_looks_at_the_shortest_interval():
    _, (sub,) = _subscribed()
    watcher = _waiting()
    watcher.last_look_moved = True
    assert look_after(sub, watcher, 32.0, looked_at=0.0) == 1.0
    watcher.last_look_moved = False
    sub.view.healthy = False  # the view cannot list the account: nothing reports the job's changes
    assert look_after(sub, watcher, 32.0, looked_at=0.0) == 1.0


def test_jobs_rest_on_their_pools_listing_once_the_pulse_covers_them():
    view, subs = _subscribed(PULSE_MIN_JOBS)
    view.pools.observe(view.pools.pool("p"), [], now=100.0)  # the pool listed before their looks
    cadences = [look_after(sub, _waiting(sub.job_id), 1.0, looked_at=101.0) for sub in subs]
    # Until PULSE_MIN_JOBS rest on the pool it has no pulse: they back off; then they rest.
    assert cadences[:-1] == [2.0] * (PULSE_MIN_JOBS - 1)
    # Each at its own point between one and two REST_LOOK_SECONDS: they do not look together.
    rests = [cadences[-1]] + [look_after(sub, _waiting(sub.job_id), 2.0, looked_at=102.0) for sub in subs[:-1]]
    assert all(REST_LOOK_SECONDS <= rest < 2 * REST_LOOK_SECONDS for rest in rests)
    assert len(set(rests)) == PULSE_MIN_JOBS
    assert view.pools.pool("p").covered == PULSE_MIN_JOBS


def test_a_spot_job_backs_off_but_never_rests():
    view, (sub,) = _subscribed()
    watcher = _waiting()
    watcher.state.spot = {}
    view.pools.observe(view.pools.pool("p"), [], now=0.0)
    assert look_after(sub, watcher, 1.0, looked_at=1.0) == 2.0
    assert view.pools.pool("p").rested == 0
