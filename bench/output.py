"""Live output at scale: how much of the output deferred jobs' tasks write is in the task logs, and how soon.

    python bench/output.py                  # the matrix of issue 35 (about an hour on 2 cores)
    python bench/output.py --quick          # a smoke run (about 3 minutes)
    python bench/output.py --only 200x20    # scenarios whose name contains this (repeatable; bench/.out only)
    python bench/output.py --only view-1000x20-5s --warm 400   # a later steady state (bench/.out only)

Each scenario runs in a fresh subprocess against the synthetic endpoint (``bench/synthetic_batch.py``), as
``bench/run.py`` runs its own (greenback portal and log context per trigger, logs rendered as the triggerer's
runner sends them, into a channel that notes when each output line was logged): N deferred jobs in one account,
S streamed tasks each (all running), every task writing one ``LINE_BYTES``-byte line to stdout every
``LINE_PERIOD`` seconds (a training log's pace), each at its own phase of that period (tasks start apart); stderr
stays empty. The triggers start spread over one poll interval; once the first reads of every task are done and
every task wrote a few lines (``WARM_MIN`` s, at most ``WARM_LIMIT`` s), a ``WINDOW``-second window is measured,
then ``TAIL`` seconds more for the lines written in the window that were not shown by its end. Measured:

- **by end**: of the lines written in the window, the share in the task logs by the window's end (every file read
  every poll would show about 1 - poll / 2 / WINDOW of them);
- **within poll + 2 s**: the share shown at most poll_interval + 2 s after it was written;
- **delay p50 / p99**: from a line's writing to its logging (over the window's lines, the tail included; a line
  not shown by the end of the tail counts as later than that);
- **req/s**: every Batch request in the window (the endpoint counts them), and of them the output reads (ranged
  reads, file listings, task states);
- **CPU**: the trigger process's own CPU time in the window, in % of one core, and in CPU seconds (robust to other
  work on the machine); **loop lag p99** from a task sleeping 50 ms; **machine load** when the window started;
- **read every**: the mean time between two reads of a growing file (window x growing files / their reads), and
  what ``[azbatch] output_requests_per_second`` implies for it: growing files / budget (when longer than the poll).

"view" is ``AzureBatchJobTrigger`` with the account view on (the default), "per-job" with ``[azbatch]
account_view = False`` (each trigger polls its job and reads its output itself, as 0.3 did). The table goes to
stdout and to ``bench/output-results.md``; details to ``bench/.out/output-results.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import results_file  # noqa: E402
import run as harness  # noqa: E402  (bench/run.py: the endpoint, the log channel, the helpers)
import synthetic_batch  # noqa: E402

fmt = harness.cell

RESULTS = HERE / "output-results.md"
LINE_BYTES = 100
LINE_PERIOD = 10.0
WINDOW = 40.0
TAIL = 60.0
# The warm-up lasts at least this long: every stream wrote its first lines and was read since (a stream quiet at
# its first reads is read less often until it grows: up to [azbatch] idle_stream_interval, 30 s).
WARM_MIN = 4 * LINE_PERIOD
WARM_LIMIT = 150.0
HOME = tempfile.mkdtemp(prefix="bench-output-airflow-")


def scenario(trigger: str, jobs: int, tasks: int, interval: float) -> dict[str, Any]:
    return {
        "name": f"{trigger}-{jobs}x{tasks}-{interval:g}s",
        "trigger": trigger,
        "jobs": jobs,
        "tasks": tasks,
        "interval": interval,
    }


def matrix(quick: bool) -> list[dict[str, Any]]:
    if quick:
        return [scenario("view", 20, 20, 1.0), scenario("per-job", 20, 20, 1.0)]
    out = []
    for jobs in (1, 100, 200, 1000):
        for tasks in (1, 20):
            for interval in (1.0, 5.0):
                out += [scenario("view", jobs, tasks, interval), scenario("per-job", jobs, tasks, interval)]
    return out


class LineChannel(harness.Channel):
    """The log channel, noting when each numbered output line was logged: (trigger, task) -> {line: time}."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: dict[tuple[int, str], dict[int, float]] = {}

    def write(self, data: bytes) -> int:
        at = data.find(b'"logger":"azbatch.task.')
        if at != -1:
            task = data[at + 23 : data.find(b'"', at + 23)].decode()
            number = data.find(b" line ")
            trig = data.find(b'"trigger_id":') + 13
            if number != -1:
                key = (int(data[trig : data.find(b",", trig)]), task)
                self.shown.setdefault(key, {}).setdefault(int(data[number + 6 : number + 15]), time.time())
        return super().write(data)


# -- the child: one scenario in one process ---------------------------------------------------------------
async def child(spec: dict[str, Any], channel: LineChannel) -> dict[str, Any]:
    import aiohttp
    import greenback
    import psutil
    from structlog.contextvars import bind_contextvars

    from airflow_provider_azbatch import config
    from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger
    from airflow_provider_azbatch.watching.state import WatchState

    base = spec["endpoint"]
    n, tasks, interval = spec["jobs"], spec["tasks"], spec["interval"]
    session = aiohttp.ClientSession()
    admin = harness.endpoint_admin(session, base)
    prefix = spec["name"].replace(".", "_")
    rate = LINE_BYTES / LINE_PERIOD
    setup = await admin(
        "setup",
        {
            "prefix": prefix,
            "jobs": n,
            "tasks": tasks,
            "output": {"stdout": "lines", "stderr": "quiet"},
            "growing": None,
            "rate": rate,
            "unit": LINE_BYTES,
            "phased": True,
            "accounts": [harness.ACCOUNT],
        },
    )
    created = setup["time"]
    me = psutil.Process()
    start = time.time()

    def make(j: int) -> Any:
        state = WatchState(
            job_id=f"{prefix}-{j:05d}",
            expected_tasks=tasks,
            streamed=[f"t{t:03d}" for t in range(tasks)],
            pool_id="bench-pool",
        )
        return AzureBatchJobTrigger(
            azbatch_conn_id="bench0",
            watch_state=state.to_json(),
            poll_interval=interval,
            deadline=start + 3600,
            stream_output=True,
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
                harness.say(f"trigger {j} fired before the end: {event.payload}")
                break
        except Exception as exc:
            harness.say(f"trigger {j} raised {exc!r}")

    lags: list[tuple[float, float]] = []
    watcher = asyncio.create_task(harness.loop_lag(lags))
    runs = [asyncio.create_task(run_one(j, interval * j / n)) for j in range(n)]
    warm_min = spec.get("warm") or WARM_MIN
    while True:  # warm-up: every task's files listed, and WARM_MIN (or the scenario's own)
        await asyncio.sleep(0.5)
        stats = await admin("stats")
        elapsed = time.time() - start
        if (stats["tasks_listed"] >= n * tasks and elapsed >= warm_min) or elapsed >= max(WARM_LIMIT, warm_min):
            break
    warm = time.time() - start
    harness.say(f"warm-up done in {warm:.1f} s ({stats['tasks_listed']} of {n * tasks} tasks listed)")
    await asyncio.sleep(2 * interval)
    load = os.getloadavg()[0]
    cpu0, stats0 = me.cpu_times(), await admin("stats")
    t0 = stats0["time"]
    await asyncio.sleep(WINDOW)
    cpu1, stats1 = me.cpu_times(), await admin("stats")
    t1 = stats1["time"]
    # The lines written in the window: (when written, when shown or None).
    period = LINE_PERIOD

    def window_lines() -> list[tuple[float, float | None]]:
        found = []
        for j in range(n):
            for t in range(tasks):
                stream = synthetic_batch.Stream("lines", rate, f"t{t:03d}", LINE_BYTES)
                stream.phase = synthetic_batch.phase_of(j * tasks + t, period)
                k = max(0, int((t0 - created - stream.phase) / period) - 1)
                shown = channel.shown.get((j, f"t{t:03d}"), {})
                while (at := stream.written_at(created, k)) <= t1:
                    if at >= t0:
                        found.append((at, shown.get(k)))
                    k += 1
        return found

    # The tail: until every line of the window is shown, TAIL seconds at most.
    tail_end = time.time() + TAIL
    while time.time() < tail_end:
        await asyncio.sleep(2.0)
        if all(when is not None for _, when in window_lines()):
            break
    for run in runs:
        run.cancel()
    await asyncio.gather(*runs, return_exceptions=True)
    watcher.cancel()
    await session.close()

    delays: list[float] = []
    by_end = within = written = 0
    for at, when in window_lines():
        written += 1
        delay = when - at if when is not None else float("inf")
        delays.append(delay)
        by_end += when is not None and when <= t1
        within += delay <= interval + 2.0
    delays.sort()
    span = t1 - t0

    def ops(name: str) -> int:
        return stats1["ops"].get(name, [0, 0])[0] - stats0["ops"].get(name, [0, 0])[0]

    requests = stats1["requests"] - stats0["requests"]
    output_ops = ("list_files", "file_get", "list_tasks_filtered")
    growing_reads = stats1["growing_reads"] - stats0["growing_reads"]
    window_lags = sorted(lag for at, lag in lags if t0 <= at <= t1)
    cpu_seconds = sum(cpu1[:2]) - sum(cpu0[:2])
    budget = config.get_float("output_requests_per_second") if spec["trigger"] == "view" else 0.0
    growing_files = n * tasks

    def pct(q: float) -> float | None:
        return delays[min(len(delays) - 1, int(q * len(delays)))] if delays else None

    return {
        "name": spec["name"],
        "trigger": spec["trigger"],
        "jobs": n,
        "tasks": tasks,
        "interval": interval,
        "window": span,
        "written": written,
        "share_by_end": by_end / written if written else None,
        "share_within_poll_2s": within / written if written else None,
        "delay_p50_s": pct(0.5),
        "delay_p99_s": pct(0.99),
        "tail_s": TAIL,
        "requests_per_s": requests / span,
        "output_requests_per_s": sum(ops(op) for op in output_ops) / span,
        "ops_per_s": {op: ops(op) / span for op in stats1["ops"]},
        "errors": stats1["errors"] - stats0["errors"],
        "cpu_trigger": cpu_seconds / span,
        "cpu_seconds": cpu_seconds,
        "lag_p50_ms": 1000 * window_lags[len(window_lags) // 2] if window_lags else None,
        "lag_p99_ms": 1000 * window_lags[min(len(window_lags) - 1, int(0.99 * len(window_lags)))]
        if window_lags
        else None,
        "lag_max_ms": 1000 * window_lags[-1] if window_lags else None,
        "load1": load,
        "warm_s": warm,
        "warm": spec.get("warm"),
        "read_every_s": span * growing_files / growing_reads if growing_reads else None,
        "budget": budget,
        "implied_read_every_s": max(interval, growing_files / budget) if budget else None,
    }


def child_main(spec: dict[str, Any]) -> None:
    from airflow.sdk.log import configure_logging

    channel = LineChannel()
    configure_logging(json_output=True, output=channel, sending_to_supervisor=True)  # type: ignore[arg-type]
    try:
        result = asyncio.run(child(spec, channel))
    except BaseException:
        import traceback

        traceback.print_exc(file=sys.__stderr__)
        raise SystemExit(1) from None
    print("RESULT " + json.dumps(result), flush=True)


# -- the parent -----------------------------------------------------------------------------------------
def run_scenario(spec: dict[str, Any], endpoint: str, endpoint_pid: int) -> dict[str, Any] | None:
    conn = {
        "conn_type": "azbatch",
        "login": harness.ACCOUNT,
        "password": harness.KEY,
        "extra": {"account_url": endpoint},
    }
    env = {
        **os.environ,
        "AIRFLOW_CONN_BENCH0": json.dumps(conn),
        "AIRFLOW_HOME": HOME,
        "PYTHONWARNINGS": "ignore",
        "AIRFLOW__AZBATCH__MIN_DEFERRAL_SECONDS": "0",
        "AIRFLOW__AZBATCH__ACCOUNT_VIEW": "False" if spec["trigger"] == "per-job" else "True",
    }
    payload = {**spec, "endpoint": endpoint, "endpoint_pid": endpoint_pid}
    return harness.child_result(__file__, payload, env, harness.OUT / f"output-{spec['name']}.log")


def delay(value: float | None, tail: float) -> str:
    if value is None:
        return "-"
    return f"> {tail:.0f}" if value == float("inf") else f"{value:.1f}"


def warm_note(r: dict[str, Any]) -> str:
    """A row measured after a longer warm-up than the default says so (a steady state that takes minutes)."""
    return f" (after {r['warm_s']:.0f} s)" if r.get("warm") else ""


def table(results: list[dict[str, Any]]) -> str:
    head = (
        "| trigger | jobs x streamed tasks | interval | by end | within poll + 2 s | delay p50 / p99 | req/s (output) "
        "| read every (budget implies) | CPU trigger | loop lag p99 | machine load |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for r in results:
        name = "**view**" if r["trigger"] == "view" else r["trigger"]
        implied = f" ({r['implied_read_every_s']:.0f} s)" if r["implied_read_every_s"] else ""
        rows.append(
            f"| {name} | {r['jobs']} x {r['tasks']}{warm_note(r)} | {r['interval']:g} s | "
            f"{fmt(r['share_by_end'], '.2f')} | "
            f"{fmt(r['share_within_poll_2s'], '.2f')} | {delay(r['delay_p50_s'], r['tail_s'])} / "
            f"{delay(r['delay_p99_s'], r['tail_s'])} s | "
            f"{r['requests_per_s']:.0f} ({r['output_requests_per_s']:.0f}) | "
            f"{fmt(r['read_every_s'], '.1f', ' s')}{implied} | {100 * r['cpu_trigger']:.0f} % "
            f"({r['cpu_seconds']:.1f} s) | {fmt(r['lag_p99_ms'], '.0f', ' ms')} | {r['load1']:.1f} |"
        )
    return head + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--warm", type=float, help="the warm-up's least length (s), for a later steady state")
    args = parser.parse_args()
    if args.child:
        child_main(json.loads(args.child))
        return
    started, load = time.time(), os.getloadavg()
    saved = harness.OUT / "output-results.json"
    specs = [{**spec, "warm": args.warm} if args.warm else spec for spec in matrix(args.quick)]
    results = harness.run_matrix(specs, args.only, args.port, run_scenario, "ops_per_s", saved)
    saved.write_text(json.dumps(results, indent=1))
    text = (
        "The machine's 1-minute load when each window started is in the last column. Every task writes one "
        f"{LINE_BYTES}-byte line every {LINE_PERIOD:g} s; a {WINDOW:g} s window.\n\n" + table(results)
    )
    full = not (args.only or args.quick or args.warm)  # only a full run replaces bench/output-results.md
    print(results_file.write(RESULTS, started, load, text, full).read_text())


if __name__ == "__main__":
    main()
