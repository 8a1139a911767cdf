"""Two triggerers on PostgreSQL, and one of them lost: a real deployment (API server, scheduler, DAG processor,
LocalExecutor, two triggerers) runs 41 deferred Batch jobs streaming numbered lines, while the test

1. SIGKILLs the triggerer that holds a quota wait (and about half the jobs): its triggers resume on the other;
2. starts a third triggerer, then freezes the second (SIGSTOP) for longer than the health-check threshold, so
   that the third takes its triggers while it is still alive (a redistribution), and thaws it;
3. marks one deferred task failed;
4. stops the second, starts a fourth, and stops the third gracefully (SIGTERM): its triggers go to the fourth.

What each step must (not) do is asserted from the task logs as the REST API serves them (every line shown,
how many twice, and when) and from the local Batch service's request log (each job polled by one trigger at
a time; terminate requests). The whole scenario runs once (the module's ``scenario`` fixture); each test
checks one promise. The measured numbers are printed in the terminal summary (section "measured").
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_azbatch import compat
from airflow_provider_azbatch.submission.job_ids import default_job_id
from local_azure_batch.testing import run_local_batch_service
from tests.airflow_helpers import azbatch_connection_json
from tests.airflow_run.cluster import AirflowCluster, _free_port
from tests.airflow_run.dags.azbatch_two_triggerers import STREAMING_JOBS
from tests.airflow_run.postgres import postgres_bin_dir, run_postgres
from tests.helpers import wait_until
from tests.measured import report

pytestmark = pytest.mark.airflow_run

DAG_ID = "azbatch_many_deferred"
QUOTA_DAG_ID = "azbatch_quota_wait"
WARM_UP_DAG_ID = "azbatch_warm_up"
DOOMED = "doomed"
# Each job: a numbered line every PAUSE seconds until the test, its steps over, creates the stop file (at most
# LINES: a test that died leaves no job running long), then "lines N".
LINES = 2000
PAUSE = 0.4
# The deployment's settings (production defaults in brackets): polls every POLL s [5], output positions
# checkpointed at most every CHECKPOINT s [30]; Airflow's own defaults for the triggerers: a heartbeat every
# HEARTBEAT s, taken for dead after HEALTH_CHECK s without one. Not less: a triggerer's first use of its
# execution API (its first XCom or connection) keeps it from heartbeating for 5-8 s, 20 s on a busy 2-core
# machine, and a threshold below that hands its triggers to another triggerer although it is alive.
POLL = 1
CHECKPOINT = 5
HEARTBEAT = 5
HEALTH_CHECK = 30
QUOTA_RETRY = 20
PER_LOOP = 10
# The trigger writes no checkpoint in the first 10 s after the task deferred (triggers/checkpoints.py FRESH_SECONDS).
FRESH = 10
# What a trigger back from a stall logs when it finds that another trigger took its job over (triggers/handover.py).
STANDS_BY = "This triggerer stalled for "
CANCELLED = "Trigger cancelled by user action"
# Airflow's record of a cancellation can be lost (the triggerer closes a trigger's log file when its runner reports
# the trigger finished, and drops the records still on their way): a trigger whose log has been silent this long
# (it logs every poll while it runs) has been dropped too.
SILENT = 15
LINE = re.compile(r"^\[main\] line (\d+)$")
TOTAL = re.compile(r"^\[main\] lines (\d+)$")
JOB_TRIGGER = "airflow_provider_azbatch.triggers.job.AzureBatchJobTrigger"
WAIT_TRIGGER = "airflow_provider_azbatch.triggers.wait.AzureBatchWaitTrigger"
ROOT = Path(__file__).resolve().parent
# How many lines a handover shows twice is bounded by the output checkpoints, which 3.0 and 3.1 do not keep (there
# a triggerer's triggers show again the output since their task deferred: docs/reference/airflow-lines.md, note 4);
# that no line is lost and that a handover kills no job hold on every line.
needs_checkpoints = pytest.mark.skipif(
    not compat.TRIGGER_XCOM, reason=f"Airflow {compat.AIRFLOW_VERSION} keeps no output checkpoint (note 4)"
)


@pytest.fixture(scope="module")
def postgres():
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        pytest.skip(
            "PostgreSQL is not installed (Airflow needs it for two triggerers): "
            "apt-get install postgresql (.ci/run does)"
        )
    with run_postgres(bin_dir, _free_port()) as server:
        yield server


@pytest.fixture(scope="module")
def batch():
    with run_local_batch_service(extra_args=["--quiet"]) as service:
        yield service


@pytest.fixture(scope="module")
def batch_client(batch):
    from azure.batch import BatchClient
    from azure.core.credentials import AzureNamedKeyCredential

    client = BatchClient(batch.url, AzureNamedKeyCredential(batch.account_name, batch.account_key))
    yield client
    client.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, batch, postgres):
    dags = tmp_path_factory.mktemp("dags")
    shutil.copy(ROOT / "dags" / "azbatch_two_triggerers.py", dags)
    cluster = AirflowCluster(
        tmp_path_factory.mktemp("airflow-two-triggerers"),
        dags,
        {
            "AIRFLOW_CONN_AZBATCH_DEFAULT": azbatch_connection_json(batch),
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": str(HEARTBEAT),
            "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": str(HEALTH_CHECK),
            # A triggerer takes at most this many triggers per look (Airflow's default 50 would let the first of
            # two new triggerers take all 41): Airflow's advice for several triggerers, well below capacity.
            "AIRFLOW__TRIGGERER__MAX_TRIGGER_TO_SELECT_PER_LOOP": str(PER_LOOP),
            "AIRFLOW__AZBATCH__CHECKPOINT_INTERVAL": str(CHECKPOINT),
            "AIRFLOW__AZBATCH__QUOTA_RETRY_SECONDS": str(QUOTA_RETRY),
            # Deferred tasks hold no worker slot: 4 run (submit, resume) at once, as many as 2 cores bear.
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "64",
        },
        database_url=postgres.url,
        # The API server reads the triggerers' logs from the log folder they share; frozen, one would not serve.
        serve_trigger_logs=False,
    )
    try:
        cluster.start(triggerers=1)
        for dag_id in (DAG_ID, QUOTA_DAG_ID, WARM_UP_DAG_ID):
            cluster.wait_for_dag(dag_id)
        _warm_up(cluster, "triggerer", _start_warm_up(cluster))
        cluster.start_triggerer("triggerer-2")
        # Only the second one takes the next trigger: the first is frozen until it has. Not longer (the second's
        # warm-up takes 20-30 s on a busy machine): frozen in the middle of a transaction past the database's
        # idle-in-transaction timeout, the first would lose its session and exit when thawed.
        cluster.freeze_component("triggerer")
        try:
            run_id = _start_warm_up(cluster)
            wait_until(
                lambda: _warm_up_holder(cluster, run_id) is not None,
                timeout=120,
                interval=0.5,
                what="the warm-up's trigger taken by triggerer-2",
            )
        finally:
            cluster.thaw_component("triggerer")
        _warm_up(cluster, "triggerer-2", run_id)
        yield cluster
    finally:
        cluster.stop()


def _start_warm_up(cluster: AirflowCluster) -> str:
    """A run of the warm-up DAG: its trigger starts the execution API of the triggerer that takes it."""
    return cluster.trigger(WARM_UP_DAG_ID)


def _warm_up_holder(cluster: AirflowCluster, run_id: str) -> int | None:
    """The triggerer job running the warm-up's trigger (None: none yet)."""
    return (cluster.task_instance(WARM_UP_DAG_ID, run_id, "warm_up").get("triggerer_job") or {}).get("id")


def _warm_up(cluster: AirflowCluster, triggerer: str, run_id: str) -> None:
    """Wait for the warm-up run, whose trigger ``triggerer`` ran (see the warm-up DAG)."""
    cluster.wait_for_success(WARM_UP_DAG_ID, run_id, timeout=120, interval=0.5)
    task_dir = cluster.home / "logs" / f"dag_id={WARM_UP_DAG_ID}" / f"run_id={run_id}" / "task_id=warm_up"
    assert [path.name for path in task_dir.glob("attempt=1.log.trigger.*")] == [
        f"attempt=1.log.trigger.{cluster.triggerer_jobs[triggerer]}.log"
    ]


def _seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


@dataclass
class Shown:
    """One task's streamed lines as its log shows them: line number -> the times it was shown."""

    times: dict[int, list[float]]
    entries: list[dict[str, Any]]
    total: int | None  # the job's last line: how many it printed

    @classmethod
    def of(cls, entries: list[dict[str, Any]]) -> Shown:
        times: dict[int, list[float]] = {}
        total = None
        for entry in entries:
            event = str(entry.get("event", ""))
            match = LINE.match(event)
            if match and entry.get("timestamp"):
                times.setdefault(int(match.group(1)), []).append(_seconds(entry["timestamp"]))
            if counted := TOTAL.match(event):
                total = int(counted.group(1))
        return cls({number: sorted(at) for number, at in times.items()}, entries, total)

    def repeats_between(self, start: float, end: float) -> int:
        """Lines shown once more (a second, third... time) between ``start`` and ``end``."""
        return sum(1 for at in self.times.values() for again in at[1:] if start <= again < end)

    def first_line_after(self, when: float) -> float | None:
        """When the first line was shown by a trigger started after ``when`` (the one that took over)."""
        starts = [
            _seconds(e["timestamp"])
            for e in self.entries
            if str(e.get("event", "")).startswith("trigger ")
            and str(e.get("event", "")).endswith(" starting")
            and _seconds(e["timestamp"]) >= when
        ]
        if not starts:
            return None
        start = min(starts)
        later = [at for times in self.times.values() for at in times if at >= start]
        return min(later) if later else None


@dataclass
class Scenario:
    run_id: str
    quota_run_id: str
    job_ids: dict[str, str]  # task key ("stream/3", "doomed") -> Batch job id
    killed: str  # the triggerer component SIGKILLed
    times: dict[str, float] = field(default_factory=dict)
    # Which tasks each step moved: task key -> triggerer job id before the step.
    held_at_kill: dict[str, int] = field(default_factory=dict)
    held_at_freeze: dict[str, int] = field(default_factory=dict)
    held_at_stop: dict[str, int] = field(default_factory=dict)
    # For each job the frozen triggerer held: when, back, it stood by (it found the job taken over), when Airflow
    # cancelled its trigger (where that record reached the task's log), and how many lines it showed after it
    # stood by (none: taken at the end).
    stood_by: dict[str, float] = field(default_factory=dict)
    survivor_exited: bool = False
    cancelled: dict[str, float] = field(default_factory=dict)
    shown_standing_by: dict[str, int] = field(default_factory=dict)
    quota_wait_holder: int = 0
    triggerer_jobs: dict[str, int] = field(default_factory=dict)
    states: dict[str, str | None] = field(default_factory=dict)
    quota_state: str | None = None
    shown: dict[str, Shown] = field(default_factory=dict)
    quota_log: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    duration: float = 0.0


def _key(ti: dict[str, Any]) -> str:
    return f"{ti['task_id']}/{ti['map_index']}" if ti["map_index"] >= 0 else ti["task_id"]


def _latest_heartbeat(cluster: AirflowCluster, job_id: int) -> float:
    jobs = cluster.api("GET", "/jobs?job_type=TriggererJob&job_state=running&limit=100")["jobs"]
    return _seconds(next(job["latest_heartbeat"] for job in jobs if job["id"] == job_id))


def _holders(cluster: AirflowCluster, run_id: str) -> dict[str, int | None]:
    """Each deferred task -> the triggerer job running its trigger (None: none yet)."""
    return {
        _key(ti): (ti.get("triggerer_job") or {}).get("id")
        for ti in cluster.task_instances(DAG_ID, run_id)
        if ti["state"] == "deferred"
    }


def _task_dir(key: str) -> str:
    return key.split("/")[0] + (f"/map_index={key.split('/')[1]}" if "/" in key else "")


def _logged_since(cluster: AirflowCluster, run_id: str, key: str, job: int, since: float, *events: str) -> bool:
    """Whether the triggerer ``job`` logged, for the task, a line after ``since`` (one of ``events``, or any
    streamed line). Read from its own log file: what a step waits for (the assertions read the REST API)."""
    path = cluster.trigger_log(DAG_ID, run_id, _task_dir(key), job)
    if not path.exists():
        return False
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        event = str(entry.get("event", ""))
        if (any(event.startswith(e) for e in events) if events else LINE.match(event)) and _seconds(
            entry["timestamp"]
        ) > since:
            return True
    return False


def _trigger_entries(cluster: AirflowCluster, run_id: str, key: str, job: int) -> list[tuple[float, str]]:
    """What the triggerer ``job`` logged for the task: (time, event), from its own log file."""
    path = cluster.trigger_log(DAG_ID, run_id, _task_dir(key), job)
    if not path.exists():
        return []
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(_seconds(e["timestamp"]), str(e.get("event", ""))) for e in entries if e.get("timestamp")]


def _first_logged(entries: list[tuple[float, str]], since: float, event: str) -> float | None:
    return min((at for at, logged in entries if at > since and logged.startswith(event)), default=None)


def _component(cluster: AirflowCluster, job_id: int) -> str:
    return next(name for name, job in cluster.triggerer_jobs.items() if job == job_id)


@pytest.fixture(scope="module")
def scenario(cluster, batch, batch_client) -> Scenario:
    began = time.time()
    times: dict[str, float] = {}
    try:
        return _run_scenario(cluster, batch, batch_client, began, times)
    finally:  # also when a step failed: how far it got
        report("two triggerers: steps at " + ", ".join(f"{step} {at - began:.0f} s" for step, at in times.items()))


def _run_scenario(cluster, batch, batch_client, began: float, times: dict[str, float]) -> Scenario:
    from azure.batch import models as m

    stop_file = cluster.home / "stop-the-jobs"
    run_id = cluster.trigger(DAG_ID, {"lines": LINES, "pause": PAUSE, "stop_file": str(stop_file)})
    keys = [f"stream/{i}" for i in range(STREAMING_JOBS)] + [DOOMED]
    job_ids = {
        key: default_job_id(DAG_ID, key.split("/")[0], run_id, int(key.split("/")[1]) if "/" in key else -1)
        for key in keys
    }

    # Every job deferred, streaming, past the seconds in which no checkpoint is written, and checkpointed.
    def settled() -> dict[str, Any] | None:
        tis = {_key(ti): ti for ti in cluster.task_instances(DAG_ID, run_id)}
        ended = {key: ti["state"] for key, ti in tis.items() if ti["state"] in ("failed", "success", "upstream_failed")}
        assert not ended, f"tasks ended before the test could begin: {ended}"
        if set(tis) != set(keys) or any(ti["state"] != "deferred" or not ti.get("trigger") for ti in tis.values()):
            return None
        newest = max(_seconds(ti["trigger"]["created_date"]) for ti in tis.values())
        return tis if time.time() > newest + FRESH + CHECKPOINT + 2 else None

    wait_until(settled, timeout=420, interval=2, what="every task deferred and streaming")
    times["all deferred"] = time.time()
    ramp = times["all deferred"] - began

    # A quota wait, deferred (AzureBatchWaitTrigger) while the account holds as many jobs as it may.
    active = sum(1 for job in batch_client.list_jobs() if job.state == m.BatchJobState.ACTIVE)
    batch.set_quota(jobs=active)
    quota_run_id = cluster.trigger(QUOTA_DAG_ID)

    def quota_waiting() -> int | None:
        ti = cluster.task_instance(QUOTA_DAG_ID, quota_run_id, "after_quota")
        trigger = ti.get("trigger") or {}
        job = ti.get("triggerer_job") or {}
        return job.get("id") if ti["state"] == "deferred" and trigger.get("classpath") == WAIT_TRIGGER else None

    quota_holder = wait_until(quota_waiting, timeout=120, interval=0.5, what="the quota wait deferred")
    killed = _component(cluster, quota_holder)
    survivor = next(name for name in cluster.triggerer_jobs if name != killed)
    held = _holders(cluster, run_id)
    assert all(held.values()), held
    # The crash must move jobs. Usually each triggerer holds some; a triggerer that was slow to heartbeat while the
    # tasks deferred (a busy machine) may hold none: then the crash moves them all, and no job stays put.
    assert Counter(held.values())[quota_holder] > 0, f"the triggerer with the quota wait holds no job: {held}"
    scenario = Scenario(run_id, quota_run_id, job_ids, killed, times, quota_wait_holder=quota_holder)
    scenario.held_at_kill = {key: job for key, job in held.items() if job is not None}

    # 1. A crash: the other triggerer takes over once the heartbeat is older than the threshold.
    survivor_job = cluster.triggerer_jobs[survivor]
    moved = [key for key, job in scenario.held_at_kill.items() if job == quota_holder]
    scenario.times["last heartbeat"] = _latest_heartbeat(cluster, quota_holder)
    scenario.times["kill"] = cluster.kill_component(killed)
    batch.set_quota(jobs=None)  # the quota wait's next attempt gets through
    wait_until(
        lambda: all(_logged_since(cluster, run_id, key, survivor_job, times["kill"]) for key in moved),
        timeout=HEALTH_CHECK * 3,
        interval=1,
        what=f"{killed}'s jobs showing output from {survivor}",
    )
    scenario.times["failed over"] = time.time()

    # 2. A redistribution: two new triggerers start (as an orchestrator replaces the lost one), the survivor is
    # frozen past the health-check threshold, the new ones take its triggers, and the survivor comes back
    # (still running them, until its next look at the database).
    third_job = cluster.start_triggerer("triggerer-3")
    fourth_job = cluster.start_triggerer("triggerer-4")
    scenario.held_at_freeze = {key: job for key, job in _holders(cluster, run_id).items() if job is not None}
    scenario.times["freeze"] = cluster.freeze_component(survivor)

    def taken_over() -> bool:
        held = _holders(cluster, run_id)
        return set(held.values()) <= {third_job, fourth_job} and all(
            _logged_since(cluster, run_id, key, held[key], times["freeze"]) for key in held
        )

    wait_until(taken_over, timeout=HEALTH_CHECK * 4, interval=1, what=f"{survivor}'s jobs showing output elsewhere")
    scenario.times["thaw"] = cluster.thaw_component(survivor)

    # Back, it finds each job it lost checkpointed further by the new trigger and stands by until Airflow cancels
    # its trigger (and calls its on_kill as for a user's kill, Airflow 3.3); or Airflow cancels it first. Or it
    # exits: frozen in the middle of a database transaction, its session was ended by PostgreSQL meanwhile
    # (idle_in_transaction_session_timeout, see postgres.py), and Airflow's triggerer does not survive that.
    lost = [key for key, job in scenario.held_at_freeze.items() if job == survivor_job]
    dropped = (STANDS_BY, CANCELLED, "trigger completed")

    def dropped_by_survivor() -> bool:
        if cluster.exited(survivor):
            scenario.survivor_exited = True
            return True
        silent_since = time.time() - SILENT
        for key in lost:
            if _logged_since(cluster, run_id, key, survivor_job, times["thaw"], *dropped):
                continue
            entries = _trigger_entries(cluster, run_id, key, survivor_job)
            if silent_since < times["thaw"] or max((at for at, _ in entries), default=0.0) > silent_since:
                return False
        return True

    wait_until(
        dropped_by_survivor,
        timeout=HEALTH_CHECK * 4,
        interval=1,
        what=f"{survivor} standing by for, or dropping, the triggers it lost",
    )

    # 3. A user marks a deferred task failed.
    scenario.times["mark failed"] = time.time()
    cluster.mark(DAG_ID, run_id, DOOMED, "failed")
    wait_until(
        lambda: batch_client.get_job(job_ids[DOOMED]).state == m.BatchJobState.COMPLETED,
        timeout=60,
        interval=0.5,
        what="the marked task's Batch job terminated",
    )

    # 4. A graceful stop: the third triggerer's triggers go to the fourth. Not to the survivor, stopped first: a
    # triggerer given back a trigger it ran before starts its log file of it anew (Airflow 3.3.2 opens it "wb"),
    # and what it had shown of the task would be gone from the task's log (see docs/howto/several-triggerers.md).
    cluster.stop_component(survivor)
    scenario.held_at_stop = {key: job for key, job in _holders(cluster, run_id).items() if job == third_job}
    scenario.times["stop"] = time.time()
    cluster.stop_component("triggerer-3")
    wait_until(
        lambda: all(_logged_since(cluster, run_id, key, fourth_job, times["stop"]) for key in scenario.held_at_stop),
        timeout=HEALTH_CHECK * 4,
        interval=1,
        what="triggerer-3's jobs showing output from triggerer-4",
    )
    scenario.times["stopped"] = time.time()

    stop_file.touch()  # the steps are over: the jobs end

    def finished() -> bool:
        return cluster.run_state(DAG_ID, run_id) in ("success", "failed") and cluster.run_state(
            QUOTA_DAG_ID, quota_run_id
        ) in ("success", "failed")

    wait_until(finished, timeout=300, interval=2, what="both DAG runs finished")
    scenario.duration = time.time() - began
    for key in lost:
        entries = _trigger_entries(cluster, run_id, key, survivor_job)
        if (stood := _first_logged(entries, times["thaw"], STANDS_BY)) is not None:
            scenario.stood_by[key] = stood
            scenario.shown_standing_by[key] = sum(1 for at, event in entries if at > stood and LINE.match(event))
        if (cancelled := _first_logged(entries, times["thaw"], CANCELLED)) is not None:
            scenario.cancelled[key] = cancelled
    scenario.triggerer_jobs = dict(cluster.triggerer_jobs)
    for ti in cluster.task_instances(DAG_ID, run_id):
        key = _key(ti)
        scenario.states[key] = ti["state"]
        map_index = int(key.split("/")[1]) if "/" in key else -1
        scenario.shown[key] = Shown.of(cluster.task_log_entries(DAG_ID, run_id, key.split("/")[0], map_index=map_index))
    scenario.quota_state = cluster.task_state(QUOTA_DAG_ID, quota_run_id, "after_quota")
    scenario.quota_log = cluster.task_log_entries(QUOTA_DAG_ID, quota_run_id, "after_quota")
    scenario.requests = batch.request_log(
        jobs=list(job_ids.values()), operations=["Jobs_GetJobTaskCounts", "Jobs_TerminateJob"]
    )
    times["all done"] = time.time()
    report(
        f"two triggerers: {len(keys)} deferred jobs of a line every {PAUSE} s; all deferred after "
        f"{ramp:.0f} s; scenario {scenario.duration:.0f} s (poll {POLL} s, checkpoint_interval {CHECKPOINT} s, "
        f"heartbeat {HEARTBEAT} s, health check threshold {HEALTH_CHECK} s, {PER_LOOP} triggers taken per look)"
    )
    return scenario


STREAMED = [f"stream/{i}" for i in range(STREAMING_JOBS)]


def test_every_task_reaches_the_state_it_deserves(scenario):
    assert {key: scenario.states[key] for key in STREAMED} == dict.fromkeys(STREAMED, "success")
    assert scenario.states[DOOMED] == "failed"
    assert scenario.quota_state == "success"


def test_no_line_is_lost_in_any_task_log(scenario):
    # Each job's last line says how many it printed (those the stop file ended; none reached the cap).
    totals = {key: scenario.shown[key].total for key in STREAMED}
    assert all(total is not None and 0 < total < LINES for total in totals.values()), totals
    lost = {key: sorted(set(range(1, totals[key] + 1)) - set(scenario.shown[key].times)) for key in STREAMED}
    assert {key: missing for key, missing in lost.items() if missing} == {}


def _repeats(scenario: Scenario, start: str, end: str, keys: list[str]) -> dict[str, int]:
    times = scenario.times
    return {key: scenario.shown[key].repeats_between(times[start], times.get(end, float("inf"))) for key in keys}


@needs_checkpoints
def test_a_crash_repeats_at_most_a_checkpoint_intervals_worth_of_lines(scenario):
    moved = [key for key in STREAMED if scenario.held_at_kill.get(key) == scenario.quota_wait_holder]
    others = [key for key in STREAMED if key not in moved]
    repeats = _repeats(scenario, "kill", "freeze", moved)
    # Lines shown after the last checkpoint: one interval's worth, and what the poll after it showed.
    bound = int((CHECKPOINT + POLL) / PAUSE) + 1
    report(
        f"SIGKILL of a triggerer: {len(moved)} jobs moved; lines shown twice per job: max {max(repeats.values())}, "
        f"median {statistics.median(repeats.values()):g}, total {sum(repeats.values())} (bound {bound})"
    )
    assert max(repeats.values()) <= bound, repeats
    # The other triggerer's jobs, and every job before the crash, showed each line once.
    assert sum(_repeats(scenario, "kill", "freeze", others).values()) == 0
    assert all(scenario.shown[key].repeats_between(0, scenario.times["kill"]) == 0 for key in STREAMED)


def test_a_crashed_triggerers_triggers_resume_after_the_health_check_threshold(scenario):
    moved = [key for key in STREAMED if scenario.held_at_kill.get(key) == scenario.quota_wait_holder]
    delays = []
    for key in moved:
        first = scenario.shown[key].first_line_after(scenario.times["kill"])
        assert first is not None, f"{key}: no line shown after the crash"
        delays.append(first - scenario.times["kill"])
    # The threshold counts from the lost triggerer's last heartbeat (on a busy machine, more than a heartbeat
    # interval before the crash).
    silent = scenario.times["kill"] - scenario.times["last heartbeat"]
    lapsed = HEALTH_CHECK - silent
    report(
        f"SIGKILL of a triggerer: first resumed line {min(delays):.1f} s (min) / {statistics.median(delays):.1f} s "
        f"(median) / {max(delays):.1f} s (max) after the kill; its last heartbeat {silent:.1f} s before the kill, "
        f"health check threshold {HEALTH_CHECK} s"
    )
    # Not before the threshold has passed; then as fast as the survivor starts the triggers (each reads its
    # checkpoint through the survivor's execution API, one after the other).
    assert min(delays) >= lapsed - 1
    assert max(delays) <= lapsed + 30


@needs_checkpoints
def test_a_redistribution_repeats_at_most_two_checkpoint_intervals_worth_of_lines(scenario):
    repeats = _repeats(scenario, "freeze", "stop", STREAMED)
    # The new trigger shows again what the frozen one showed after its last checkpoint; the frozen one, back,
    # finds the new one's checkpoint further, drops what its poll in flight at the freeze read and stands by until
    # Airflow cancels it: two checkpoint intervals' worth. Unless the new one had not checkpointed yet when
    # the frozen one read: then the frozen one shows what it missed while frozen (the stall's worth).
    usual = 2 * (int((CHECKPOINT + POLL) / PAUSE) + 1)
    thaw = scenario.times["thaw"]
    bound = usual + int((thaw - scenario.times["freeze"]) / PAUSE)
    stood = sorted(at - thaw for at in scenario.stood_by.values()) or [float("nan")]
    cancelled = sorted(at - thaw for at in scenario.cancelled.values()) or [float("nan")]
    delays = [
        first - scenario.times["freeze"]
        for key in STREAMED
        if (first := scenario.shown[key].first_line_after(scenario.times["freeze"])) is not None
    ]
    report(
        f"redistribution (SIGSTOP past the threshold, then SIGCONT): lines shown twice per job: max "
        f"{max(repeats.values())}, median {statistics.median(repeats.values()):g}, total {sum(repeats.values())} "
        f"(two checkpoint intervals' worth: {usual}; with the stall's: {bound}); first line from the new "
        f"triggerer {statistics.median(delays):.1f} s (median) / {max(delays):.1f} s (max) after the freeze; the "
        f"thawed triggerer stood by for {len(scenario.stood_by)} of its jobs {statistics.median(stood):.1f} s "
        f"(median) after the thaw; Airflow cancelled its triggers {statistics.median(cancelled):.1f} s (median) / "
        f"{cancelled[-1]:.1f} s (max) after the thaw ({len(scenario.cancelled)} recorded in the task's log)"
        + ("; it exited on its thaw (its database session had been ended)" if scenario.survivor_exited else "")
    )
    assert max(repeats.values()) <= bound, repeats
    # Standing by, it showed nothing more.
    assert {key: n for key, n in scenario.shown_standing_by.items() if n} == {}


@needs_checkpoints
def test_a_graceful_stop_repeats_no_line(scenario):
    moved = [key for key in STREAMED if scenario.states[key] == "success" and key in scenario.held_at_stop]
    repeats = _repeats(scenario, "stop", "end", moved)
    delays = [
        first - scenario.times["stop"]
        for key in moved
        if (first := scenario.shown[key].first_line_after(scenario.times["stop"])) is not None
    ]
    report(
        f"SIGTERM of a triggerer: {len(moved)} jobs moved; lines shown twice: {sum(repeats.values())}; first line "
        f"from the other {statistics.median(delays):.1f} s (median) / {max(delays):.1f} s (max) after the SIGTERM"
    )
    assert moved
    assert repeats == dict.fromkeys(moved, 0)


def _most_in_a_window(times: list[float], window: float) -> tuple[int, float]:
    """The most of ``times`` (sorted) within ``window`` seconds, and when that window ends."""
    start, most, at_most = 0, 0, 0.0
    for end, at in enumerate(times):
        while times[start] < at - window:
            start += 1
        if end - start + 1 > most:
            most, at_most = end - start + 1, at
    return most, at_most


def test_each_job_is_polled_by_one_trigger_at_a_time(scenario):
    # One trigger polls a job at most once a poll interval: at most 11 task-count requests in any 10 s. Not
    # counted: the first and last 10 s of a job's requests (the task's own, submitting and resuming), and the
    # 20 s after the thaw, when the triggerer back from its stall finishes the poll it had in flight before it
    # finds that its triggers were handed over (and stands by until Airflow cancels them).
    window = 10 * POLL
    thaw = scenario.times["thaw"]
    worst: dict[str, int] = {}
    around_thaw: dict[str, int] = {}
    for key, job_id in scenario.job_ids.items():
        times = sorted(
            r["at"] for r in scenario.requests if r["job"] == job_id and r["operation"] == "Jobs_GetJobTaskCounts"
        )
        deferred = [at for at in times if times[0] + window <= at <= times[-1] - window]
        worst[key] = _most_in_a_window([at for at in deferred if not thaw <= at <= thaw + 2 * window], window)[0]
        around_thaw[key] = _most_in_a_window([at for at in deferred if thaw <= at <= thaw + 2 * window], window)[0]
    report(
        f"task-count requests per job in any {window} s while deferred: max {max(worst.values())} (one trigger "
        f"polling every {POLL} s: at most {window // POLL + 1}); in the 20 s after the thaw: max "
        f"{max(around_thaw.values())}"
    )
    assert max(worst.values()) <= window // POLL + 1, worst
    # Not two triggers polling through a whole window: a poll or a few from the one back from its stall.
    assert max(around_thaw.values()) <= window // POLL + 5, around_thaw


def test_only_the_marked_task_terminates_its_job_once(scenario):
    terminated = Counter(r["job"] for r in scenario.requests if r["operation"] == "Jobs_TerminateJob")
    assert terminated == Counter({scenario.job_ids[DOOMED]: 1})


def test_a_quota_wait_survives_the_crash(scenario):
    # The wait was deferred on the triggerer that was killed (it was chosen for that), and the task went on
    # after the crash: the wait resumed on the other triggerer and ended.
    assert scenario.quota_wait_holder == scenario.triggerer_jobs[scenario.killed]
    events = [(str(e.get("event", "")), _seconds(e["timestamp"])) for e in scenario.quota_log if e.get("timestamp")]
    assert any("is at its quota of active jobs" in event for event, _ in events), events
    cleared = [at for event, at in events if event == "[main] the quota cleared"]
    assert cleared, events
    assert cleared[0] > scenario.times["kill"]
