"""The benchmark suite: ``AzureBatchJobTrigger`` against the official ``AzureBatchTrigger``, one table.

    python bench/run.py            # the full matrix (10-20 minutes on 2 cores)
    python bench/run.py --quick    # a smoke run (about 2 minutes)
    python bench/run.py --only official --profile   # scenarios whose name contains "official", under py-spy

It starts the synthetic Batch endpoint (``bench/synthetic_batch.py``) in its own process, measures what that
endpoint sustains alone, then runs every scenario in a fresh subprocess (``--child``): one asyncio loop
running N ``trigger.run()`` generators the way the triggerer runs them (greenback portal, log context per
trigger, logs rendered as JSON lines into a channel as the triggerer's runner process sends them). The
table is printed and written to ``bench/results.md`` (details per operation in ``bench/.out/results.json``).

A scenario: the jobs are created on the endpoint (on a pool with a slot for every task: all run); the triggers
start spread over one poll interval (as deferrals arrive); once every job was looked at, a steady window is
measured (requests and response bytes from the endpoint's counters, loop lag, RSS, CPU); 10 % of the jobs get a
deadline within the run (the timeout lateness); then the jobs end one after the other over ``ENDS_SPREAD`` s, and
each trigger's event is timed from its job's end (the streaming triggers read their output to the end first, so
bytes fetched / bytes written and lines shown / lines written are exact).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import results_file  # noqa: E402  (bench/results_file.py: the one writer of the results files)

OUT = HERE / ".out"
KEY = base64.b64encode(b"synthetic-batch-key-32-bytes!!!!").decode()
ACCOUNT = "benchacct"
TIMEOUT_EVERY = 10  # jobs j with j % 10 == 3 get a deadline inside the run
GROWING_EVERY = 100  # 1 % of the streamed tasks write lines; the others stay quiet
RATE = 800  # bytes per second of a growing stream (10 lines of 80 bytes, or 10 progress bars)
LATENCY_MS = 10.0  # the endpoint answers every Batch request this much later: a network, as to an Azure region
ENDS_SPREAD = 10.0  # after the window, the jobs end one after the other over this many seconds


# -- the scenarios ----------------------------------------------------------------------------------------
def scenario(trigger: str, jobs: int, interval: float, mode: str, window: float, **extra: Any) -> dict[str, Any]:
    streamed = {"watch": 0, "stream1": 1, "stream20": 20}.get(mode, 1)
    tasks = {"watch": 20, "stream1": 1, "stream20": 20}.get(mode, 1)
    spec: dict[str, Any] = {
        "name": f"{trigger}-{jobs}-{interval:g}s-{mode}",
        "trigger": trigger,
        "jobs": jobs,
        "interval": interval,
        "mode": mode,
        "tasks": tasks,
        "streamed": streamed,
        "window": window,
        "timeouts": True,
        "output": {"stdout": "lines", "stderr": "quiet"},
        # None: every task writes; else the (job, task) pairs that do.
        "growing": [
            [j, t]
            for j in range(jobs)
            for t in range(streamed)
            if (j * streamed + t) % GROWING_EVERY == 0 and j % TIMEOUT_EVERY != 3
        ],
        "runtime": None,
    }
    if mode == "watch":
        spec["growing"] = []
    spec.update(extra)
    return spec


def bytes_scenario(kind: str, jobs: int, interval: float, runtime: float) -> dict[str, Any]:
    return scenario(
        "ours",
        jobs,
        interval,
        f"bytes-{kind}",
        window=runtime / 2,
        timeouts=False,
        output={"stdout": kind, "stderr": "quiet"},
        growing=None,
        runtime=runtime,
    )


def matrix(quick: bool) -> list[dict[str, Any]]:
    sizes, intervals = ([20], [1.0]) if quick else ([100, 1000], [1.0, 5.0])
    out = []
    for jobs in sizes:
        for interval in intervals:
            window = (5.0 if quick else 15.0) if interval < 5 else 30.0
            out.append(scenario("official", jobs, interval, "watch", window))
            for mode in ("stream1", "stream20"):  # the official trigger cannot stream: n/a rows
                out.append(scenario("official", jobs, interval, mode, window, skip=True))
            for mode in ("watch", "stream1", "stream20"):
                out.append(scenario("ours", jobs, interval, mode, window))
    runtime = 8.0 if quick else 40.0
    out.append(bytes_scenario("lines", 20 if quick else 100, 1.0 if quick else 5.0, runtime))
    out.append(bytes_scenario("progress", 20 if quick else 100, 1.0 if quick else 5.0, runtime))
    return out


# -- the child: one scenario in one process ---------------------------------------------------------------
class Channel:
    """Where the trigger logs go: JSON lines, as the triggerer's runner process sends them to its parent
    (written to /dev/null here; counted)."""

    def __init__(self) -> None:
        # BENCH_LOG=<file>: keep the logs (debugging).
        self.fd = os.open(os.environ.get("BENCH_LOG", os.devnull), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        self.lines = 0
        self.bytes = 0
        self.task_lines: Counter[int] = Counter()  # lines of Batch task output (azbatch.task.*) per trigger

    def write(self, data: bytes) -> int:
        self.lines += 1  # one write per record
        self.bytes += len(data)
        if b'"logger":"azbatch.task.' in data:
            at = data.find(b'"trigger_id":') + 13
            self.task_lines[int(data[at : data.find(b",", at)])] += 1
        return os.write(self.fd, data)

    def flush(self) -> None:
        pass


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.__stderr__, flush=True)


def lock_waiters() -> int:
    """Triggers waiting for the async hook's per-loop lock (a diagnostic: read, never touched)."""
    from airflow_provider_azbatch.hooks import batch_async

    lock = batch_async._locks.get(id(asyncio.get_running_loop()))
    return len(getattr(lock, "_waiters", None) or ()) if lock is not None else 0


def busy(times: Any) -> float:
    """CPU seconds the whole machine was busy (all cores)."""
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def loop_lag(lags: list[tuple[float, float]], tick: float = 0.05) -> None:
    """Record how late the event loop wakes a task sleeping ``tick`` seconds: (when, how late), until cancelled."""
    loop = asyncio.get_running_loop()
    while True:
        before = loop.time()
        await asyncio.sleep(tick)
        lags.append((time.time(), loop.time() - before - tick))


def endpoint_admin(session: Any, base: str) -> Callable[..., Awaitable[dict[str, Any]]]:
    """The synthetic endpoint's own requests (``/_bench/<path>``): a GET, or a POST of ``body``."""

    async def admin(path: str, body: Any = None) -> dict[str, Any]:
        method = session.get if body is None else session.post
        async with method(f"{base}/_bench/{path}", **({} if body is None else {"json": body})) as r:
            return await r.json()

    return admin


async def child(spec: dict[str, Any], channel: Channel) -> dict[str, Any]:
    import aiohttp
    import greenback
    import psutil
    from airflow.providers.microsoft.azure.triggers.batch import AzureBatchTrigger
    from structlog.contextvars import bind_contextvars

    from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger
    from airflow_provider_azbatch.watching.state import WatchState

    base = spec["endpoint"]
    n, interval = spec["jobs"], spec["interval"]
    session = aiohttp.ClientSession()
    admin = endpoint_admin(session, base)

    prefix = spec["name"].replace(".", "_")
    timeout_jobs = [j for j in range(n) if spec["timeouts"] and j % TIMEOUT_EVERY == 3]
    await admin("setup", {**spec, "prefix": prefix, "rate": RATE, "timeout_jobs": timeout_jobs})
    endpoint = psutil.Process(spec["endpoint_pid"])
    me = psutil.Process()
    rss_before = rss_bytes()

    start = time.time()
    far = start + 6 * 3600
    deadlines: dict[int, float] = {}
    started: dict[int, float] = {}

    def make(j: int, deadline: float) -> Any:
        job_id = f"{prefix}-{j:05d}"
        if spec["trigger"] == "official":
            return AzureBatchTrigger(job_id, "bench_official", end_time=deadline, poll_interval=interval)
        state = WatchState(
            job_id=job_id,
            expected_tasks=spec["tasks"],
            streamed=[f"t{t:03d}" for t in range(spec["streamed"])],
            pool_id="bench-pool",
        )
        return AzureBatchJobTrigger(
            azbatch_conn_id="bench",
            watch_state=state.to_json(),
            poll_interval=interval,
            deadline=deadline,
            stream_output=spec["streamed"] > 0,
            max_read_bytes=1024 * 1024,
            deferred_at=time.time(),
        )

    events: dict[int, tuple[float, str]] = {}

    async def run_one(j: int, delay: float, deadline: float) -> None:
        """What the triggerer's ``run_trigger`` does around a trigger."""
        await asyncio.sleep(delay)
        started[j] = time.time()
        trigger = make(j, deadline)
        await greenback.ensure_portal()
        bind_contextvars(trigger_id=j, ti_id=f"ti-{j}", dag_id="bench", task_id=f"job{j}", run_id="r", map_index=-1)
        try:
            async for event in trigger.run():
                events[j] = (time.time(), event.payload["status"])
                # The last poll's lines ride in the done event: the task shows them when it resumes.
                channel.task_lines[j] += sum(1 for task_id, _ in event.payload.get("lines", ()) if task_id)
                break
        except Exception as exc:  # the triggerer would fail the task
            events[j] = (time.time(), f"raised {type(exc).__name__}")
            say(f"trigger {j} raised {exc!r}")

    lags: list[tuple[float, float]] = []
    gc_pauses: list[tuple[float, int, float]] = []  # (end time, generation, seconds)
    gc_started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter()
        else:
            gc_pauses.append((time.time(), info["generation"], time.perf_counter() - gc_started[0]))

    gc.callbacks.append(on_gc)

    watcher = asyncio.create_task(loop_lag(lags))
    # The steady triggers: deferrals arriving spread over one poll interval.
    steady = [j for j in range(n) if j not in timeout_jobs]
    tasks = [asyncio.create_task(run_one(j, interval * k / len(steady), far)) for k, j in enumerate(steady)]

    # Warm-up: every job looked at (a look starts with its task counts; the official trigger's poll lists its
    # tasks), and at least three intervals.
    warmup_limit = start + interval + 60.0
    startup = None
    while True:
        await asyncio.sleep(0.5)
        stats = await admin("stats?brief=1")
        now = time.time()
        if startup is None and stats["min_polls"] >= 1:
            startup = now - start
        if (now >= start + 3 * interval and startup is not None) or now >= warmup_limit:
            break
    warm = startup is not None
    startup = time.time() - start if startup is None else startup
    say(f"every job looked at in {startup:.1f} s" if warm else f"some job not looked at in {startup:.1f} s")
    rss_steady = rss_bytes()
    waiting_at_window = lock_waiters()
    cpu0, ecpu0, all0, stats0 = me.cpu_times(), endpoint.cpu_times(), psutil.cpu_times(), await admin("stats")
    t0 = stats0["time"]
    # The timeout triggers defer now, under full load, with deadlines in the middle of the window.
    window = spec["window"]
    for k, j in enumerate(timeout_jobs):
        deadlines[j] = t0 + 0.2 * window + 0.4 * window * k / len(timeout_jobs)
        tasks.append(asyncio.create_task(run_one(j, interval * k / len(timeout_jobs), deadlines[j])))
    await asyncio.sleep(window)
    stats1 = await admin("stats")
    cpu1, ecpu1, all1 = me.cpu_times(), endpoint.cpu_times(), psutil.cpu_times()
    t1 = stats1["time"]
    say(f"window done: {stats1['requests'] - stats0['requests']} requests")

    # Timeouts: wait for every deadline's event (or give up a generous while after the last one).
    if deadlines:
        until = max(deadlines.values()) + interval + 30
        while time.time() < until and not all(j in events for j in deadlines):
            await asyncio.sleep(0.2)

    say(f"timeouts: {sum(1 for j in deadlines if j in events)} of {len(deadlines)} fired")
    # The jobs end one after the other (the ratio rows' at their runtime); each trigger sees its job's end, reads
    # the output to the end and fires.
    if spec["runtime"] is None:
        await admin("ends", {"first": time.time() + 1.0, "spread": ENDS_SPREAD})
    ends = {int(job.rsplit("-", 1)[1]): at for job, at in (await admin("stats"))["ends"].items() if at is not None}
    until = max(ends.values(), default=time.time()) + 4 * interval + 60
    while time.time() < until and len(events) < n:
        await asyncio.sleep(0.2)
    say(f"{len(events)} of {n} triggers fired")
    unfinished = n - len(events)
    delays = sorted(
        events[j][0] - at if j in events and events[j][1] != "error" else float("inf") for j, at in ends.items()
    )
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    watcher.cancel()
    final = await admin("stats")
    # Output of the jobs whose trigger read it to the end (fired done): exact bytes and lines.
    done = [j for j, (_, status) in events.items() if status == "done"]
    account = await admin("account", {"jobs": [f"{prefix}-{j:05d}" for j in done]})
    lines_written = sum(account["lines_written"].values())
    lines_shown = sum(channel.task_lines[j] for j in done)
    waiting = lock_waiters()
    await session.close()

    span = t1 - t0
    # Job-polls the interval asks for in the window: each job's time alive in it / the interval.
    job_polls = sum(max(0.0, min(t1, deadlines.get(j, far)) - max(t0, started.get(j, t1))) for j in range(n)) / interval
    window_lags = sorted(lag for at, lag in lags if t0 <= at <= t1)
    window_gc = [(gen, took) for at, gen, took in gc_pauses if t0 <= at <= t1]
    lateness = sorted(events[j][0] - deadlines[j] for j in deadlines if j in events and events[j][1] == "timeout")
    ops = {
        op: [
            stats1["ops"][op][0] - stats0["ops"].get(op, [0, 0])[0],
            stats1["ops"][op][1] - stats0["ops"].get(op, [0, 0])[1],
        ]
        for op in stats1["ops"]
    }
    requests = sum(v[0] for v in ops.values())
    sent = sum(v[1] for v in ops.values())
    return {
        "name": spec["name"],
        "warm": warm,
        "window": span,
        "ends": len(delays),
        "ends_in_time": sum(1 for d in delays if d <= interval + 1.0),
        "end_p50_s": statistics.median(delays) if delays else None,
        "end_p99_s": delays[min(len(delays) - 1, int(0.99 * len(delays)))] if delays else None,
        "requests_per_s": requests / span,
        "bytes_per_s": sent / span,
        "requests_per_job_poll": requests / job_polls if job_polls else None,
        "bytes_per_job_poll": sent / job_polls if job_polls else None,
        "ops_per_job_poll": {op: v[0] / job_polls for op, v in ops.items()} if job_polls else {},
        "lag_p50_ms": 1000 * statistics.median(window_lags) if window_lags else None,
        "lag_p99_ms": 1000 * window_lags[min(len(window_lags) - 1, int(0.99 * len(window_lags)))]
        if window_lags
        else None,
        "lag_max_ms": 1000 * window_lags[-1] if window_lags else None,
        "gc_pauses": len(window_gc),
        "gc_ms_total": 1000 * sum(took for _, took in window_gc),
        "gc_ms_max": 1000 * max((took for _, took in window_gc), default=0.0),
        "gc_gen2": sum(1 for gen, _ in window_gc if gen == 2),
        "timeouts": len(deadlines),
        "timeouts_fired": len(lateness),
        "late_p50_s": statistics.median(lateness) if lateness else None,
        "late_max_s": lateness[-1] if lateness else None,
        "startup_s": startup,
        "rss_per_job_kib": (rss_steady - rss_before) / len(steady) / 1024,
        "rss_mib": rss_steady / 2**20,
        "cpu_trigger": (sum(cpu1[:2]) - sum(cpu0[:2])) / span,
        "cpu_endpoint": (sum(ecpu1[:2]) - sum(ecpu0[:2])) / span,
        "cpu_others": (busy(all1) - busy(all0) - sum(cpu1[:2]) + sum(cpu0[:2]) - sum(ecpu1[:2]) + sum(ecpu0[:2]))
        / span,
        "served": account["served"],
        "written": account["written"],
        "lines_written": lines_written,
        "lines_shown": lines_shown,
        "served_all": final["served"],
        "written_all": final["written"],
        "lock_waiters_at_window": waiting_at_window,
        "lock_waiters_at_end": waiting,
        "log_lines": channel.lines,
        "log_bytes": channel.bytes,
        "events": dict(Counter(status for _, status in events.values())),
        "unfinished": unfinished,
        "errors": final["errors"],
    }


def child_main(spec: dict[str, Any]) -> None:
    from airflow.sdk.log import configure_logging

    channel = Channel()
    configure_logging(json_output=True, output=channel, sending_to_supervisor=True)  # type: ignore[arg-type]
    try:
        result = asyncio.run(child(spec, channel))
    except BaseException:  # the log channel is /dev/null: say it here
        import traceback

        traceback.print_exc(file=sys.__stderr__)
        raise SystemExit(1) from None
    print("RESULT " + json.dumps(result), flush=True)


# -- the parent: endpoint, scenarios, table ---------------------------------------------------------------
def start_endpoint(port: int, latency_ms: float) -> subprocess.Popen:
    with open(OUT / "endpoint.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "synthetic_batch.py"), "--port", str(port), "--latency-ms", str(latency_ms)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    import urllib.request

    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_bench/stats", timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the synthetic endpoint did not start (see bench/.out/endpoint.log)")


async def endpoint_capacity(base: str, seconds: float = 5.0, concurrency: int = 32) -> dict[str, float]:
    """Requests/s the endpoint serves alone, driven by a bare aiohttp client (which shares the cores)."""
    import aiohttp

    out: dict[str, float] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:
        spec = {"prefix": "cap", "jobs": 1, "tasks": 20, "output": {}, "growing": [], "runtime": None}
        async with s.post(f"{base}/_bench/setup", json=spec) as r:
            await r.read()
        for name, path in (
            ("task counts", "/jobs/cap-00000/taskcounts?api-version=2025-06-01"),
            ("list 20 tasks", "/jobs/cap-00000/tasks?api-version=2025-06-01"),
        ):
            done = 0

            async def worker(url: str, end: float) -> None:
                nonlocal done
                while time.monotonic() < end:
                    async with s.get(url) as r:
                        await r.read()
                    done += 1

            began = time.monotonic()
            await asyncio.gather(*(worker(base + path, began + seconds) for _ in range(concurrency)))
            out[name] = done / (time.monotonic() - began)
    return out


def run_child(spec: dict[str, Any], env: dict[str, str], profile: bool) -> dict[str, Any] | None:
    cmd = [sys.executable, str(HERE / "run.py"), "--child", json.dumps(spec)]
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if profile and spy:
        cmd = [
            spy,
            "record",
            "--nonblocking",
            "-r",
            "50",
            "-f",
            "raw",
            "-o",
            str(OUT / f"{spec['name']}.prof"),
            "--",
            *cmd,
        ]
    with open(OUT / f"{spec['name']}.log", "w") as err:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    if (OUT / f"{spec['name']}.prof").exists() and profile:
        (OUT / f"{spec['name']}.top.txt").write_text(profile_summary(OUT / f"{spec['name']}.prof"))
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    print(f"  {spec['name']}: failed (exit {proc.returncode}, see bench/.out/{spec['name']}.log)", flush=True)
    return None


def child_result(script: str, spec: dict[str, Any], env: dict[str, str], log_path: Path) -> dict[str, Any] | None:
    """Run ``script --child <spec>`` (one scenario in a fresh process, its stderr to ``log_path``) and return the
    result it printed (None, said, when it printed none)."""
    with open(log_path, "w") as log:
        proc = subprocess.run(
            [sys.executable, script, "--child", json.dumps(spec)],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
        )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    say(f"{spec['name']} failed (see {log_path})")
    return None


def cell(value: float | None, spec: str, suffix: str = "") -> str:
    """A table cell: ``value`` formatted, or a dash."""
    return "-" if value is None else f"{value:{spec}}{suffix}"


def short(frame: str) -> str:
    """``func (path/to/file.py:12)`` -> ``func (file.py)``."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.split(':')[0].rsplit('/', 1)[-1].rstrip(')')})" if where else frame


def profile_summary(path: Path, top: int = 25) -> str:
    """Shares of the samples of a py-spy raw profile: by innermost function (self) and by any function on
    the stack (inclusive); samples of executor threads (``_worker``) are counted apart."""
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = in_threads = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [short(frame) for frame in stack.split(";")]
        n = int(count)
        total += n
        if any(frame.startswith("_worker ") for frame in frames):
            in_threads += n
            for frame in set(frames):
                threads[frame] += n
            continue
        own[frames[-1]] += n
        for frame in set(frames):
            anywhere[frame] += n
    share = lambda n: f"{100 * n / total:5.1f} %"  # noqa: E731
    lines = [f"{total} samples; executor threads {share(in_threads)}, the rest is the event loop's thread", ""]
    lines += ["event loop thread, self:"] + [f"{share(n)}  {name}" for name, n in own.most_common(top)]
    lines += ["", "event loop thread, inclusive:"] + [
        f"{share(n)}  {name}" for name, n in anywhere.most_common(2 * top)
    ]
    lines += ["", "executor threads, inclusive:"] + [f"{share(n)}  {name}" for name, n in threads.most_common(top)]
    return "\n".join(lines) + "\n"


def fmt(value: float | None, pattern: str = "{:.0f}") -> str:
    return "-" if value is None else pattern.format(value)


MODE_LABEL = {
    "watch": "watch-only (20 tasks/job)",
    "stream1": "stream 1 task",
    "stream20": "stream 20 tasks",
    "bytes-lines": "ratio: line output",
    "bytes-progress": "ratio: progress bars",
}


def table(results: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> str:
    head = (
        "| trigger | jobs | interval | mode | ends within poll + 1 s (delay p50 / p99) | requests/s "
        "| requests a job a poll | response bytes a job a poll | loop lag p99 | timeout lateness p50 / max "
        "| RSS/job | fetched / written | lines shown / written | every job looked at "
        "| CPU trigger / endpoint / others |"
    )
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for spec, r in results:
        label = "**ours**" if spec["trigger"] == "ours" else "official"
        first = f"| {label} | {spec['jobs']} | {spec['interval']:g} s | {MODE_LABEL[spec['mode']]} |"
        if r is None:
            rows.append(first + (" n/a (cannot stream) |" if spec.get("skip") else " failed |") + " |" * 10)
            continue
        streaming = spec["mode"] != "watch"
        if not r["timeouts"]:
            late = "-"
        elif not r["timeouts_fired"]:
            late = f"none of {r['timeouts']} fired"
        else:
            late = f"{r['late_p50_s']:.2f} / {r['late_max_s']:.2f} s"
            if r["timeouts_fired"] != r["timeouts"]:
                late += f" ({r['timeouts_fired']}/{r['timeouts']} fired)"
        ratio = f"{r['served'] / r['written']:.3f}" if streaming and r["written"] else ("n/a" if not streaming else "-")
        lines = (
            f"{r['lines_shown']} / {r['lines_written']}" if streaming and spec["output"]["stdout"] == "lines" else "-"
        )
        if r["unfinished"]:  # ratio and lines are over the jobs whose trigger read their output to the end
            lines += f" ({r['events'].get('done', 0)} jobs done, {r['unfinished']} unfinished)"
        ends = (
            f"{100 * r['ends_in_time'] / r['ends']:.0f} % ({seconds(r['end_p50_s'])} / {seconds(r['end_p99_s'])})"
            if r["ends"]
            else "-"
        )
        cells = [
            ends,
            f"{r['requests_per_s']:.1f}",
            fmt(r["requests_per_job_poll"], "{:.3f}"),
            fmt(r["bytes_per_job_poll"]),
            f"{fmt(r['lag_p99_ms'])} ms",
            late,
            f"{r['rss_per_job_kib']:.0f} KiB",
            ratio,
            lines,
            f"{'' if r['warm'] else '> '}{r['startup_s']:.0f} s",
            f"{100 * r['cpu_trigger']:.0f} / {100 * r['cpu_endpoint']:.0f} / {100 * r['cpu_others']:.0f} %",
        ]
        rows.append(first + " " + " | ".join(cells) + " |")
    return "\n".join(rows)


def seconds(value: float | None) -> str:
    """A delay in seconds, or "never" (a trigger that did not fire, or fired an error)."""
    return "-" if value is None else ("never" if value == float("inf") else f"{value:.1f} s")


def gc_table(results: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> str:
    """The garbage collector's pauses in each scenario's window: what the loop lag p99 measures at scale."""
    head = "| scenario | GC pauses in the window | full collections | GC time | longest pause | loop lag p99 / max |"
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for spec, r in results:
        if r is not None:
            rows.append(
                f"| {spec['name']} | {r['gc_pauses']} | {r['gc_gen2']} | {r['gc_ms_total']:.0f} ms "
                f"| {r['gc_ms_max']:.0f} ms | {fmt(r['lag_p99_ms'])} / {fmt(r['lag_max_ms'])} ms |"
            )
    return "\n".join(rows)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_matrix(
    specs: list[dict[str, Any]],
    only: list[str],
    port: int,
    run_scenario: Callable[[dict[str, Any], str, int], dict[str, Any] | None],
    quiet: str,
    saved: Path | None = None,
) -> list[dict[str, Any]]:
    """Run the scenarios named by ``only`` (all when empty) against one synthetic endpoint, saying each result
    (without its ``quiet`` field) as it comes and keeping what ran so far in ``saved``."""
    OUT.mkdir(exist_ok=True)
    port = port or free_port()
    proc = start_endpoint(port, LATENCY_MS)
    endpoint = f"http://127.0.0.1:{port}"
    results: list[dict[str, Any]] = []
    try:
        for spec in specs:
            if only and not any(part in spec["name"] for part in only):
                continue
            say(f"scenario {spec['name']}")
            result = run_scenario(spec, endpoint, proc.pid)
            if result is not None:
                results.append(result)
                say(json.dumps({k: v for k, v in result.items() if k != quiet}))
                if saved is not None:
                    saved.write_text(json.dumps(results, indent=1))
    finally:
        proc.terminate()
        proc.wait(10)
    return results


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="AzureBatchJobTrigger vs the official AzureBatchTrigger")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--only", help="run the scenarios whose name contains this")
    parser.add_argument("--profile", action="store_true", help="record each scenario with py-spy (bench/.out/*.prof)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--latency-ms", type=float, default=LATENCY_MS, help="the endpoint answers this much later (a network)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--render", action="store_true", help="print the table of bench/.out/results.json again")
    args = parser.parse_args()
    if args.render:
        print(render(OUT / "results.json", OUT / "results-rendered.md"))
        return
    if args.child:
        child_main(json.loads(args.child))
        return

    OUT.mkdir(exist_ok=True)
    started, load = time.time(), os.getloadavg()
    endpoint = start_endpoint(args.port, args.latency_ms)
    base = f"http://127.0.0.1:{args.port}"
    home = tempfile.mkdtemp(prefix="bench-airflow-")
    conn = {"login": ACCOUNT, "password": KEY, "extra": {"account_url": base}}
    env = {
        **os.environ,
        "AIRFLOW_HOME": home,
        "AIRFLOW_CONN_BENCH": json.dumps({"conn_type": "azbatch", **conn}),
        "AIRFLOW_CONN_BENCH_OFFICIAL": json.dumps({"conn_type": "azure_batch", **conn}),
        "PYTHONWARNINGS": "ignore",
    }
    results: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    saved = OUT / "results.json"  # written after every scenario: a late failure loses nothing

    def save(capacity: dict[str, float]) -> None:
        runs = [{"spec": {k: v for k, v in s.items() if k != "growing"}, "result": r} for s, r in results]
        saved.write_text(json.dumps({"capacity": capacity, "machine": machine(), "runs": runs}, indent=1))

    try:
        capacity = asyncio.run(endpoint_capacity(base))
        print("endpoint alone: " + ", ".join(f"{k} {v:.0f} req/s" for k, v in capacity.items()), flush=True)
        for spec in matrix(args.quick):
            if args.only and args.only not in spec["name"]:
                continue
            if spec.get("skip"):
                results.append((spec, None))
                continue
            spec.update(endpoint=base, endpoint_pid=endpoint.pid)
            began = time.time()
            result = run_child(spec, env, args.profile)
            results.append((spec, result))
            save(capacity)
            if result:
                print(
                    f"  {spec['name']}: {result['requests_per_s']:.1f} req/s, "
                    f"{fmt(result['requests_per_job_poll'], '{:.3f}')} a job a poll, ends "
                    f"{result['ends_in_time']} of {result['ends']} within poll + 1 s, "
                    f"lag p99 {fmt(result['lag_p99_ms'])} ms (max {fmt(result['lag_max_ms'])}; "
                    f"GC {result['gc_pauses']} pauses, {result['gc_gen2']} full, {result['gc_ms_total']:.0f} ms, "
                    f"longest {result['gc_ms_max']:.0f} ms), events {result['events']}, "
                    f"errors {result['errors']} ({time.time() - began:.0f} s)",
                    flush=True,
                )
    finally:
        endpoint.terminate()
        endpoint.wait()
        shutil.rmtree(home, ignore_errors=True)
    full = not (args.quick or args.only or args.profile)  # only a full run replaces bench/results.md
    text = render(saved)
    target = results_file.write(HERE / "results.md", started, load, text, full)
    print(f"\n{target.read_text()}")


def render(saved: Path, target: Path | None = None) -> str:
    """The table (with the endpoint's own capacity) from a results.json; ``target``: written there too."""
    data = json.loads(saved.read_text())
    results = [(run["spec"], run["result"]) for run in data["runs"]]
    capacity = data["capacity"]
    text = "\n".join(
        [
            "The endpoint and the triggers share the cores. Synthetic endpoint alone: "
            + ", ".join(f"{k} {v:.0f} req/s" for k, v in capacity.items())
            + ".",
            "",
            table(results),
            "",
            "The official trigger cannot stream output: its streaming and ratio rows are n/a (not run).",
            "",
            "The garbage collector in the same run:",
            "",
            gc_table(results),
        ]
    )
    if target is not None:
        target.write_text(text + "\n")
    return text


if __name__ == "__main__":
    main()
