"""A synthetic Azure Batch REST endpoint for the benchmarks: accounts whose pools have nodes and task slots,
thousands of jobs whose tasks take those slots (or wait for one) and write output computed from the clock,
served to the unmodified ``azure-batch`` SDK (sync and aio).

Not an emulator: no processes. The harness creates pools and jobs from a spec (``POST /_bench/setup``,
:mod:`synthetic_service`) and says when the jobs end; every task's state, every node's running tasks and
``recentTasks`` (:mod:`synthetic_pools`) and every stream's bytes follow from the clock. It answers what a
watching trigger asks:

    GET  /jobs/{j}/taskcounts              200 {"taskCounts", "taskSlotCounts"}
    GET  /jobs/{j}                         200 (``$select``)
    GET  /jobs                             200 (``$filter=stateTransitionTime ge datetime'...'`` only, ``$select``,
                                           pages of 1,000; the jobs of the account the Shared Key names)
    GET  /jobs/{j}/tasks                   200 (``$filter`` on id/state with ``or``, ``$select``, pages of 1,000)
    GET  /jobs/{j}/tasks/{t}/files         200 stdout.txt, stderr.txt, wd (404 before the task has a node)
    HEAD /jobs/{j}/tasks/{t}/files/{f}     200, headers only
    GET  /jobs/{j}/tasks/{t}/files/{f}     200 with the ``ocp-range`` slice (never 206: the SDK wants 200)
    GET  /pools/{p}                        200 (``$select``)
    GET  /pools/{p}/nodes                  200 (``$select``, ``$filter`` on state with ``or``, pages of 1,000);
                                           by scenario 403 AuthorizationFailure or 404 PoolNotFound (GET pool too)

Response shapes and headers follow the recorded real service (/work/shared/fixtures/batch-service/recordings,
local-azure-batch/tests/fixtures); every ``odata.nextLink`` is absolute and carries every parameter of the next
page. Any Shared Key signature is accepted (the account is its name): the endpoint is not what is measured.

Admin (not Batch): ``POST /_bench/setup`` (spec: :mod:`synthetic_service`), ``POST /_bench/finish`` (every task
completes now), ``POST /_bench/ends`` (``{"first": epoch seconds, "spread": seconds}``: the jobs end one after
the other), ``GET /_bench/stats`` (requests and response bytes per operation and per account, file bytes served
and written, the fewest polls of a job; without ``?brief=1`` also each job's end, the first start of a large
job's tasks and every node listing: when, which pool, its status), ``POST /_bench/account`` (``{"jobs": [...]}``:
their bytes served and written, lines written). Run: ``python bench/synthetic_batch.py --port 8765
[--latency-ms 10]`` (Batch requests are answered that much later, as over a network).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
import uuid
from datetime import datetime
from email.utils import formatdate
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web
from synthetic_pools import Pool, iso
from synthetic_service import STREAMS, Job, Service, Stream, Task, phase_of

__all__ = ["Stream", "make_app", "phase_of"]

JSON_TYPE = "application/json; odata=minimalmetadata"
ERROR_METADATA = "Microsoft.Azure.Batch.Protocol.Entities.Container.errors/@Element"
PAGE = 1000  # the service's default (and largest) page size for lists


def rfc1123(ts: float) -> str:
    return formatdate(ts, usegmt=True)


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


def page_of(request: web.Request, items: list[Any], op: str, kind: str) -> web.Response:
    """A page of ``items`` (at most ``PAGE``, or ``maxresults``) from ``$skiptoken`` on, with an absolute
    ``odata.nextLink`` that carries every parameter the next page needs (the SDK re-sends none of them)."""
    query = request.query
    skip = int(query.get("$skiptoken", "0"))
    size = min(int(query.get("maxresults", PAGE)), PAGE)
    body: dict[str, Any] = {"value": items[skip : skip + size]}
    if skip + size < len(items):
        rest = {k: v for k, v in query.items() if k not in ("$skiptoken", "api-version")}
        rest["$skiptoken"] = str(skip + size)
        encoded = urlencode({"api-version": query.get("api-version", ""), **rest}, quote_via=quote, safe="$,()'")
        body["odata.nextLink"] = f"{base_url(request)}{request.path}?{encoded}"
    return json_reply(op, request, kind, body)


async def task_counts(request: web.Request) -> web.Response:
    job = find_job(request)
    if job is None:
        return error("taskcounts", request, 404, "JobNotFound", "The specified job does not exist.")
    SERVICE.polls[job.id] = SERVICE.polls.get(job.id, 0) + 1
    counts = job.counts(time.time())
    return json_reply(
        "taskcounts", request, "taskcountsresult/@Element", {"taskCounts": counts, "taskSlotCounts": counts}
    )


def find_pool(request: web.Request, op: str) -> Pool | web.Response:
    """The caller's pool, or the error its reads get (a pool that refuses them by scenario, or none such)."""
    pool = SERVICE.pools.get((caller(request), request.match_info["pool"]))
    if pool is not None and pool.fail == "403":
        return error(
            op, request, 403, "AuthorizationFailure", "This request is not authorized to perform this operation."
        )
    if pool is None or pool.fail == "404":
        return error(op, request, 404, "PoolNotFound", "The specified pool does not exist.")
    return pool


NODE_STATE = re.compile(r"^\(?\s*state\s+eq\s+'([a-z]+)'\s*\)?$")


def node_filter(text: str | None) -> set[str] | None:
    """``$filter`` on node states as the service accepts it: ``state eq '..'`` clauses joined by ``or``."""
    if not text:
        return None
    states = set()
    for clause in re.split(r"\s+or\s+", text.strip()):
        match = NODE_STATE.match(clause.strip())
        if match is None:
            raise ValueError(text)
        states.add(match.group(1))
    return states


async def list_nodes(request: web.Request) -> web.Response:
    """A pool's nodes (``$select``, ``$filter`` on state), each with its running tasks and ``recentTasks``."""
    first = "$skiptoken" not in request.query
    op = "list_nodes" if first else "list_nodes_next"
    found = find_pool(request, op)
    if first:
        status = found.status if isinstance(found, web.Response) else 200
        SERVICE.node_listings.append((time.time(), f"{caller(request)}/{request.match_info['pool']}", status))
    if isinstance(found, web.Response):
        return found
    try:
        states = node_filter(request.query.get("$filter"))
    except ValueError:
        return error(op, request, 400, "InvalidQueryParameterValue", "The $filter is not supported here.")
    now, base = time.time(), base_url(request)
    nodes = [node.to_wire(base, now) for node in found.nodes]
    items = [select(node, request) for node in nodes if states is None or node["state"] in states]
    return page_of(request, items, op, "nodes")


async def get_pool(request: web.Request) -> web.Response:
    found = find_pool(request, "get_pool")
    if isinstance(found, web.Response):
        return found
    item = found.to_wire(base_url(request), time.time())
    extra = {"ETag": item["eTag"], "Last-Modified": rfc1123(found.created)}
    return json_reply("get_pool", request, "pools/@Element", select(item, request), extra)


async def get_job(request: web.Request) -> web.Response:
    job = find_job(request)
    if job is None:
        return error("get_job", request, 404, "JobNotFound", "The specified job does not exist.")
    now = time.time()
    state = job.state(now)
    execution: dict[str, Any] = {"startTime": iso(job.created), "poolId": job.pool.id}
    if state == "completed" and job.done_at is not None:
        execution.update(endTime=iso(job.done_at), terminateReason="AllTasksComplete")
    item = {
        "id": job.id,
        "url": f"{base_url(request)}/jobs/{job.id}",
        "eTag": "0x8DE2CBEB1A2B3C4",
        "lastModified": iso(job.created),
        "creationTime": iso(job.created),
        "state": state,
        "stateTransitionTime": iso(job.done_at if state == "completed" and job.done_at else job.created),
        "priority": 0,
        "maxParallelTasks": -1,
        "allowTaskPreemption": False,
        "usesTaskDependencies": False,
        "constraints": {"maxWallClockTime": "P10675199DT2H48M5.4775807S", "maxTaskRetryCount": 0},
        "poolInfo": {"poolId": job.pool.id},
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
    first = "$skiptoken" not in request.query
    op = "list_jobs" if first else "list_jobs_next"
    match = JOB_CHANGES.match(request.query.get("$filter", ""))
    if match is None:
        return error(op, request, 400, "InvalidQueryParameterValue", "Only stateTransitionTime ge is served.")
    since = datetime.fromisoformat(match.group(1).replace("Z", "+00:00")).timestamp()
    account = caller(request)
    now = time.time()
    items = []
    for job in SERVICE.jobs.values():
        if job.account != account:
            continue
        state = job.state(now)
        changed = job.done_at if state == "completed" and job.done_at is not None else job.created
        if changed >= since:
            item = {"id": job.id, "state": state, "stateTransitionTime": iso(changed)}
            items.append(select(item, request))
    return page_of(request, items, op, "jobs")


def caller(request: web.Request) -> str:
    auth = request.headers.get("Authorization", "")
    return auth[len("SharedKey ") :].split(":", 1)[0] if auth.startswith("SharedKey ") else ""


async def list_tasks(request: web.Request) -> web.Response:
    job = find_job(request)
    query = request.query
    skip = "$skiptoken" in query
    op = "list_tasks_next" if skip else ("list_tasks_filtered" if "$filter" in query else "list_tasks")
    if job is None:
        return error(op, request, 404, "JobNotFound", "The specified job does not exist.")
    try:
        where = task_filter(query.get("$filter"))
    except ValueError:
        return error(op, request, 400, "InvalidQueryParameterValue", "The $filter is not supported here.")
    if op == "list_tasks":
        SERVICE.polls[job.id] = SERVICE.polls.get(job.id, 0) + 1
    now, base = time.time(), base_url(request)
    items = []
    for task in job.tasks:
        state = task.state(now)
        if where is None or where(task.id, state):
            items.append(select(task.to_wire(base, state, now), request))
    return page_of(request, items, op, "tasks")


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
    if task.state(now) == "active":
        # No node yet, so no files: what the local Batch service answers too.
        return error("list_files", request, 404, "FileNotFound", "The specified file does not exist.")
    url = f"{base_url(request)}/jobs/{task.job.id}/tasks/{task.id}/files"
    created, modified = iso(task.start), iso(min(now, task.end))
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
            "Last-Modified": rfc1123(min(now, task.end)),
            "ocp-creation-time": rfc1123(task.start),
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
    # brief: polled often, without what grows with the jobs (10,000 ends at the largest scale)
    return web.json_response(SERVICE.stats(brief=bool(request.query.get("brief"))))


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
    r.add_get("/pools/{pool}", get_pool)
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
