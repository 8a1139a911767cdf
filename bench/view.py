"""The account view at scale: deferred jobs ending on the service, and how soon each trigger fires.

    python bench/view.py            # the view's matrix, today's per-job watch and the official trigger (~12 min)
    python bench/view.py --quick    # a smoke run (about 1 minute)
    python bench/view.py --only view-1000

Each scenario runs in a fresh subprocess against the synthetic endpoint (``bench/synthetic_batch.py``), as
``bench/run.py`` runs its own (greenback portal and log context per trigger, logs rendered as the triggerer's
runner sends them): N deferred jobs over 1 or 3 accounts (a connection each), watch-only (20 running tasks per job)
or one streamed task per job (1 % of them writing 800 B/s). The triggers start spread over one poll interval; the
warm-up lasts until every trigger looked at its job once, the steady window ``STEADY`` s, then the jobs end on the
service one after the other over ``ENDS_SPREAD`` s. The "steady" rows (and ``--warm S``) warm up longer, until the
looks at the jobs have their steady cadence (``STEADY_WARM``: every job looked at twice, the quiet ones resting on
the pool pulse). Measured:

- **req/s per account** in the steady window (every Batch request, counted by the endpoint per Shared Key account;
  per operation in the JSON details, ``ops_per_s``);
- **CPU** of the trigger process in the steady window, in % of one core (its own CPU time: the machine is shared);
- **loop lag p99** over the steady window and the ends (a task sleeping 50 ms);
- **end → event**: for every job, the time from its end on the service (its ``stateTransitionTime``) to its
  trigger's event: p50, p99, max, and the share within poll interval + 1 s;
- **looks**: the view's listings per account and second x interval (ideal 1.00), or for the per-job watch its task
  counts requests per job and interval; with streamed output, the growing streams' file listings against one per
  poll interval each;
- **RSS/job**: (RSS with every trigger running - RSS before) / jobs.

"view" is ``AzureBatchJobTrigger`` with ``[azbatch] account_view = True``, "per-job" the same trigger with
``account_view = False`` (each trigger polls its job, as before the view), "official" the official
``AzureBatchTrigger``. The table goes to stdout and to ``bench/view-results.md``; details to
``bench/.out/view-results.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as harness  # noqa: E402  (bench/run.py: the endpoint, the log channel, the helpers)

fmt = harness.cell

RESULTS = HERE / "view-results.md"
WARM = 5.0  # the warm-up lasts at least this long: every trigger started and looked at its job once
WARM_LIMIT = 90.0  # and at most this long, plus the time the paced first looks take (FIRST_LOOKS_PER_SECOND)
STEADY = 20.0  # the steady window (s); then the jobs end on the service one after the other
ENDS_SPREAD = 20.0  # over this many seconds
GROWING_EVERY = 100
STEADY_WARM = 150.0  # a steady row's warm-up (s): every job looked at twice, the quiet ones resting on the pulse
HOME = tempfile.mkdtemp(prefix="bench-view-airflow-")


def scenario(
    trigger: str,
    jobs: int,
    interval: float,
    mode: str = "watch",
    accounts: int = 1,
    start: str = "spread",
    warm: float = 0.0,
) -> dict[str, Any]:
    tasks = 20 if mode == "watch" else 1
    streamed = 0 if mode == "watch" else 1
    label = f"{jobs}x{accounts}" if accounts > 1 else str(jobs)
    suffix = ("-restart" if start == "restart" else "") + ("-steady" if warm else "")
    return {
        "name": f"{trigger}-{label}-{interval:g}s-{mode}{suffix}",
        "start": start,
        "warm": warm,
        "trigger": trigger,
        "jobs": jobs,
        "accounts": accounts,
        "interval": interval,
        "mode": mode,
        "tasks": tasks,
        "streamed": streamed,
        "output": {"stdout": "lines", "stderr": "quiet"},
        "growing": [[j, 0] for j in range(jobs) if streamed and j % GROWING_EVERY == 0],
    }


def matrix(quick: bool) -> list[dict[str, Any]]:
    if quick:
        return [scenario("view", 50, 1.0), scenario("per-job", 50, 1.0), scenario("view", 60, 1.0, accounts=3)]
    # The small end: one deferred job, idle (its 20 tasks running, nothing streamed) and streaming one growing file.
    out = [scenario(trigger, 1, 1.0, mode) for mode in ("watch", "stream1") for trigger in ("view", "per-job")]
    for jobs in (100, 1000):
        for interval in (1.0, 5.0):
            out.append(scenario("view", jobs, interval))
    # The looks' steady state: measured once every job had its second look (the jobs' first looks spread over
    # jobs / job_looks_per_second seconds) and the quiet ones rest on the pool pulse.
    out.append(scenario("view", 1000, 1.0, warm=STEADY_WARM))
    out.append(scenario("view", 3000, 1.0, accounts=3))
    out.append(scenario("view", 3000, 1.0, accounts=3, start="restart"))
    out.append(scenario("view", 10000, 1.0, accounts=10, warm=STEADY_WARM + 100))
    out.append(scenario("view", 1000, 1.0, "stream1"))
    out.append(scenario("per-job", 1000, 1.0))
    out.append(scenario("per-job", 1000, 1.0, "stream1"))
    out.append(scenario("per-job", 3000, 1.0, accounts=3))
    out.append(scenario("official", 100, 1.0))
    return out


def account_names(spec: dict[str, Any]) -> list[str]:
    return [f"{harness.ACCOUNT}{a}" for a in range(spec["accounts"])]


# -- the child: one scenario in one process ---------------------------------------------------------------
async def child(spec: dict[str, Any], channel: harness.Channel) -> dict[str, Any]:
    import aiohttp
    import greenback
    import psutil
    from airflow.providers.microsoft.azure.triggers.batch import AzureBatchTrigger
    from structlog.contextvars import bind_contextvars

    from airflow_provider_azbatch.triggers.account_view import FIRST_LOOKS_PER_SECOND
    from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger
    from airflow_provider_azbatch.watching.state import WatchState

    base = spec["endpoint"]
    n, interval = spec["jobs"], spec["interval"]
    accounts = account_names(spec)
    session = aiohttp.ClientSession()
    admin = harness.endpoint_admin(session, base)

    prefix = spec["name"].replace(".", "_")
    await admin("setup", {**spec, "prefix": prefix, "rate": harness.RATE, "accounts": accounts})
    me = psutil.Process()
    rss_before = harness.rss_bytes()
    start = time.time()
    events: dict[int, float] = {}
    statuses: dict[int, str] = {}

    def make(j: int) -> Any:
        job_id = f"{prefix}-{j:05d}"
        conn = f"bench{j % len(accounts)}"
        if spec["trigger"] == "official":
            return AzureBatchTrigger(job_id, f"{conn}_official", end_time=start + 3600, poll_interval=interval)
        state = WatchState(
            job_id=job_id,
            expected_tasks=spec["tasks"],
            streamed=["t000"] if spec["streamed"] else [],
            pool_id="bench-pool",
        )
        return AzureBatchJobTrigger(
            azbatch_conn_id=conn,
            watch_state=state.to_json(),
            poll_interval=interval,
            deadline=start + 3600,
            stream_output=bool(spec["streamed"]),
            max_read_bytes=1024 * 1024,
            deferred_at=time.time(),
        )

    async def run_one(j: int, delay: float) -> None:
        await asyncio.sleep(delay)
        trigger = make(j)
        await greenback.ensure_portal()
        bind_contextvars(trigger_id=j, ti_id=f"ti-{j}", dag_id="bench", task_id=f"job{j}", run_id="r", map_index=-1)
        try:
            async for event in trigger.run():
                events[j] = time.time()
                statuses[j] = str(event.payload.get("status"))
                break
        except Exception as exc:
            events[j] = time.time()
            statuses[j] = f"raised {type(exc).__name__}"
            harness.say(f"trigger {j} raised {exc!r}")

    lags: list[tuple[float, float]] = []

    watcher = asyncio.create_task(harness.loop_lag(lags))
    # "spread": the triggers start over one poll interval, as tasks defer; "restart": all at once, as a triggerer
    # that starts (or restarts) with every deferred job of its share.
    spread = interval if spec.get("start", "spread") == "spread" else 0.0
    tasks = [asyncio.create_task(run_one(j, spread * j / n)) for j in range(n)]
    # Warm-up: every trigger started and looked at its job (at least WARM seconds, at most WARM_LIMIT). The
    # requests of each half second of it, for the first seconds' rate (a storm of first looks, or none).
    served: list[tuple[float, int]] = []
    warm_limit = WARM_LIMIT + n / FIRST_LOOKS_PER_SECOND
    while True:
        await asyncio.sleep(0.5)
        stats = await admin("stats?brief=1")
        elapsed = time.time() - start
        served.append((elapsed, sum(stats["by_account"].values())))
        if (elapsed >= WARM and stats["min_polls"] >= 1) or elapsed >= warm_limit:
            break
    startup = time.time() - start
    harness.say(f"warm-up done in {startup:.1f} s (fewest polls of a job: {stats['min_polls']})")
    # The first looks' aftermath; with --warm, until the looks' backoff has reached its steady cadence.
    await asyncio.sleep(max(2 * interval, spec.get("warm", 0.0) - (time.time() - start)))
    window_start = time.time()
    rss_steady = harness.rss_bytes()
    cpu0, stats0 = me.cpu_times(), await admin("stats")
    all0 = psutil.cpu_times()
    load = os.getloadavg()[0]
    await asyncio.sleep(spec.get("steady") or STEADY)
    cpu1, stats1 = me.cpu_times(), await admin("stats")
    all1 = psutil.cpu_times()
    steady_end = time.time()
    await admin("ends", {"first": steady_end + 0.5, "spread": ENDS_SPREAD})
    until = steady_end + ENDS_SPREAD + 4 * interval + 60
    while time.time() < until and len(events) < n:
        await asyncio.sleep(0.2)
    harness.say(f"{len(events)} of {n} triggers fired")
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    watcher.cancel()
    final = await admin("stats")
    await session.close()

    span = stats1["time"] - stats0["time"]
    ends = final["ends"]
    # Ours fires "done", the official trigger "success".
    delays = sorted(events[j] - ends[f"{prefix}-{j:05d}"] for j in events if statuses.get(j) in ("done", "success"))
    within = sum(1 for d in delays if d <= interval + 1.0)

    def pct(q: float) -> float | None:
        return delays[min(len(delays) - 1, int(q * len(delays)))] if delays else None

    per_account = {a: (stats1["by_account"].get(a, 0) - stats0["by_account"].get(a, 0)) / span for a in accounts}

    def ops(name: str) -> int:
        return stats1["ops"].get(name, [0, 0])[0] - stats0["ops"].get(name, [0, 0])[0]

    if spec["trigger"] == "view":
        looks = ops("list_jobs") / len(accounts) / (span / interval)
    elif spec["trigger"] == "per-job":
        looks = ops("taskcounts") / n / (span / interval)
    else:
        looks = ops("list_tasks") / n / (span / interval)
    growing = len(spec["growing"])
    growing_looks = stats1["growing_looks"] - stats0["growing_looks"]
    stream_looks = growing_looks / growing / (span / interval) if growing else None
    window_lags = sorted(lag for at, lag in lags if at >= window_start)
    startup_lags = [lag for at, lag in lags if at < window_start]
    first_5s = max((count for at, count in served if at <= 5.25), default=0)
    steps = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in itertools.pairwise([(0.0, 0), *served])]
    cpu = (sum(cpu1[:2]) - sum(cpu0[:2])) / span
    machine = (harness.busy(all1) - harness.busy(all0)) / span
    return {
        "name": spec["name"],
        "trigger": spec["trigger"],
        "jobs": n,
        "accounts": len(accounts),
        "interval": interval,
        "mode": spec["mode"],
        "warm": spec.get("warm", 0.0),
        "req_per_s_per_account": per_account,
        "req_per_s_max_account": max(per_account.values()),
        "cpu_trigger": cpu,
        "cpu_machine": machine,
        "load1": load,
        "lag_p99_ms": 1000 * window_lags[min(len(window_lags) - 1, int(0.99 * len(window_lags)))]
        if window_lags
        else None,
        "end_p50_s": statistics.median(delays) if delays else None,
        "end_p99_s": pct(0.99),
        "end_max_s": delays[-1] if delays else None,
        "within_poll_plus_1": within / n,
        "looks": looks,
        "ops_per_s": {name: round(ops(name) / span, 2) for name in sorted(stats1["ops"]) if ops(name)},
        "stream_looks": stream_looks,
        "rss_per_job_kib": (rss_steady - rss_before) / n / 1024,
        "startup_s": startup,
        "start": spec.get("start", "spread"),
        "startup_requests_5s": first_5s,
        "startup_peak_req_per_s": max(steps, default=0.0),
        "startup_lag_max_ms": 1000 * max(startup_lags, default=0.0),
        "fired": len(events),
        "statuses": {s: sum(1 for v in statuses.values() if v == s) for s in set(statuses.values())},
        "lines_shown": sum(channel.task_lines.values()),
    }


def child_main(spec: dict[str, Any]) -> None:
    from airflow.sdk.log import configure_logging

    channel = harness.Channel()
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
        official = {
            "conn_type": "azure_batch",
            "login": account,
            "password": harness.KEY,
            "extra": {"account_url": endpoint},
        }
        env[f"AIRFLOW_CONN_BENCH{a}"] = json.dumps(ours)
        env[f"AIRFLOW_CONN_BENCH{a}_OFFICIAL"] = json.dumps(official)
    return env


def run_scenario(spec: dict[str, Any], endpoint: str, endpoint_pid: int) -> dict[str, Any] | None:
    env = {
        **os.environ,
        **connections(spec, endpoint),
        "AIRFLOW_HOME": HOME,
        "PYTHONWARNINGS": "ignore",
        "AIRFLOW__AZBATCH__MIN_DEFERRAL_SECONDS": "0",
    }
    env["AIRFLOW__AZBATCH__ACCOUNT_VIEW"] = "False" if spec["trigger"] == "per-job" else "True"
    payload = {**spec, "endpoint": endpoint, "endpoint_pid": endpoint_pid}
    return harness.child_result(__file__, payload, env, harness.OUT / f"view-{spec['name']}.log")


def start_cell(r: dict[str, Any]) -> str:
    if "startup_requests_5s" not in r:
        return "-"
    how = "all at once" if r["start"] == "restart" else "spread"
    return f"{how}: {r['startup_requests_5s']}, {r['startup_peak_req_per_s']:.0f}/s, {r['startup_lag_max_ms']:.0f} ms"


def table(results: list[dict[str, Any]]) -> str:
    head = (
        "| trigger | jobs x accounts | interval | mode | req/s per account | looks (of ideal) | CPU trigger | "
        "loop lag p99 | end → event p50 / p99 / max | within poll + 1 s | start: requests in 5 s, peak req/s, "
        "lag max | RSS/job | machine load |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for r in results:
        looks = fmt(r["looks"], ".2f")
        if r["stream_looks"] is not None:
            looks += f", streams {r['stream_looks']:.2f}"
        name = "**view**" if r["trigger"] == "view" else r["trigger"]
        rows.append(
            f"| {name} | {r['jobs']} x {r['accounts']} | {r['interval']:g} s | "
            f"{r['mode']}{' (steady)' if r.get('warm') else ''} | "
            f"{r['req_per_s_max_account']:.1f} | {looks} | {100 * r['cpu_trigger']:.0f} % | "
            f"{fmt(r['lag_p99_ms'], '.0f', ' ms')} | {fmt(r['end_p50_s'], '.2f')} / {fmt(r['end_p99_s'], '.2f')} / "
            f"{fmt(r['end_max_s'], '.2f')} s | {100 * r['within_poll_plus_1']:.0f} % | "
            f"{start_cell(r)} | {r['rss_per_job_kib']:.0f} KiB | {r['load1']:.1f} |"
        )
    return head + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--warm", type=float, help="the warm-up's least length (s), for the looks' steady cadence")
    parser.add_argument("--steady", type=float, help=f"the steady window (s; default {STEADY:g})")
    args = parser.parse_args()
    if args.child:
        child_main(json.loads(args.child))
        return
    steady = args.steady or STEADY
    specs = [{**spec, "warm": args.warm or spec["warm"], "steady": steady} for spec in matrix(args.quick)]
    results = harness.run_matrix(specs, args.only, args.port, run_scenario, "req_per_s_per_account")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    cpu = platform.processor() or platform.machine()
    text = (
        f"Measured {stamp} on {cpu}, {os.cpu_count()} cores, Python {platform.python_version()} (the endpoint, "
        "the triggers and other work share the cores: the machine's 1-minute load is in the last column).\n\n"
        + table(results)
    )
    print(text)
    if not args.only and not args.quick:
        RESULTS.write_text(text)
    (harness.OUT / "view-results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
