"""The account view's bookkeeping, the service's clock and the events the task reads back: no service."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest

from airflow_provider_azbatch.hooks.translate import job_change_of, odata_time, service_date
from airflow_provider_azbatch.model.records import JobChange
from airflow_provider_azbatch.runs.lifecycle import event_in_full
from airflow_provider_azbatch.triggers.account_view import AccountView, Subscription
from airflow_provider_azbatch.triggers.subscription import MAX_LOOK_SECONDS
from airflow_provider_azbatch.triggers.watch_events import pack_result


def _view_with(*jobs: str) -> tuple[AccountView, dict[str, Subscription]]:
    view = AccountView("conn")
    subs = {}
    for job in jobs:
        subs[job] = Subscription(view, job, 1.0)
        view._subscribers.setdefault(job, []).append(subs[job])
        view._count += 1
    return view, subs


def test_each_transition_is_reported_once_though_overlapping_looks_list_it_again():
    view, subs = _view_with("a", "b")
    view.observe([JobChange("a", "active", "t0"), JobChange("b", "completed", "t1"), JobChange("z", "completed", "t")])
    # "a" is listed for the first time and still running: its trigger looked at it when it started.
    assert (subs["a"].changed, subs["b"].changed) == (False, True)
    subs["b"].changed = False
    view.observe([JobChange("a", "active", "t0"), JobChange("b", "completed", "t1")])  # the next look overlaps
    assert (subs["a"].changed, subs["b"].changed) == (False, False)
    view.observe([JobChange("a", "terminating", "t2")])
    assert subs["a"].changed is True


def test_a_trigger_looks_at_its_job_every_poll_for_few_jobs_and_spreads_its_looks_for_many(monkeypatch):
    monkeypatch.setenv("AIRFLOW__AZBATCH__JOB_LOOKS_PER_SECOND", "20")
    assert _view_with(*"abc")[0].job_look_interval(1.0) == 1.0
    many = _view_with(*(f"j{i}" for i in range(1000)))[0]
    assert many.job_look_interval(1.0) == 50.0
    assert many.job_look_interval(5.0) == 50.0
    assert _view_with(*(f"j{i}" for i in range(5000)))[0].job_look_interval(1.0) == MAX_LOOK_SECONDS


def test_a_waiting_subscription_wakes_at_a_change_or_its_timeout():
    async def run() -> tuple[bool, bool, bool]:
        _, subs = _view_with("a")
        sub = subs["a"]
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, sub.notify)
        woken = await sub.wait(10)
        timed_out = await sub.wait(0.05)
        sub.notify()  # before the wait: not lost
        early = await sub.wait(10)
        return woken, timed_out, early

    assert asyncio.run(run()) == (True, False, True)


def test_the_service_clock_comes_from_the_date_header_and_goes_out_as_an_odata_literal():
    moment = service_date("Wed, 02 Dec 2026 07:30:05 GMT")
    assert moment == datetime(2026, 12, 2, 7, 30, 5, tzinfo=timezone.utc)
    assert odata_time(moment.replace(microsecond=123456)) == "2026-12-02T07:30:05.123Z"
    with pytest.raises(ValueError, match="no Date header"):
        service_date(None)
    change = job_change_of({"id": "j", "state": "completed", "stateTransitionTime": "2026-12-02T07:30:05.1Z"})
    assert change == JobChange("j", "completed", "2026-12-02T07:30:05.1Z")


class _TaskInstance:
    map_index = -1

    def __init__(self, stored: object) -> None:
        self.stored = stored
        self.pulled: list[dict] = []

    def xcom_pull(self, **kwargs: object) -> object:
        self.pulled.append(kwargs)
        return self.stored


def test_the_task_reads_back_what_the_trigger_left_in_xcom():
    stored = {"watch_state": {"job_id": "j"}, "lines": [["t", "[t] last"]]}
    ti = _TaskInstance(stored)
    event = {"status": "done", "job_id": "j", "result": "azbatch_watch_result"}
    assert event_in_full(event, {"ti": ti}, "train") == {"status": "done", "job_id": "j", **stored}
    assert ti.pulled == [{"task_ids": "train", "key": "azbatch_watch_result", "map_indexes": -1}]
    # An event that carries them (no task instance for the trigger, Airflow before 3.2) is read as it is.
    full = {"status": "done", "job_id": "j", "watch_state": {"job_id": "j"}}
    assert event_in_full(full, {"ti": ti}, "train") is full
    with pytest.raises(Exception, match="missing from XCom 'azbatch_watch_result'"):
        event_in_full(event, {"ti": _TaskInstance(None)}, "train")
    # Where the trigger could not write XCom (Airflow 3.0, 3.1), it carries them packed: no line shows in the log
    # of the event as text.
    packed = {"status": "done", "job_id": "j", "packed": pack_result(stored)}
    assert "[t] last" not in str(packed)
    assert event_in_full(packed, {"ti": ti}, "train") == {"status": "done", "job_id": "j", **stored}


def test_the_view_is_on_unless_switched_off(monkeypatch):
    """A trigger waits on its account's view unless [azbatch] account_view = False: then it looks at its own job
    every poll, as before 0.4."""
    import asyncio

    from airflow_provider_azbatch import config
    from airflow_provider_azbatch.triggers.account_view import OwnLooks, watch_job

    monkeypatch.delenv("AIRFLOW__AZBATCH__ACCOUNT_VIEW", raising=False)
    assert config.get_bool("account_view") is True
    monkeypatch.setenv("AIRFLOW__AZBATCH__ACCOUNT_VIEW", "False")
    looks = asyncio.run(watch_job("azbatch_default", "job-1", 5.0))
    assert isinstance(looks, OwnLooks)
    assert looks.job_look_interval() == 5.0


class _Heard:
    select = ("metadata",)
    interval = 1.0

    def __init__(self) -> None:
        self.heard: list[str] = []

    def changes(self, changes) -> None:
        self.heard += [f"{change.id}:{change.state}" for change in changes]


def test_a_listener_that_joins_with_a_since_hears_what_the_view_told_others_before():
    from airflow_provider_azbatch.triggers.account_view import Listening

    view = AccountView("conn")
    t0 = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)
    steady = _Heard()
    view.listeners.all.append(Listening(view, steady, t0))
    view.listeners.all[0].catching_up = False
    listed = [JobChange("a", "completed", "2026-12-03T12:00:05Z"), JobChange("b", "completed", "2026-12-03T12:00:09Z")]
    view.observe(listed, t0)
    assert steady.heard == ["a:completed", "b:completed"]
    # A restarted watcher joins, its watermark between the two: the look that reaches back tells it "b" again.
    restarted = _Heard()
    view.listeners.all.append(Listening(view, restarted, datetime(2026, 12, 3, 12, 0, 7, tzinfo=timezone.utc)))
    view.observe(listed, t0)
    assert restarted.heard == ["b:completed"]
    assert steady.heard == ["a:completed", "b:completed"]  # each transition once for the others
    # Caught up: from then on, each transition once for it too.
    view.observe([*listed, JobChange("c", "completed", "2026-12-03T12:00:12Z")], t0)
    assert restarted.heard == ["b:completed", "c:completed"]
    assert steady.heard == ["a:completed", "b:completed", "c:completed"]
