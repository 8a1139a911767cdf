"""The synthetic Batch endpoint's state: accounts, pools with nodes and task slots, jobs, tasks and their output,
all computed from the clock (``bench/synthetic_batch.py`` serves it over HTTP).

Spec (``POST /_bench/setup``): ``{"prefix": "b1", "jobs": 100, "tasks": 20, "accounts": ["benchacct0", ...],
"pools": 1, "nodes": null, "slots": null, "nodes_fail": null, "busy": null, "ends": null, "runtime": null,
"output": {"stdout": "lines", "stderr": "quiet"}, "growing": [[job, task], ...] or null (all), "rate": 800,
"unit": 80, "phased": false, "timeout_jobs": [job, ...]}``.

- Jobs are dealt to the accounts in turn, and within an account to its ``pools`` pools in turn (``bench-pool``
  when there is one, else ``bench-pool-<p>``). A pool has ``nodes`` nodes (default: enough for its tasks at
  ``MAX_SLOTS`` a node, at least 10) of ``slots`` task slots (default: enough for every task to run at once);
  its tasks take slots in the order they were created, and wait (``active``) for one to free
  (:mod:`synthetic_pools`).
- ``busy``: ``{"tasks": N, "end": seconds or null}``: a job of N tasks, created before the others on the first
  pool of the first account (no trigger watches it), that ends after that many seconds (null: never); with
  ``nodes``/``slots`` small enough, the other jobs' tasks wait behind it.
- ``nodes_fail``: ``"403"`` (every pool refuses its reads: ``AuthorizationFailure``) or ``"404"`` (every pool is
  gone: ``PoolNotFound``); the jobs run on as before.
- ``ends``: ``[first, spread]``: job j of n ends ``first + spread * j / n`` seconds after the setup; ``runtime``:
  every job ends that many seconds after it; else the jobs run until ``POST /_bench/ends`` or ``/finish``.
- ``output`` says what the growing tasks write (``lines``: numbered lines of ``unit`` bytes; ``progress``:
  ``\\r`` bars of ``unit`` bytes, no newline; ``quiet``: nothing), one unit every ``unit / rate`` seconds from the
  task's start (``phased``: each stream at its own phase of that period); the other tasks write nothing.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from synthetic_pools import INF, MAX_SLOTS, Node, Pool, iso, pool_for, sized

UNIT = 80  # bytes per line or progress bar
STREAMS = ("stdout.txt", "stderr.txt")


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


@dataclass(eq=False)
class Task:
    id: str
    job: Job
    created: float
    streams: dict[str, Stream]
    start: float = INF  # when it took a slot (inf: it waits)
    end: float = INF  # when it completed (inf: it does not)
    node: Node | None = None
    wire: dict[str, Any] = field(default_factory=dict)  # state -> rendered task (cached until rescheduled)

    @property
    def job_id(self) -> str:
        return self.job.id

    def state(self, now: float) -> str:
        if now < self.start:
            return "active"
        return "completed" if now >= self.end else "running"

    def elapsed(self, now: float) -> float:
        """Seconds it ran by ``now`` (its output grows from its start)."""
        return max(0.0, min(now, self.end) - self.start) if now >= self.start else 0.0

    def execution(self, now: float) -> dict[str, Any]:
        state = self.state(now)
        if state == "active":
            return {"retryCount": 0, "requeueCount": 0}
        out: dict[str, Any] = {"startTime": iso(self.start), "retryCount": 0, "requeueCount": 0}
        if state == "completed":
            out.update({"endTime": iso(self.end), "exitCode": 0, "result": "success"})
        return out

    def to_wire(self, base: str, state: str, now: float) -> dict[str, Any]:
        cached = self.wire.get(state)
        if cached is not None:
            return cached
        job = self.job
        out: dict[str, Any] = {
            "id": self.id,
            "url": f"{base}/jobs/{job.id}/tasks/{self.id}",
            "eTag": "0x8DE2CBEB9FAA394",
            "creationTime": iso(self.created - 1),
            "lastModified": iso(self.created - 1),
            "state": state,
            "stateTransitionTime": iso(self.created - 1),
            "commandLine": f'/bin/bash -c "python train.py --shard {self.id}"',
            "userIdentity": {"autoUser": {"scope": "pool", "elevationLevel": "nonadmin"}},
            "constraints": {
                "maxWallClockTime": "P10675199DT2H48M5.4775807S",
                "retentionTime": "P7D",
                "maxTaskRetryCount": 0,
            },
            "requiredSlots": 1,
            "executionInfo": self.execution(now),
        }
        if state != "active":
            out["stateTransitionTime"] = iso(self.end if state == "completed" else self.start)
            out["previousState"] = "running" if state == "completed" else "active"
            out["previousStateTransitionTime"] = iso(self.start if state == "completed" else self.created - 1)
        node = self.node
        if node is not None and state != "active":
            node_url = f"{base}/pools/{node.pool.id}/nodes/{node.id}"
            out["nodeInfo"] = {
                "affinityId": f"TVM:{node.id}",
                "nodeUrl": node_url,
                "poolId": node.pool.id,
                "nodeId": node.id,
                "taskRootDirectory": f"workitems/{job.id}/job-1/{self.id}",
                "taskRootDirectoryUrl": f"{node_url}/files/workitems/{job.id}/job-1/{self.id}",
            }
        self.wire[state] = out
        return out


@dataclass(eq=False)
class Job:
    id: str
    created: float
    pool: Pool
    end: float | None = None  # when the harness wants it to end (its tasks complete then)
    account: str = "benchacct"
    tasks: list[Task] = field(default_factory=list)
    by_id: dict[str, Task] = field(default_factory=dict)
    done_at: float | None = None  # when its last task completed (None: some never does)

    def state(self, now: float) -> str:
        return "completed" if self.done_at is not None and now >= self.done_at else "active"

    def counts(self, now: float) -> dict[str, int]:
        counts = {"active": 0, "running": 0, "completed": 0}
        for task in self.tasks:
            counts[task.state(now)] += 1
        counts.update(succeeded=counts["completed"], failed=0)
        return counts


class Service:
    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.pools: dict[tuple[str, str], Pool] = {}  # (account, pool id) -> pool
        self.unwatched: set[str] = set()  # jobs left out of min_polls (their trigger times out early; busy)
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
        self.node_listings: list[tuple[float, str, int]] = []  # (when, account/pool, status) of first pages

    def setup(self, spec: dict[str, Any]) -> dict[str, Any]:
        now = time.time()
        self.jobs.clear()
        self.pools.clear()
        self.reset_counters()
        prefix = spec["prefix"]
        accounts = spec.get("accounts") or ["benchacct"]
        n, per_job = spec["jobs"], spec["tasks"]
        self.unwatched = {f"{prefix}-{j:05d}" for j in spec.get("timeout_jobs", [])}
        self._make_pools(spec, accounts, now)
        busy = spec.get("busy")
        if busy:
            pool = self.pools[(accounts[0], self.pool_id(0, spec))]
            job = self._make_job(f"{prefix}-busy", pool, busy["tasks"], now, spec, -1)
            job.end = now + busy["end"] if busy.get("end") is not None else None
            self.unwatched.add(job.id)
        ends, runtime = spec.get("ends"), spec.get("runtime")
        for j in range(n):
            account = accounts[j % len(accounts)]
            pool = self.pools[(account, self.pool_id(pool_for(j, len(accounts), spec.get("pools", 1)), spec))]
            job = self._make_job(f"{prefix}-{j:05d}", pool, per_job, now, spec, j)
            if runtime:
                job.end = now + runtime
            if ends:
                job.end = now + ends[0] + ends[1] * j / n
        self.reschedule()
        return {
            "jobs": len(self.jobs),
            "time": now,
            "pools": {f"{a}/{p}": len(v.tasks) for (a, p), v in self.pools.items()},
        }

    @staticmethod
    def pool_id(index: int, spec: dict[str, Any]) -> str:
        return "bench-pool" if spec.get("pools", 1) == 1 else f"bench-pool-{index}"

    def _make_pools(self, spec: dict[str, Any], accounts: list[str], now: float) -> None:
        pools = spec.get("pools", 1)
        tasks_per_pool = -(-spec["jobs"] * spec["tasks"] // (len(accounts) * pools))
        nodes = spec.get("nodes") or max(10, -(-tasks_per_pool // MAX_SLOTS))
        slots = spec.get("slots") or sized(tasks_per_pool, nodes)
        for account in accounts:
            for p in range(pools):
                pool_id = self.pool_id(p, spec)
                self.pools[(account, pool_id)] = Pool(pool_id, account, nodes, slots, now, spec.get("nodes_fail"))

    def _make_job(self, job_id: str, pool: Pool, tasks: int, now: float, spec: dict[str, Any], j: int) -> Job:
        rate, unit = float(spec.get("rate", 800)), int(spec.get("unit", UNIT))
        phased = bool(spec.get("phased", False))  # growing streams write at phases spread over their period
        output = spec.get("output", {})
        growing = spec.get("growing")
        grow = None if growing is None else {(a, b) for a, b in growing}
        job = Job(job_id, now, pool, account=pool.account)
        for t in range(tasks):
            task_id = f"t{t:03d}"
            writes = j >= 0 and (grow is None or (j, t) in grow)
            phase = phase_of(j * tasks + t, unit / rate) if phased else 0.0
            streams = {
                name: Stream(output.get(name[:6], "quiet") if writes else "quiet", rate, task_id, unit, phase)
                for name in STREAMS
            }
            task = Task(task_id, job, now, streams)
            job.tasks.append(task)
            job.by_id[task_id] = task
            pool.tasks.append(task)
        self.jobs[job.id] = job
        return job

    def reschedule(self) -> None:
        """Place every task on its pool's slots again (the ends changed)."""
        for job in self.jobs.values():
            for task in job.tasks:
                task.end = job.end if job.end is not None else INF
                task.wire.clear()
        for pool in self.pools.values():
            pool.schedule()
        for job in self.jobs.values():
            last = max((task.end for task in job.tasks), default=job.end or INF)
            job.done_at = None if last == INF else last

    def schedule_ends(self, first: float, spread: float) -> dict[str, Any]:
        """Job j of n ends at ``first`` + ``spread`` * j / n (epoch seconds); the busy job keeps its end."""
        jobs = [job for job in self.jobs.values() if not job.id.endswith("-busy")]
        for j, job in enumerate(jobs):
            job.end = first + spread * j / len(jobs)
        self.reschedule()
        return {"jobs": len(jobs)}

    def finish(self) -> dict[str, Any]:
        now = time.time()
        for job in self.jobs.values():
            if job.end is None or job.end > now:
                job.end = now
        self.reschedule()
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

    def first_start(self, job_id: str) -> float | None:
        """When the job's first task started (None: none did, or will)."""
        job = self.jobs.get(job_id)
        start = min((task.start for task in job.tasks), default=INF) if job else INF
        return None if start == INF else start

    def stats(self, brief: bool = False) -> dict[str, Any]:
        now = time.time()
        polls = [self.polls.get(job, 0) for job in self.jobs if job not in self.unwatched]
        out: dict[str, Any] = {
            "time": now,
            "ops": self.ops,
            "requests": sum(v[0] for v in self.ops.values()),
            "bytes": sum(v[1] for v in self.ops.values()),
            "errors": self.errors,
            "min_polls": min(polls) if polls else 0,
            "by_account": dict(self.by_account),
            "growing_looks": self.growing_looks,
            "growing_reads": self.growing_reads,
            "tasks_listed": len(self.tasks_listed),
            "served": self.served,
        }
        if brief:  # polled often: nothing that grows with the jobs
            return out
        out.update(
            written=self.written(now),
            lines_written=self.written(now, "lines", units=True),
            ends={job.id: job.done_at for job in self.jobs.values() if job.id not in self.unwatched},
            first_starts={job.id: self.first_start(job.id) for job in self.jobs.values() if len(job.tasks) > 100},
            node_listings=self.node_listings,
            pools=len(self.pools),
        )
        return out


def request_id() -> str:
    return str(uuid.uuid4())
