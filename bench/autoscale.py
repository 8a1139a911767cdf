"""Paid, busy and idle node time of autoscaled shared pools against a fixed pool of the same size.

    python bench/autoscale.py [--formula provider|previous|previous-scaled|before-0.5|FILE ...] [--max-nodes 4]
        [--bursts 3] [--tasks 24] [--task-seconds 8] [--spread 0.25] [--gap 60] [--seed 1] [--multi-node N]
        [--autoscale-interval 10] [--node-start-seconds 6] [--no-fixed] [--timeline]
    python bench/autoscale.py --results      # make bench-autoscale: both experiments of autoscale-results.md

Starts the local Batch service and runs the same workload, at once, on pools made the way the provider
makes them (``BatchPool.shared(..., autoscale=True|False).pool_body(...)`` with the training example's
CPU pool requirements and ``--max-nodes``): an autoscaled pool per ``--formula`` (the provider's
formula by default) and a fixed pool of ``--max-nodes`` nodes. The workload: ``--bursts`` fan-outs of
``--tasks`` shards of ``--task-seconds`` +- ``--spread`` (the same durations on every pool; one job per
burst, as one DAG run's ``prepare`` makes), each followed by a ``--gap`` pause (the last one too, so the
pools are measured over whole periods). With ``--multi-node N`` each burst also has one task spanning ``N``
nodes (a multi-instance task of ``--task-seconds``), and the pools are made for it (one task slot per node);
``--formula before-0.5`` is the formula versions before 0.5.0 gave such a pool (``N`` nodes as its minimum).

Everything is measured from the service's own data: paid node-seconds (and node-hours on Azure's time
scale) run from each node's ``allocationTime`` until it is no longer listed (nodes are listed every second;
the pools are deleted at the end, so nodes still there are paid until they go); busy node-seconds are, per
node, the union of its tasks' (and subtasks') ``executionInfo`` start-end times; idle share = 1 - busy /
paid. Makespan: from the first job's submission to the last task's end; burst: from a job's submission to
its last task's end (mean).

Time scale: the local service samples ``$PendingTasks`` every second where Azure samples every 30
seconds, so one local second stands for 30 s. The defaults keep the proportions: an evaluation every
10 s (the provider's 5 minutes), nodes up in 6 s (about 3 minutes on Azure), shards of 6-10 s (3-5
minutes), 60-second pauses (30 minutes).

``--results`` runs the two experiments of ``bench/autoscale-results.md`` one after the other (:data:`EXPERIMENTS`)
and writes that file whole, stamped (``bench/results_file.py``): its tables and every figure in its words come
from this run.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from azure.batch import BatchClient
from azure.batch import models as m
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import ResourceNotFoundError

from airflow_provider_azbatch.compute.autoscale import autoscale_formula
from airflow_provider_azbatch.pools import BatchPool
from local_azure_batch.testing import run_local_batch_service

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results_file

RESULTS = Path(__file__).resolve().parent / "autoscale-results.md"

# The training example's CPU pool (example_dags/example_azbatch_training.py), with more nodes.
REQUIREMENTS = {"cpus": 1, "memory": "2Gi"}
# Azure records a sample every 30 s; the local service every second.
AZURE_SECONDS_PER_LOCAL_SECOND = 30


def previous_formula(max_nodes: int, slots: int, window: str) -> str:
    """The provider's formula before it was tuned: a 3-minute time range averaged after the last sample."""
    return "\n".join(
        [
            f"$samples = $PendingTasks.GetSamplePercent({window});",
            "$tasks = $samples < 70 ? max(0, $PendingTasks.GetSample(1)) : "
            f"max($PendingTasks.GetSample(1), avg($PendingTasks.GetSample({window})));",
            f"$nodes = ceil($tasks / {slots});",
            f"$TargetDedicatedNodes = max(0, min($nodes, {max_nodes}));",
            "$TargetLowPriorityNodes = 0;",
            "$NodeDeallocationOption = taskcompletion;",
        ]
    )


def now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class NodeLife:
    allocated: datetime
    gone: datetime | None = None


@dataclass
class Run:
    label: str
    pool_id: str
    body: dict[str, Any]
    nodes: dict[str, NodeLife] = field(default_factory=dict)
    counts: list[tuple[datetime, int]] = field(default_factory=list)
    submitted: list[datetime] = field(default_factory=list)
    tasks: list[list[m.BatchTask]] = field(default_factory=list)  # per burst
    subtasks: list[m.BatchSubtask] = field(default_factory=list)  # of the multi-node tasks
    finished: datetime | None = None
    error: BaseException | None = None


def watch_nodes(client: BatchClient, run: Run, stop: threading.Event, poll: float) -> None:
    """List the pool's nodes every ``poll`` seconds: when each was allocated and when it was gone."""
    while True:
        at = now()
        try:
            listed = {node.id: node for node in client.list_nodes(run.pool_id, select=["id", "allocationTime"])}
        except ResourceNotFoundError:
            listed = {}
        for node_id, node in listed.items():
            if node_id not in run.nodes:
                run.nodes[node_id] = NodeLife(allocated=node.allocation_time or at)
        for node_id, life in run.nodes.items():
            if life.gone is None and node_id not in listed:
                life.gone = at
        run.counts.append((at, len(listed)))
        if stop.is_set() and not listed:
            return
        time.sleep(poll)


def run_workload(client: BatchClient, run: Run, args: argparse.Namespace, durations: list[list[float]]) -> None:
    try:
        stop = threading.Event()
        client.create_pool(m.BatchPoolCreateOptions({"id": run.pool_id, **run.body}))
        watcher = threading.Thread(target=watch_nodes, args=(client, run, stop, args.poll), daemon=True)
        watcher.start()
        for burst in range(args.bursts):
            job_id = f"{run.pool_id}-burst-{burst}"
            run.submitted.append(now())
            client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=run.pool_id)))
            tasks = [
                m.BatchTaskCreateOptions(id=f"shard-{shard:03d}", command_line=f"sleep {seconds:g}")
                for shard, seconds in enumerate(durations[burst])
            ]
            if args.multi_node > 1:
                tasks.insert(
                    0,
                    m.BatchTaskCreateOptions(
                        id="multi-node",
                        command_line=f"sleep {args.task_seconds:g}",
                        multi_instance_settings=m.MultiInstanceSettings(
                            number_of_instances=args.multi_node, coordination_command_line="true"
                        ),
                    ),
                )
            client.create_tasks(job_id, tasks)
            while client.get_job_task_counts(job_id).task_counts.completed < len(tasks):
                time.sleep(0.5)
            time.sleep(args.gap)
        for burst in range(args.bursts):
            job_id = f"{run.pool_id}-burst-{burst}"
            run.tasks.append(list(client.list_tasks(job_id, select=["id", "executionInfo", "nodeInfo"])))
            if args.multi_node > 1:
                run.subtasks += list(client.list_subtasks(job_id, "multi-node"))
        client.begin_delete_pool(run.pool_id, polling_interval=1).result()
        stop.set()
        watcher.join()
        run.finished = now()
    except BaseException as exc:  # reported with the results
        run.error = exc


def union_seconds(intervals: list[tuple[datetime, datetime]]) -> float:
    total = 0.0
    end: datetime | None = None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += (stop - start).total_seconds()
            end = stop
        elif stop > end:
            total += (stop - end).total_seconds()
            end = stop
    return total


def ran(task: m.BatchTask) -> tuple[str, datetime, datetime]:
    info, node = task.execution_info, task.node_info
    if info is None or info.start_time is None or info.end_time is None or node is None:
        raise RuntimeError(f"task {task.id} did not run: {task.as_dict()}")
    return node.node_id or "", info.start_time, info.end_time


def measure(run: Run) -> dict[str, float]:
    assert run.finished is not None
    paid = sum(((life.gone or run.finished) - life.allocated).total_seconds() for life in run.nodes.values())
    per_node: dict[str, list[tuple[datetime, datetime]]] = {}
    burst_ends = []
    for tasks in run.tasks:
        for node, start, end in map(ran, tasks):
            per_node.setdefault(node, []).append((start, end))
        burst_ends.append(max(ran(task)[2] for task in tasks))
    for subtask in run.subtasks:
        if subtask.node_info is not None and subtask.start_time is not None and subtask.end_time is not None:
            per_node.setdefault(subtask.node_info.node_id or "", []).append((subtask.start_time, subtask.end_time))
    busy = sum(union_seconds(intervals) for intervals in per_node.values())
    bursts = [(end - submitted).total_seconds() for submitted, end in zip(run.submitted, burst_ends, strict=True)]
    return {
        "paid": paid,
        "azure_node_hours": paid * AZURE_SECONDS_PER_LOCAL_SECOND / 3600,
        "busy": busy,
        "idle": 1 - busy / paid if paid else 0.0,
        "makespan": (max(burst_ends) - run.submitted[0]).total_seconds(),
        "burst": statistics.mean(bursts),
        "peak": max(count for _, count in run.counts),
        "nodes": len(run.nodes),
    }


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-nodes", type=int, default=4, help="both pools' max_nodes (the fixed pool's size)")
    parser.add_argument("--bursts", type=int, default=3, help="fan-outs, each followed by a pause")
    parser.add_argument("--tasks", type=int, default=24, help="shards per fan-out")
    parser.add_argument("--task-seconds", type=float, default=8, help="how long a shard runs, on average")
    parser.add_argument(
        "--spread", type=float, default=0.25, help="shards run task-seconds x (1 +- spread), drawn uniformly"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the shard durations (the same for both pools)")
    parser.add_argument("--gap", type=float, default=60, help="pause after each fan-out, in seconds")
    parser.add_argument("--autoscale-interval", type=float, default=10, help="local seconds between evaluations")
    parser.add_argument("--node-start-seconds", type=float, default=6, help="local seconds for a node to start")
    parser.add_argument("--poll", type=float, default=1, help="seconds between node listings")
    parser.add_argument(
        "--formula",
        action="append",
        help="an autoscaled pool to run, repeatable: 'provider' (the default: the formula the provider generates), "
        "'previous' (the provider's formula before it was tuned), 'previous-scaled' (the same with its 3-minute "
        "window divided by 30, the samples it spans on Azure) or a file holding a formula",
    )
    parser.add_argument(
        "--multi-node", type=int, default=1, help="each burst also has one task spanning this many nodes"
    )
    parser.add_argument("--no-fixed", action="store_true", help="leave out the fixed pool")
    parser.add_argument("--timeline", action="store_true", help="also print each pool's node count, listing by listing")
    parser.add_argument(
        "--results", action="store_true", help="run both experiments of autoscale-results.md and write it"
    )
    return parser


def pools(args: argparse.Namespace) -> list[Run]:
    """The pools of one experiment: an autoscaled pool per ``--formula``, and the fixed pool."""
    runs = []
    for index, formula in enumerate(args.formula or ["provider"]):
        pool = BatchPool.shared("bench", requirements=REQUIREMENTS, max_nodes=args.max_nodes, autoscale=True)
        body = pool.pool_body(containers=False, multi_node=args.multi_node)
        label = "autoscaled"
        if formula == "before-0.5":
            body["autoScaleFormula"] = autoscale_formula(
                args.max_nodes, min_nodes=args.multi_node if args.multi_node > 1 else 0, task_slots_per_node=1
            )
            label = "autoscaled, before 0.5.0"
        elif formula == "previous":
            window = "TimeInterval_Minute * 3"
            body["autoScaleFormula"] = previous_formula(args.max_nodes, body["taskSlotsPerNode"], window)
            label = "autoscaled, previous formula"
        elif formula == "previous-scaled":
            # Its 3 minutes are 6 samples on Azure: as many local seconds.
            window = f"TimeInterval_Second * {3 * 60 // AZURE_SECONDS_PER_LOCAL_SECOND}"
            body["autoScaleFormula"] = previous_formula(args.max_nodes, body["taskSlotsPerNode"], window)
            label = "autoscaled, previous formula, window / 30"
        elif formula != "provider":
            body["autoScaleFormula"] = Path(formula).read_text().strip()
            label = f"autoscaled, {Path(formula).name}"
        runs.append(Run(label, f"bench-autoscaled-{index}", body))
    if not args.no_fixed:
        pool = BatchPool.shared("bench", requirements=REQUIREMENTS, max_nodes=args.max_nodes, autoscale=False)
        runs.append(Run("fixed", "bench-fixed", pool.pool_body(containers=False, multi_node=args.multi_node)))
    return runs


def experiment(args: argparse.Namespace) -> tuple[str, dict[str, dict[str, Any]]]:
    """Run the workload on every pool at once; the report (Markdown) and each pool's figures by label."""
    rng = random.Random(args.seed)
    low, high = args.task_seconds * (1 - args.spread), args.task_seconds * (1 + args.spread)
    durations = [[round(rng.uniform(low, high), 1) for _ in range(args.tasks)] for _ in range(args.bursts)]
    runs = pools(args)
    service_args = [
        "--quiet",
        "--autoscale-interval",
        f"{args.autoscale_interval:g}",
        "--node-start-seconds",
        f"{args.node_start_seconds:g}",
    ]
    with run_local_batch_service(extra_args=service_args) as batch:
        client = BatchClient(batch.url, AzureNamedKeyCredential(batch.account_name, batch.account_key))
        threads = [threading.Thread(target=run_workload, args=(client, run, args, durations)) for run in runs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for run in runs:
        if run.error is not None:
            raise run.error

    scale = AZURE_SECONDS_PER_LOCAL_SECOND
    body = runs[0].body
    lines = [
        f"Workload: {args.bursts} bursts x {args.tasks} shards x {low:g}-{high:g} s (seed {args.seed}), "
        f"{args.gap:g} s pause after each"
        + (f", and one {args.multi_node}-node task" if args.multi_node > 1 else "")
        + f"; max_nodes {args.max_nodes} ({body['vmSize']}, {body['taskSlotsPerNode']} task slots per node).",
        "",
        f"Local service: samples every 1 s, `--autoscale-interval {args.autoscale_interval:g}`, "
        f"`--node-start-seconds {args.node_start_seconds:g}` (x{scale} on Azure: samples every {scale} s, "
        f"evaluations every {args.autoscale_interval * scale / 60:g} min, nodes up in "
        f"{args.node_start_seconds * scale / 60:g} min, shards of {low * scale / 60:g}-{high * scale / 60:g} min, "
        f"pauses of {args.gap * scale / 60:g} min).",
        "",
    ]
    for run in runs:
        if run.body.get("enableAutoScale"):
            lines += [
                f"{run.label} (`autoScaleEvaluationInterval` {run.body['autoScaleEvaluationInterval']} on Azure):",
                "",
                "```text",
                run.body["autoScaleFormula"],
                "```",
                "",
            ]
    lines += [
        "| pool | paid node-s | paid node-h on Azure | busy node-s | idle share | makespan s | mean burst s | "
        "nodes used | peak |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    figures: dict[str, dict[str, Any]] = {}
    for run in runs:
        r = figures[run.label] = measure(run)
        r["timeline"] = "".join(str(min(count, 9)) for _, count in run.counts)
        lines.append(
            f"| {run.label} | {r['paid']:.0f} | {r['azure_node_hours']:.2f} | {r['busy']:.0f} | {r['idle']:.0%} | "
            f"{r['makespan']:.0f} | {r['burst']:.1f} | {r['nodes']} | {r['peak']} |"
        )
    if args.timeline:
        lines += ["", "Node counts, listing by listing (every second):", ""]
        lines += [f"- {run.label}: `{figures[run.label]['timeline']}`" for run in runs]
    return "\n".join(lines) + "\n", figures


# The experiments of autoscale-results.md: the formulas against a fixed pool; a burst with a multi-node task.
EXPERIMENTS = {
    "formulas": ["--formula", "previous", "--formula", "previous-scaled", "--formula", "provider"],
    "multi-node": [
        *("--formula", "before-0.5", "--formula", "provider"),
        *("--multi-node", "3", "--tasks", "6", "--no-fixed", "--timeline"),
    ],
}


def _on_azure(local_seconds: float) -> str:
    return f"about {local_seconds * AZURE_SECONDS_PER_LOCAL_SECOND / 60:.1f} minutes on Azure"


def formulas_text(report: str, figures: dict[str, dict[str, Any]]) -> str:
    ours, fixed = figures["autoscaled"], figures["fixed"]
    previous, scaled = figures["autoscaled, previous formula"], figures["autoscaled, previous formula, window / 30"]
    return f"""### The formulas against a fixed pool

`python bench/autoscale.py {" ".join(EXPERIMENTS["formulas"])}` runs one workload at once on autoscaled shared
pools and on a fixed pool of the same size, against the local Batch service: `BatchPool.shared(...,
requirements={{"cpus": 1, "memory": "2Gi"}}, max_nodes=4)` (the training example's CPU pool). Paid node-seconds
run from each node's `allocationTime` until it leaves the pool, busy ones while it runs at least one task (both
from the service's own data); makespan is from the first submission to the last task's end, a burst from its
job's submission to its last task's end.

{report}
The provider's formula left {ours["idle"]:.0%} of its paid node time idle, against {fixed["idle"]:.0%} for the
fixed pool, {previous["idle"]:.0%} for the previous formula and {scaled["idle"]:.0%} for the previous formula with
its window divided by 30. Its price is latency: a burst took {ours["burst"] - fixed["burst"]:.1f} s more than on
the fixed pool ({_on_azure(ours["burst"] - fixed["burst"])}), waiting for an evaluation and for nodes to boot.

The formula is `$tasks = max(0, $PendingTasks.GetSample(1), avg($PendingTasks.GetSample(2)));` then
`ceil($tasks / task slots)` nodes within `[min_nodes, max_nodes]`, `$NodeDeallocationOption = taskcompletion`,
evaluated every 5 minutes (the shortest interval Batch allows). Nodes come at the first evaluation that sees
tasks and go at the first that sees two samples without any; the two-sample mean bridges a shorter dip (between
one Airflow task's job and the next) rather than trusting one sample. `$PendingTasks` counts running tasks, so a
scale-down gives up nodes with no work left and `taskcompletion` seldom waits for one (`requeue` would kill and
re-run shards, `retaineddata` would keep nodes for the tasks' retention time). The window is a count of samples,
not a time range, so it means the same on Azure and on the local service: the previous formula's 3-minute range
is 6 samples on Azure (the "window / 30" row) but 180 locally, where it kept nodes through the pauses. What stays
idle is nodes booting and nodes waiting up to one evaluation after their last shard. The longer the pauses, the
closer the fixed pool's idle share gets to 100 %, while the autoscaled pool has no nodes then.
"""


def multi_node_text(report: str, figures: dict[str, dict[str, Any]]) -> str:
    before, ours = figures["autoscaled, before 0.5.0"], figures["autoscaled"]
    return f"""### A burst with a multi-node task

`python bench/autoscale.py {" ".join(EXPERIMENTS["multi-node"])}` runs the same kind of workload on pools made
for a task spanning 3 nodes (one task slot per node, `max_nodes=4`). Versions before 0.5.0 made the multi-node
task's node count the formula's minimum; 0.5.0 holds it only while anything is pending (`$tasks = $tasks > 0 ?
max($tasks, 3) : 0;`), down to `min_nodes` (0) otherwise.

{report}
The pool of 0.5.0 paid for {ours["azure_node_hours"]:.2f} node-hours instead of {before["azure_node_hours"]:.2f}
(on Azure's time scale), because the nodes the earlier formula kept through every pause are given back after each
burst. The price is the one an autoscaled pool always pays: each burst waited
{ours["burst"] - before["burst"]:.1f} s more ({_on_azure(ours["burst"] - before["burst"])}) for an evaluation and
for nodes to boot.
"""


def write_results(parse: argparse.ArgumentParser) -> Path:
    started, load = time.time(), os.getloadavg()
    texts = []
    for name, argv in EXPERIMENTS.items():
        report, figures = experiment(parse.parse_args(argv))
        texts.append((formulas_text if name == "formulas" else multi_node_text)(report, figures))
        print(texts[-1], flush=True)
    return results_file.write(RESULTS, started, load, "\n".join(texts), full=True)


def main() -> int:
    parse = parser()
    args = parse.parse_args()
    # Importing the provider brings Airflow's logging, which shows every request the SDK makes.
    logging.getLogger("azure.core.pipeline.policies.http_logging_policy").setLevel(logging.WARNING)
    if args.results:
        print(write_results(parse))
        return 0
    report, _ = experiment(args)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
