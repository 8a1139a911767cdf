"""The account view at scale, on pools that have nodes: a triggerer (re)starting with N deferred jobs, and how soon
each trigger fires after its job ends.

    python bench/view.py                 # the matrix of issue 39 (about 20 minutes on 2 cores)
    python bench/view.py --quick         # a smoke run (about 3 minutes; written to bench/.out only)
    python bench/view.py --only 1000x1   # scenarios whose name contains this (repeatable; bench/.out only)

Each scenario runs in a fresh subprocess against the synthetic endpoint (``bench/synthetic_batch.py``: accounts
whose pools have nodes and task slots, each node's ``recentTasks`` changing as tasks start and end), as
``bench/run.py`` runs its own (greenback portal and log context per trigger, logs rendered as the triggerer's
runner sends them): N ``AzureBatchJobTrigger`` s (``stream_output=False``, 2 tasks a job) over 1 to 10 accounts (a
connection each), each job on one of the account's pools, **all started at once** as after a triggerer restart.
The jobs end on the service one after the other over ``ENDS_SPREAD`` s from ``first_end`` s after the start
(20 s; 90 s in one row). Measured (columns of issue 39):

- **ends within poll + 1 s (delay p99)**: for every job, from its end on the service to its trigger's event; a
  trigger that fired an error or did not fire counts as late;
- **trigger CPU**: the trigger process's own CPU time over the first 5 s, and from 5 s to the last event, in % of
  one core;
- **requests/s from 5 s on**: every Batch request (all accounts) from 5 s to the last event;
- **loop lag p99** over the whole run (a task sleeping 50 ms);
- **node listings per pool**: first pages of List Nodes per pool per 5 s (per 10 s where the listings are
  refused: 403 or 404), the mean over the run and the most in any 5 s (10 s) of one pool;
- **tasks**: the triggers' events (``done`` is a task that succeeds as its job did).

The "waiting" row is one job of 1,000 tasks waiting behind a busy pool (4 nodes of 256 slots, all taken by
another job for 60 s): its requests per poll over those 60 s (the view's listing included), and how long after
its first task started its trigger logged the job's progress with a task running.

"view" is the trigger with ``[azbatch] account_view = True`` (the default), "per-job" with ``account_view =
False``. The table goes to stdout and, after a full run, to ``bench/view-results.md`` (written whole, stamped:
``bench/results_file.py``); details to ``bench/.out/view-results.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import results_file  # noqa: E402
import run as harness  # noqa: E402  (bench/run.py: the endpoint, the log channel, the helpers)
from synthetic_pools import pool_for  # noqa: E402

fmt = harness.cell

RESULTS = HERE / "view-results.md"
FIRST_END = 20.0  # the first job ends this long after the triggers start...
ENDS_SPREAD = 40.0  # ... and the others one after the other over this many seconds
STARTUP = 5.0  # the start-up's CPU is measured over this long; requests/s and CPU after it
TASKS = 2  # tasks a job (all running: the pools have slots for every one)
WAIT_SECONDS = 60.0  # the waiting row: the busy pool frees its slots after this long
HOME = tempfile.mkdtemp(prefix="bench-view-airflow-")
PROGRESS = re.compile(rb"Batch job ([\w.-]+): (\d+) active, (\d+) running")


def scenario(
    jobs: int,
    accounts: int = 1,
    trigger: str = "view",
    pools: int = 1,
    nodes: int = 10,
    first_end: float = FIRST_END,
    fail: str | None = None,
    interval: float = 1.0,
) -> dict[str, Any]:
    label = f"{jobs}x{accounts}" + (f"-{pools}pools" if pools > 1 else "")
    label += f"-{fail}" if fail else ""
    label += f"-end{first_end:g}s" if first_end != FIRST_END else ""
    return {
        "name": f"{trigger}-{label}",
        "kind": "ends",
        "trigger": trigger,
        "jobs": jobs,
        "tasks": TASKS,
        "accounts": accounts,
        "pools": pools,
        "nodes": nodes,
        "nodes_fail": fail,
        "first_end": first_end,
        "interval": interval,
    }


def waiting(interval: float = 1.0) -> dict[str, Any]:
    """One deferred job of 1,000 tasks waiting behind a busy pool (see the module docstring)."""
    return {
        "name": "view-waiting-1000-tasks",
        "kind": "waiting",
        "trigger": "view",
        "jobs": 1,
        "tasks": 1000,
        "accounts": 1,
        "pools": 1,
        "nodes": 4,
        "slots": 256,
        "busy": {"tasks": 1024, "end": WAIT_SECONDS},
        "nodes_fail": None,
        "first_end": WAIT_SECONDS + 15,
        "interval": interval,
    }


def matrix(quick: bool, scale: float = 1.0) -> list[dict[str, Any]]:
    """The scenarios of issue 39; ``scale``: their job counts times this (a smaller run while developing)."""
    if quick:
        return [scenario(100), scenario(120, 3), scenario(100, fail="403"), waiting()]

    def jobs(count: int) -> int:
        return max(1, round(count * scale))

    return [
        scenario(jobs(1000)),
        scenario(jobs(3000), 3),
        scenario(jobs(10000), 10, pools=10, nodes=50),
        scenario(jobs(1000), fail="403"),
        scenario(jobs(1000), fail="404"),
        scenario(jobs(1000), first_end=90.0),
        waiting(),
        scenario(jobs(1000), trigger="per-job"),
    ]


def account_names(spec: dict[str, Any]) -> list[str]:
    return [f"{harness.ACCOUNT}{a}" for a in range(spec["accounts"])]


class ProgressChannel(harness.Channel):
    """The log channel, noting when each job's progress line first showed a task running."""

    def __init__(self) -> None:
        super().__init__()
        self.first_running: dict[str, float] = {}

    def write(self, data: bytes) -> int:
        match = PROGRESS.search(data)
        if match is not None and int(match.group(3)) > 0:
            self.first_running.setdefault(match.group(1).decode(), time.time())
        return super().write(data)


# -- the child: one scenario in one process ---------------------------------------------------------------
async def child(spec: dict[str, Any], channel: ProgressChannel) -> dict[str, Any]:
    import aiohttp
    import psutil

    base = spec["endpoint"]
    n, interval = spec["jobs"], spec["interval"]
    accounts = account_names(spec)
    session = aiohttp.ClientSession()
    admin = harness.endpoint_admin(session, base)
    prefix = spec["name"].replace(".", "_")
    ends = [spec["first_end"], 0.0 if spec["kind"] == "waiting" else ENDS_SPREAD]
    await admin("setup", {**spec, "prefix": prefix, "accounts": accounts, "ends": ends})
    me = psutil.Process()
    start = time.time()
    events: dict[int, float] = {}
    statuses: dict[int, str] = {}
    lags: list[tuple[float, float]] = []
    watcher = asyncio.create_task(harness.loop_lag(lags))
    tasks = [asyncio.create_task(run_one(spec, prefix, j, start, events, statuses)) for j in range(n)]
    cpu0 = me.cpu_times()
    await asyncio.sleep(STARTUP)
    cpu5, stats5 = me.cpu_times(), await admin("stats?brief=1")
    load = os.getloadavg()[0]
    window: dict[str, Any] | None = None
    if spec["kind"] == "waiting":
        await asyncio.sleep(max(0.0, start + WAIT_SECONDS - time.time()))
        window = await admin("stats?brief=1")
    until = start + spec["first_end"] + ENDS_SPREAD + 4 * interval + 60
    while time.time() < until and len(events) < n:
        await asyncio.sleep(0.2)
    last = max(events.values(), default=time.time())
    cpu_end, stats_end = me.cpu_times(), await admin("stats")
    harness.say(f"{len(events)} of {n} triggers fired")
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    watcher.cancel()
    await session.close()
    return measure(spec, prefix, start, last, events, statuses, lags, (cpu0, cpu5, cpu_end), stats5, stats_end) | {
        "load1": load,
        **(waiting_figures(spec, prefix, start, window, stats_end, channel) if window is not None else {}),
    }


async def run_one(
    spec: dict[str, Any], prefix: str, j: int, start: float, events: dict[int, float], statuses: dict[int, str]
) -> None:
    """One deferred trigger, run as the triggerer's ``run_trigger`` runs it; its first event recorded."""
    import greenback
    from structlog.contextvars import bind_contextvars

    from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger
    from airflow_provider_azbatch.watching.state import WatchState

    accounts = spec["accounts"]
    pool = pool_for(j, accounts, spec["pools"])
    state = WatchState(
        job_id=f"{prefix}-{j:05d}",
        expected_tasks=spec["tasks"],
        pool_id="bench-pool" if spec["pools"] == 1 else f"bench-pool-{pool}",
    )
    trigger = AzureBatchJobTrigger(
        azbatch_conn_id=f"bench{j % accounts}",
        watch_state=state.to_json(),
        poll_interval=spec["interval"],
        deadline=start + 3600,
        stream_output=False,
        max_read_bytes=1024 * 1024,
        deferred_at=start,
    )
    await greenback.ensure_portal()
    bind_contextvars(trigger_id=j, ti_id=f"ti-{j}", dag_id="bench", task_id=f"job{j}", run_id="r", map_index=-1)
    try:
        async for event in trigger.run():
            events[j] = time.time()
            statuses[j] = str(event.payload.get("status"))
            if statuses[j] != "done":
                harness.say(f"trigger {j}: {event.payload}")
            break
    except Exception as exc:
        events[j] = time.time()
        statuses[j] = f"raised {type(exc).__name__}"
        harness.say(f"trigger {j} raised {exc!r}")


def measure(
    spec: dict[str, Any],
    prefix: str,
    start: float,
    last: float,
    events: dict[int, float],
    statuses: dict[int, str],
    lags: list[tuple[float, float]],
    cpu: tuple[Any, Any, Any],
    stats5: dict[str, Any],
    final: dict[str, Any],
) -> dict[str, Any]:
    n, interval = spec["jobs"], spec["interval"]
    ends = final["ends"]
    delays = sorted(
        events[j] - ends[f"{prefix}-{j:05d}"] if statuses.get(j) == "done" else float("inf") for j in range(n)
    )
    within = sum(1 for d in delays if d <= interval + 1.0)
    after = max(last - start - STARTUP, 1e-9)
    lag = sorted(value for _, value in lags)
    requests_after = final["requests"] - stats5["requests"]
    per = 10.0 if spec.get("nodes_fail") else 5.0
    listings = node_listings(final["node_listings"], start, last, per)
    return {
        "name": spec["name"],
        "kind": spec["kind"],
        "trigger": spec["trigger"],
        "jobs": n,
        "accounts": spec["accounts"],
        "pools": final["pools"],
        "nodes": spec["nodes"],
        "nodes_fail": spec.get("nodes_fail"),
        "first_end": spec["first_end"],
        "interval": interval,
        "within_poll_plus_1": within / n,
        "end_p50_s": statistics.median(delays) if delays else None,
        "end_p99_s": delays[min(n - 1, int(0.99 * n))] if delays else None,
        "cpu_startup": (sum(cpu[1][:2]) - sum(cpu[0][:2])) / STARTUP,
        "cpu_after": (sum(cpu[2][:2]) - sum(cpu[1][:2])) / after,
        "requests_per_s_after": requests_after / after,
        "ops_after": {
            op: counts[0] - stats5["ops"].get(op, [0, 0])[0]
            for op, counts in sorted(final["ops"].items())
            if counts[0] - stats5["ops"].get(op, [0, 0])[0]
        },
        "lag_p99_ms": 1000 * lag[min(len(lag) - 1, int(0.99 * len(lag)))] if lag else None,
        "listings_per": per,
        **listings,
        "span_s": last - start,
        "fired": len(events),
        "statuses": {s: sum(1 for v in statuses.values() if v == s) for s in sorted(set(statuses.values()))},
    }


def node_listings(listings: list[list[Any]], start: float, last: float, per: float) -> dict[str, Any]:
    """Node listings (first pages) per pool per ``per`` seconds: the mean over the run and the most in any ``per``
    seconds of one pool; how many were refused."""
    by_pool: dict[str, list[float]] = {}
    for at, pool, _status in listings:
        by_pool.setdefault(pool, []).append(at)
    most = 0
    for times in by_pool.values():
        times.sort()
        lo = 0
        for hi, at in enumerate(times):
            while times[lo] <= at - per:
                lo += 1
            most = max(most, hi - lo + 1)
    span = max(last - start, per)
    pools = max(len(by_pool), 1)
    return {
        "listings": len(listings),
        "listings_refused": sum(1 for _, _, status in listings if status >= 400),
        "listings_mean": len(listings) / pools / (span / per),
        "listings_most": most,
    }


def waiting_figures(
    spec: dict[str, Any],
    prefix: str,
    start: float,
    window: dict[str, Any],
    final: dict[str, Any],
    channel: ProgressChannel,
) -> dict[str, Any]:
    """The waiting job: its requests per poll while it waited, and how soon its progress showed a task running."""
    polls = WAIT_SECONDS / spec["interval"]
    job_id = f"{prefix}-00000"
    started = final["first_starts"].get(job_id)
    seen = channel.first_running.get(job_id)
    return {
        "waiting_requests_per_poll": window["requests"] / polls,
        "waiting_ops": {op: counts[0] for op, counts in sorted(window["ops"].items())},
        "start_seen_after_s": seen - started if seen is not None and started is not None else None,
    }


def child_main(spec: dict[str, Any]) -> None:
    from airflow.sdk.log import configure_logging

    channel = ProgressChannel()
    configure_logging(json_output=True, output=channel, sending_to_supervisor=True)  # type: ignore[arg-type]
    try:
        result = asyncio.run(child(spec, channel))
    except BaseException:
        import traceback

        traceback.print_exc(file=sys.__stderr__)
        raise SystemExit(1) from None
    print("RESULT " + json.dumps(result), flush=True)


# -- the parent -----------------------------------------------------------------------------------------
def connections(spec: dict[str, Any], endpoint: str) -> dict[str, str]:
    env = {}
    for a, account in enumerate(account_names(spec)):
        ours = {"conn_type": "azbatch", "login": account, "password": harness.KEY, "extra": {"account_url": endpoint}}
        env[f"AIRFLOW_CONN_BENCH{a}"] = json.dumps(ours)
    return env


def run_scenario(spec: dict[str, Any], endpoint: str, endpoint_pid: int) -> dict[str, Any] | None:
    env = {
        **os.environ,
        **connections(spec, endpoint),
        "AIRFLOW_HOME": HOME,
        "PYTHONWARNINGS": "ignore",
        "AIRFLOW__AZBATCH__MIN_DEFERRAL_SECONDS": "0",
        "AIRFLOW__AZBATCH__ACCOUNT_VIEW": "False" if spec["trigger"] == "per-job" else "True",
    }
    payload = {**spec, "endpoint": endpoint, "endpoint_pid": endpoint_pid}
    return harness.child_result(__file__, payload, env, harness.OUT / f"view-{spec['name']}.log")


def describe(r: dict[str, Any]) -> str:
    if r["kind"] == "waiting":
        return "1 job of 1,000 tasks waiting 60 s behind a busy pool (4 nodes x 256 slots)"
    accounts = f"{r['accounts']} account{'s' if r['accounts'] > 1 else ''}"
    pools = f"{r['pools']} pools of {r['nodes']} nodes" if r["pools"] > 1 else f"1 pool of {r['nodes']} nodes"
    text = f"{r['jobs']:,} jobs, {accounts}, {pools}"
    if r["nodes_fail"] == "403":
        text += ", node listings refused (403)"
    elif r["nodes_fail"] == "404":
        text += ", node listings 404 (pool gone)"
    if r["first_end"] != FIRST_END:
        text += f", first end {r['first_end']:g} s after the start"
    return text


def table(results: list[dict[str, Any]]) -> str:
    head = (
        "| trigger | scenario | ends within poll + 1 s (delay p99) | trigger CPU, first 5 s / after | "
        "requests/s from 5 s on | loop lag p99 | node listings per pool (per 5 s, or 10 s refused): mean / most | "
        "tasks |\n|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for r in results:
        name = "**view**" if r["trigger"] == "view" else r["trigger"]
        p99 = r["end_p99_s"]
        ends = f"{100 * r['within_poll_plus_1']:.1f} % ({'never' if p99 == float('inf') else fmt(p99, '.2f', ' s')})"
        if r["kind"] == "waiting":
            seen = fmt(r.get("start_seen_after_s"), ".1f", " s")
            ends += f"; {r['waiting_requests_per_poll']:.2f} requests a poll while it waits; a start seen {seen} after"
        listings = f"{r['listings_mean']:.2f} / {r['listings_most']} per {r['listings_per']:g} s"
        if r["listings_refused"]:
            listings += f" ({r['listings_refused']} refused of {r['listings']})"
        else:
            listings += f" ({r['listings']} in {r['span_s']:.0f} s)"
        statuses = ", ".join(f"{count} {status}" for status, count in r["statuses"].items())
        rows.append(
            f"| {name} | {describe(r)} | {ends} | {100 * r['cpu_startup']:.0f} % / {100 * r['cpu_after']:.0f} % | "
            f"{r['requests_per_s_after']:.1f} | {fmt(r['lag_p99_ms'], '.0f', ' ms')} | {listings} | {statuses} |"
        )
    return head + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0, help="job counts times this (bench/.out only)")
    args = parser.parse_args()
    if args.child:
        child_main(json.loads(args.child))
        return
    started, load = time.time(), os.getloadavg()
    saved = harness.OUT / "view-results.json"
    results = harness.run_matrix(matrix(args.quick, args.scale), args.only, args.port, run_scenario, "ops_after", saved)
    body = (
        "Every trigger starts at once (a triggerer restart), poll 1 s, `stream_output=False`, 2 tasks a job; "
        f"the jobs end one after the other over {ENDS_SPREAD:g} s from the first end ({FIRST_END:g} s after the "
        "start unless the row says otherwise). The endpoint answers every Batch request 10 ms late.\n\n"
        + table(results)
    )
    target = results_file.write(RESULTS, started, load, body, full=not (args.only or args.quick or args.scale != 1.0))
    print((HERE / target).read_text())


if __name__ == "__main__":
    main()
