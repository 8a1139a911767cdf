"""A synthetic Azure Batch REST endpoint for the benchmarks: thousands of jobs whose tasks write output
computed from the clock, served to the unmodified ``azure-batch`` SDK (sync and aio).

Not an emulator: no processes, no scheduler. The harness creates jobs from a spec (``POST /_bench/setup``);
every running task's ``stdout.txt``/``stderr.txt`` grows at a fixed rate from the moment it was created,
so the bytes written are known exactly at any time. It answers only what a watching trigger asks:

    GET  /jobs/{j}/taskcounts              200 {"taskCounts", "taskSlotCounts"}
    GET  /jobs/{j}                         200 (``$select``)
    GET  /jobs                             200 (``$filter=stateTransitionTime ge datetime'...'`` only, ``$select``;
                                           the jobs of the account the Shared Key names)
    GET  /jobs/{j}/tasks                   200 (``$filter`` on id/state with ``or``, ``$select``, paging)
    GET  /jobs/{j}/tasks/{t}/files         200 stdout.txt, stderr.txt, wd
    HEAD /jobs/{j}/tasks/{t}/files/{f}     200, headers only
    GET  /jobs/{j}/tasks/{t}/files/{f}     200 with the ``ocp-range`` slice (never 206: the SDK wants 200)

Response shapes and headers follow the recorded real service (local-azure-batch/tests/fixtures). Any
Shared Key signature is accepted: the endpoint is not what is measured.

Admin (not Batch): ``POST /_bench/setup`` (spec below), ``POST /_bench/finish`` (every task completes now),
``POST /_bench/ends`` (``{"first": epoch seconds, "spread": seconds}``: the jobs end one after the other),
``GET /_bench/stats`` (requests and response bytes per operation, file bytes served and written, the
fewest polls of a job), ``POST /_bench/account`` (``{"jobs": [...]}``: their bytes served and written,
lines written). Run: ``python bench/synthetic_batch.py --port 8765 [--latency-ms 10]`` (Batch requests are
answered that much later, as over a network).

Spec: ``{"prefix": "b1", "jobs": 100, "tasks": 20, "output": {"stdout": "lines", "stderr": "quiet"},
"growing": [[job, task], ...] or null (all), "rate": 800, "unit": 80, "phased": false, "runtime": null,
"timeout_jobs": [job, ...]}``: ``output`` says what the growing tasks write (``lines``: numbered lines of
``unit`` bytes; ``progress``: ``\\r`` bars of ``unit`` bytes, no newline; ``quiet``: nothing), one unit every
``unit / rate`` seconds (``phased``: each stream at its own phase of that period, spread evenly, as tasks that
started apart; else all at once); the other tasks write nothing. ``runtime``: seconds after
which every task completes. ``timeout_jobs``: jobs left out of the fewest-polls count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import formatdate
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

JSON_TYPE = "application/json; odata=minimalmetadata"
ERROR_METADATA = "Microsoft.Azure.Batch.Protocol.Entities.Container.errors/@Element"
UNIT = 80  # bytes per line or progress bar
PAGE = 1000  # the service's default page size for lists
STREAMS = ("stdout.txt", "stderr.txt")


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc1123(ts: float) -> str:
    return formatdate(ts, usegmt=True)


# -- output that grows with the clock ---------------------------------------------------------------------
def line_unit(task: str, k: int, size: int = UNIT) -> bytes:
    head = f"{task} line {k:09d} "
    return (head + "." * (size - 1 - len(head)) + "\n").encode()


def bar_unit(task: str, k: int, size: int = UNIT) -> bytes:
    done = k % 50
    head = f"\r{task} step {k:09d} [" + "#" * done + " " * (50 - done) + "]"
    return (head + " " * (size - len(head)))[:size].encode()


def phase_of(index: int, period: float) -> float:
    """Where in its period a growing stream writes (streams spread evenly over it, as tasks started apart)."""
    return period * ((index * 0.6180339887498949) % 1.0)


@dataclass
class Stream:
    kind: str  # quiet | lines | progress
    rate: float  # bytes per second
    task: str
    unit: int = UNIT  # bytes per line (or bar): written one whole unit at a time, every unit / rate seconds
    phase: float = 0.0  # its writes come this much later in each period (the first: at phase + period)

    def size(self, elapsed: float) -> int:
        if self.kind == "quiet" or elapsed <= self.phase:
            return 0
        return int((elapsed - self.phase) * self.rate / self.unit) * self.unit

    def read(self, start: int, end: int) -> bytes:
        unit = line_unit if self.kind == "lines" else bar_unit
        first, last = start // self.unit, end // self.unit
        data = b"".join(unit(self.task, k, self.unit) for k in range(first, last + 1))
        return data[start - first * self.unit : end - first * self.unit + 1]

    def written_at(self, created: float, k: int) -> float:
        """When unit ``k`` (0-based) was written."""
        return created + self.phase + (k + 1) * self.unit / self.rate


@dataclass
class Task:
    id: str
    job: Job
    created: float
    streams: dict[str, Stream]
    wire: dict[str, Any] = field(default_factory=dict)  # state -> rendered task (cached)

    def state(self, now: float) -> str:
        return "completed" if self.job.end is not None and now >= self.job.end else "running"

    def elapsed(self, now: float) -> float:
        end = self.job.end
        return (min(now, end) if end is not None else now) - self.created

    def to_wire(self, base: str, state: str) -> dict[str, Any]:
        cached = self.wire.get(state)
        if cached is not None:
            return cached
        url = f"{base}/jobs/{self.job.id}/tasks/{self.id}"
        start = self.created
        node = "tvmps_" + uuid.uuid5(uuid.NAMESPACE_URL, self.job.id).hex + "_d"
        node_url = f"{base}/pools/{self.job.pool}/nodes/{node}"
        execution: dict[str, Any] = {"startTime": iso(start), "retryCount": 0, "requeueCount": 0}
        out: dict[str, Any] = {
            "id": self.id,
            "url": url,
            "eTag": "0x8DE2CBEB9FAA394",
            "creationTime": iso(start - 1),
            "lastModified": iso(start - 1),
            "state": state,
            "stateTransitionTime": iso(start),
            "previousState": "active" if state == "running" else "running",
            "previousStateTransitionTime": iso(start - 1),
            "commandLine": f'/bin/bash -c "python train.py --shard {self.id}"',
            "userIdentity": {"autoUser": {"scope": "pool", "elevationLevel": "nonadmin"}},
            "constraints": {
                "maxWallClockTime": "P10675199DT2H48M5.4775807S",
                "retentionTime": "P7D",
                "maxTaskRetryCount": 0,
            },
            "requiredSlots": 1,
            "executionInfo": execution,
            "nodeInfo": {
                "affinityId": f"TVM:{node}",
                "nodeUrl": node_url,
                "poolId": self.job.pool,
                "nodeId": node,
                "taskRootDirectory": f"workitems/{self.job.id}/job-1/{self.id}",
                "taskRootDirectoryUrl": f"{node_url}/files/workitems/{self.job.id}/job-1/{self.id}",
            },
        }
        if state == "completed":
            end = self.job.end or start
            out["stateTransitionTime"] = iso(end)
            out["previousStateTransitionTime"] = iso(start)
            execution.update({"endTime": iso(end), "exitCode": 0, "result": "success"})
        self.wire[state] = out
        return out


@dataclass
class Job:
    id: str
    created: float
    pool: str = "bench-pool"
    end: float | None = None
    account: str = "benchacct"
    tasks: list[Task] = field(default_factory=list)
    by_id: dict[str, Task] = field(default_factory=dict)

    def state(self, now: float) -> str:
        return "completed" if self.end is not None and now >= self.end else "active"


class Service:
    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.unwatched: set[str] = set()  # jobs left out of min_polls (their trigger times out early)
        self.reset_counters()

    def reset_counters(self) -> None:
        self.ops: dict[str, list[int]] = {}  # operation -> [requests, response bytes]
        self.served = 0  # file bytes sent by ranged reads
        self.served_by_job: dict[str, int] = {}
        self.errors = 0
        self.polls: dict[str, int] = {}  # job -> polls (task counts, or unfiltered first pages of list tasks)
        self.by_account: dict[str, int] = {}  # Batch requests per account (the Shared Key's account name)
        self.growing_looks = 0  # file listings of tasks whose output grows
        self.growing_reads = 0  # looks at a growing file: those listings, and ranged reads not after one
        self.tasks_listed: set[tuple[str, str]] = set()  # (job, task) whose files were listed

    def setup(self, spec: dict[str, Any]) -> dict[str, Any]:
        now = time.time()
        self.jobs.clear()
        self.reset_counters()
        prefix, rate = spec["prefix"], float(spec.get("rate", 800))
        unit = int(spec.get("unit", UNIT))
        phased = bool(spec.get("phased", False))  # growing streams write at phases spread over their period
        output = spec.get("output", {})
        growing = spec.get("growing")
        grow = None if growing is None else {(j, t) for j, t in growing}
        runtime = spec.get("runtime")
        self.unwatched = {f"{prefix}-{j:05d}" for j in spec.get("timeout_jobs", [])}
        accounts = spec.get("accounts") or ["benchacct"]
        # "ends": [seconds from now, spread]: job j of n ends at now + first + spread * j / n.
        ends = spec.get("ends")
        for j in range(spec["jobs"]):
            end = now + runtime if runtime else None
            if ends:
                end = now + ends[0] + ends[1] * j / spec["jobs"]
            job = Job(f"{prefix}-{j:05d}", now, end=end, account=accounts[j % len(accounts)])
            for t in range(spec["tasks"]):
                task_id = f"t{t:03d}"
                writes = grow is None or (j, t) in grow
                phase = phase_of(j * spec["tasks"] + t, unit / rate) if phased else 0.0
                streams = {
                    name: Stream(output.get(name[:6], "quiet") if writes else "quiet", rate, task_id, unit, phase)
                    for name in STREAMS
                }
                task = Task(task_id, job, now, streams)
                job.tasks.append(task)
                job.by_id[task_id] = task
            self.jobs[job.id] = job
        return {"jobs": len(self.jobs), "time": now}

    def schedule_ends(self, first: float, spread: float) -> dict[str, Any]:
        """Job j of n ends at ``first`` + ``spread`` * j / n (epoch seconds)."""
        jobs = list(self.jobs.values())
        for j, job in enumerate(jobs):
            job.end = first + spread * j / len(jobs)
            for task in job.tasks:
                task.wire.pop("completed", None)
        return {"jobs": len(jobs)}

    def finish(self) -> dict[str, Any]:
        now = time.time()
        for job in self.jobs.values():
            if job.end is None or job.end > now:
                job.end = now
                for task in job.tasks:
                    task.wire.pop("completed", None)
        return {"time": now}

    def written(self, now: float, kind: str | None = None, jobs: list[str] | None = None, units: bool = False) -> int:
        """Bytes written (``units``: lines or bars) by now, by the streams of ``kind`` of ``jobs`` (all)."""
        return sum(
            stream.size(task.elapsed(now)) // (stream.unit if units else 1)
            for job in (self.jobs.values() if jobs is None else (self.jobs[j] for j in jobs))
            for task in job.tasks
            for stream in task.streams.values()
            if kind is None or stream.kind == kind
        )

    def account(self, jobs: list[str]) -> dict[str, Any]:
        """Output of these jobs: file bytes served and written, lines written."""
        now = time.time()
        return {
            "served": sum(self.served_by_job.get(job, 0) for job in jobs),
            "written": self.written(now, jobs=jobs),
            "lines_written": {job: self.written(now, "lines", [job], units=True) for job in jobs},
        }

    def stats(self) -> dict[str, Any]:
        now = time.time()
        polls = [self.polls.get(job, 0) for job in self.jobs if job not in self.unwatched]
        return {
            "time": now,
            "ops": self.ops,
            "requests": sum(v[0] for v in self.ops.values()),
            "bytes": sum(v[1] for v in self.ops.values()),
            "served": self.served,
            "written": self.written(now),
            "lines_written": self.written(now, "lines", units=True),
            "errors": self.errors,
            "min_polls": min(polls) if polls else 0,
            "by_account": dict(self.by_account),
            "growing_looks": self.growing_looks,
            "growing_reads": self.growing_reads,
            "tasks_listed": len(self.tasks_listed),
            "ends": {job.id: job.end for job in self.jobs.values()},
        }


# -- HTTP -------------------------------------------------------------------------------------------------
SERVICE = Service()
RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
CLAUSE = re.compile(r"^\(?\s*(id|state)\s+eq\s+'((?:[^']|'')*)'\s*\)?$")


def base_url(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


def count(op: str, response: web.StreamResponse, body_len: int) -> web.StreamResponse:
    # Wire bytes of the response: status line, headers (with the Content-Length, Date and Server that
    # aiohttp adds when sending) and body.
    head = 17 + sum(len(k) + len(v) + 4 for k, v in response.headers.items()) + 2 + 91 + len(str(body_len))
    entry = SERVICE.ops.get(op)
    if entry is None:
        entry = SERVICE.ops[op] = [0, 0]
    entry[0] += 1
    entry[1] += head + body_len
    if response.status >= 400:
        SERVICE.errors += 1
    return response


def headers(extra: dict[str, str] | None = None) -> dict[str, str]:
    out = {"DataServiceVersion": "3.0", "request-id": str(uuid.uuid4())}
    if extra:
        out.update(extra)
    return out


def json_reply(op: str, request: web.Request, metadata: str, body: dict[str, Any], extra=None) -> web.Response:
    data = json.dumps({"odata.metadata": f"{base_url(request)}/$metadata#{metadata}", **body}).encode()
    response = web.Response(body=data, headers={"Content-Type": JSON_TYPE, **headers(extra)})
    return count(op, response, len(data))  # type: ignore[return-value]


def error(op: str, request: web.Request, status: int, code: str, message: str) -> web.Response:
    body = {
        "odata.metadata": f"{base_url(request)}/$metadata#{ERROR_METADATA}",
        "code": code,
        "message": {"lang": "en-US", "value": f"{message}\nRequestId:{uuid.uuid4()}\nTime:{iso(time.time())}"},
    }
    data = json.dumps(body).encode()
    response = web.Response(status=status, body=data, headers={"Content-Type": JSON_TYPE, **headers()})
    return count(op, response, len(data))  # type: ignore[return-value]


def select(item: dict[str, Any], request: web.Request) -> dict[str, Any]:
    text = request.query.get("$select")
    if not text:
        return item
    return {name: item[name] for name in (p.strip() for p in text.split(",")) if name in item}


def task_filter(text: str | None):
    """``$filter`` as the watching code sends it: ``id eq '..'`` / ``state eq '..'`` clauses joined by ``or``."""
    if not text:
        return None
    wanted: dict[str, set[str]] = {"id": set(), "state": set()}
    for clause in re.split(r"\s+or\s+", text.strip()):
        match = CLAUSE.match(clause.strip())
        if match is None:
            raise ValueError(text)
        wanted[match.group(1)].add(match.group(2).replace("''", "'"))
    return lambda task_id, state: task_id in wanted["id"] or state in wanted["state"]


def find_job(request: web.Request) -> Job | None:
    return SERVICE.jobs.get(request.match_info["job"])


async def task_counts(request: web.Request) -> web.Response:
    job = find_job(request)
    if job is None:
        return error("taskcounts", request, 404, "JobNotFound", "The specified job does not exist.")
    SERVICE.polls[job.id] = SERVICE.polls.get(job.id, 0) + 1
    done = job.end is not None and time.time() >= job.end
    n = len(job.tasks)
    counts = {"active": 0, "running": 0 if done else n, "completed": n if done else 0}
    counts.update(succeeded=counts["completed"], failed=0)
    return json_reply(
        "taskcounts", request, "taskcountsresult/@Element", {"taskCounts": counts, "taskSlotCounts": counts}
    )


async def list_nodes(request: web.Request) -> web.Response:
    """A pool's nodes, as the watch samples them for the idle time it reports (none listed: the endpoint keeps
    no nodes; the request is what it costs)."""
    return json_reply("list_nodes", request, "nodes", {"value": []})


async def get_job(request: web.Request) -> web.Response:
    job = find_job(request)
    if job is None:
        return error("get_job", request, 404, "JobNotFound", "The specified job does not exist.")
    now = time.time()
    state = job.state(now)
    execution: dict[str, Any] = {"startTime": iso(job.created), "poolId": job.pool}
    if state == "completed" and job.end is not None:
        execution.update(endTime=iso(job.end), terminateReason="AllTasksComplete")
    item = {
        "id": job.id,
        "url": f"{base_url(request)}/jobs/{job.id}",
        "eTag": "0x8DE2CBEB1A2B3C4",
        "lastModified": iso(job.created),
        "creationTime": iso(job.created),
        "state": state,
        "stateTransitionTime": iso(job.end if state == "completed" and job.end else job.created),
        "priority": 0,
        "maxParallelTasks": -1,
        "allowTaskPreemption": False,
        "usesTaskDependencies": False,
        "constraints": {"maxWallClockTime": "P10675199DT2H48M5.4775807S", "maxTaskRetryCount": 0},
        "poolInfo": {"poolId": job.pool},
        "executionInfo": execution,
        "onAllTasksComplete": "terminatejob",
        "onTaskFailure": "noaction",
    }
    extra = {"ETag": item["eTag"], "Last-Modified": rfc1123(job.created)}
    return json_reply("get_job", request, "jobs/@Element", select(item, request), extra)


JOB_CHANGES = re.compile(r"^stateTransitionTime ge datetime'([^']+)'$")


async def list_jobs(request: web.Request) -> web.Response:
    """The jobs of the caller's account whose state changed since a time: the one filter the account view sends
    (Batch documents more for List Jobs; anything else is refused here, as the endpoint is not an emulator)."""
    match = JOB_CHANGES.match(request.query.get("$filter", ""))
    if match is None:
        return error("list_jobs", request, 400, "InvalidQueryParameterValue", "Only stateTransitionTime ge is served.")
    since = datetime.fromisoformat(match.group(1).replace("Z", "+00:00")).timestamp()
    account = caller(request)
    now = time.time()
    items = []
    for job in SERVICE.jobs.values():
        if job.account != account:
            continue
        state = job.state(now)
        changed = job.end if state == "completed" and job.end is not None else job.created
        if changed >= since:
            item = {"id": job.id, "state": state, "stateTransitionTime": iso(changed)}
            items.append(select(item, request))
    return json_reply("list_jobs", request, "jobs", {"value": items})


def caller(request: web.Request) -> str:
    auth = request.headers.get("Authorization", "")
    return auth[len("SharedKey ") :].split(":", 1)[0] if auth.startswith("SharedKey ") else ""


async def list_tasks(request: web.Request) -> web.Response:
    job = find_job(request)
    query = request.query
    skip = int(query.get("$skiptoken", "0"))
    op = "list_tasks_next" if skip else ("list_tasks_filtered" if "$filter" in query else "list_tasks")
    if job is None:
        return error(op, request, 404, "JobNotFound", "The specified job does not exist.")
    try:
        where = task_filter(query.get("$filter"))
    except ValueError:
        return error(op, request, 400, "InvalidQueryParameterValue", "The $filter is not supported here.")
    if op == "list_tasks":
        SERVICE.polls[job.id] = SERVICE.polls.get(job.id, 0) + 1
    page_size = min(int(query.get("maxresults", PAGE)), PAGE)
    now, base = time.time(), base_url(request)
    page: list[dict[str, Any]] = []
    position = skip
    while position < len(job.tasks) and len(page) < page_size:
        task = job.tasks[position]
        position += 1
        state = task.state(now)
        if where is None or where(task.id, state):
            page.append(select(task.to_wire(base, state), request))
    body: dict[str, Any] = {"value": page}
    if position < len(job.tasks):
        rest = {k: v for k, v in query.items() if k not in ("$skiptoken", "api-version")}
        rest["$skiptoken"] = str(position)
        encoded = urlencode({"api-version": query.get("api-version", ""), **rest}, quote_via=quote, safe="$,()'")
        body["odata.nextLink"] = f"{base}{request.path}?{encoded}"
    return json_reply(op, request, "tasks", body)


def find_task(request: web.Request) -> Task | None:
    job = find_job(request)
    if job is None:
        return None
    return job.by_id.get(request.match_info["task"])


async def list_files(request: web.Request) -> web.Response:
    task = find_task(request)
    if task is None:
        return error("list_files", request, 404, "TaskNotFound", "The specified task does not exist.")
    now = time.time()
    url = f"{base_url(request)}/jobs/{task.job.id}/tasks/{task.id}/files"
    created, modified = iso(task.created), iso(min(now, task.job.end or now))
    value: list[dict[str, Any]] = []
    for name in sorted(STREAMS):
        props = {
            "creationTime": created,
            "lastModified": modified,
            "contentLength": str(task.streams[name].size(task.elapsed(now))),
            "contentType": "text/plain",
        }
        value.append({"name": name, "url": f"{url}/{name}", "isDirectory": False, "properties": props})
    value.append({"name": "wd", "url": f"{url}/wd", "isDirectory": True})
    if any(stream.kind != "quiet" for stream in task.streams.values()):
        SERVICE.growing_looks += 1
        SERVICE.growing_reads += 1
    SERVICE.tasks_listed.add((task.job.id, task.id))
    return json_reply("list_files", request, "files", {"value": value})


def file_headers(request: web.Request, task: Task, name: str, now: float) -> dict[str, str]:
    url = f"{base_url(request)}/jobs/{task.job.id}/tasks/{task.id}/files/{name}"
    return headers(
        {
            "Content-Type": "text/plain",
            "Last-Modified": rfc1123(min(now, task.job.end or now)),
            "ocp-creation-time": rfc1123(task.created),
            "ocp-batch-file-isdirectory": "False",
            "ocp-batch-file-url": quote(url, safe=""),
            "ocp-batch-file-mode": "100644",
        }
    )


async def file(request: web.Request) -> web.StreamResponse:
    head = request.method == "HEAD"
    op = "file_head" if head else "file_get"
    task = find_task(request)
    name = request.match_info["name"]
    if task is None or name not in task.streams:
        return error(op, request, 404, "FileNotFound" if task else "TaskNotFound", "The specified file does not exist.")
    now = time.time()
    stream = task.streams[name]
    size = stream.size(task.elapsed(now))
    response_headers = file_headers(request, task, name, now)
    if head:
        response = web.StreamResponse(headers=response_headers)
        response.content_length = size  # what a GET would return
        count(op, response, 0)
        await response.prepare(request)
        await response.write_eof()
        return response
    start, end = 0, size - 1
    text = request.headers.get("ocp-range")
    if text:
        match = RANGE.match(text.strip())
        if match is None:
            return error(op, request, 400, "InvalidRange", "The ocp-range header must look like bytes=<start>-<end>.")
        start = int(match.group(1))
        end = min(int(match.group(2)), size - 1) if match.group(2) else size - 1
        if start >= size or end < start:
            return error(op, request, 416, "InvalidRange", "The range specified is invalid for the current size.")
    data = stream.read(start, end) if size else b""
    if stream.kind != "quiet" and start % stream.unit == stream.unit - 1:
        # A read straight from where the reader had read to (one byte early): a look at the file of its own. A
        # read that starts on a line's first byte follows a listing, which counted already.
        SERVICE.growing_reads += 1
    SERVICE.served += len(data)
    SERVICE.served_by_job[task.job.id] = SERVICE.served_by_job.get(task.job.id, 0) + len(data)
    response = web.Response(body=data, headers=response_headers)
    return count(op, response, len(data))


async def admin_setup(request: web.Request) -> web.Response:
    return web.json_response(SERVICE.setup(await request.json()))


async def admin_finish(request: web.Request) -> web.Response:
    return web.json_response(SERVICE.finish())


async def admin_ends(request: web.Request) -> web.Response:
    body = await request.json()
    return web.json_response(SERVICE.schedule_ends(float(body["first"]), float(body["spread"])))


async def admin_account(request: web.Request) -> web.Response:
    return web.json_response(SERVICE.account((await request.json())["jobs"]))


async def admin_stats(request: web.Request) -> web.Response:
    stats = SERVICE.stats()
    if request.query.get("brief"):  # polled often: without the jobs' ends (10,000 of them at the largest scale)
        del stats["ends"]
    return web.json_response(stats)


async def admin_reset(request: web.Request) -> web.Response:
    SERVICE.reset_counters()
    return web.json_response({"ok": True})


async def fallback(request: web.Request) -> web.Response:
    return error("unsupported", request, 400, "UnsupportedOperation", f"{request.method} {request.path} is not served.")


def make_app(latency: float = 0.0) -> web.Application:
    @web.middleware
    async def network(request: web.Request, handler: Any) -> web.StreamResponse:
        """A Batch request answers after ``latency`` seconds, as over a network (admin ones at once)."""
        if not request.path.startswith("/_bench/"):
            account = caller(request)
            SERVICE.by_account[account] = SERVICE.by_account.get(account, 0) + 1
            if latency:
                await asyncio.sleep(latency)
        return await handler(request)

    app = web.Application(middlewares=[network])
    r = app.router
    r.add_get("/jobs/{job}/taskcounts", task_counts)
    r.add_get("/jobs/{job}/tasks", list_tasks)
    r.add_get("/jobs/{job}/tasks/{task}/files", list_files)
    r.add_route("HEAD", "/jobs/{job}/tasks/{task}/files/{name}", file)
    r.add_get("/jobs/{job}/tasks/{task}/files/{name}", file, allow_head=False)
    r.add_get("/jobs/{job}", get_job)
    r.add_get("/jobs", list_jobs)
    r.add_get("/pools/{pool}/nodes", list_nodes)
    r.add_post("/_bench/setup", admin_setup)
    r.add_post("/_bench/finish", admin_finish)
    r.add_post("/_bench/ends", admin_ends)
    r.add_post("/_bench/reset", admin_reset)
    r.add_post("/_bench/account", admin_account)
    r.add_get("/_bench/stats", admin_stats)
    r.add_route("*", "/{tail:.*}", fallback)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="answer Batch requests this much later")
    args = parser.parse_args()
    try:
        import uvloop  # the endpoint is not what is measured: let it be as fast as it can

        uvloop.install()
    except ImportError:
        pass
    app = make_app(args.latency_ms / 1000)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None, backlog=4096)


if __name__ == "__main__":
    main()
