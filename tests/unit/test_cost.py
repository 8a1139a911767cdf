"""Cost estimates from known node and task times and the catalog's prices."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow_provider_azbatch.compute import load_catalog
from airflow_provider_azbatch.model.outcomes import TaskOutcome
from airflow_provider_azbatch.results.cost import CostReport, IdlePool, NodeSpan, auto_pool_cost, shared_pool_cost

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)


def _task(task_id: str, node: str, start: float, end: float) -> TaskOutcome:
    return TaskOutcome(
        id=task_id,
        state="completed",
        exit_code=0,
        result="success",
        retry_count=0,
        node_id=node,
        start_time=(T0 + timedelta(seconds=start)).isoformat(),
        end_time=(T0 + timedelta(seconds=end)).isoformat(),
        duration_seconds=end - start,
    )


def test_an_auto_pool_pays_every_node_second_and_says_how_much_ran_no_task():
    catalog = load_catalog()
    hourly = catalog.get("standard_d2s_v3").hourly_usd
    nodes = [
        NodeSpan("n1", True, T0, T0 + timedelta(seconds=3600)),
        NodeSpan("n2", True, T0, T0 + timedelta(seconds=1800)),
        NodeSpan("n3", False, T0, T0 + timedelta(seconds=900)),
    ]
    # n1: two overlapping tasks (900 s busy), n2: 900 s, n3: nothing.
    tasks = [_task("a", "n1", 0, 600), _task("b", "n1", 300, 900), _task("c", "n2", 0, 900)]
    report = auto_pool_cost("standard_d2s_v3", nodes, tasks, catalog)
    assert report.node_seconds == {"dedicated": 5400.0, "spot": 900.0}
    assert report.task_seconds == 2100.0
    assert report.busy_node_seconds == 1800.0
    assert report.estimate_usd == 6300 / 3600 * hourly
    assert round(report.idle_share, 4) == round(1 - 1800 / 6300, 4)
    assert report.lines() == [
        f"Cost estimate: ${6300 / 3600 * hourly:.4f} (list prices, {catalog.region}, as of {catalog.retrieved}; "
        "spot and low-priority nodes at the list price, an upper bound)",
        "  node time: 1.500 h of standard_d2s_v3 (dedicated)",
        "  node time: 0.250 h of standard_d2s_v3 (spot)",
        "  Batch task time: 0.583 h",
        "  idle: 71% of the paid node time ran no task",
    ]
    assert report.to_json()["idle_share"] == 0.714


def test_the_log_shows_the_rounded_values_the_xcom_holds():
    # 0.33497 idle is 33 % as it is, but 0.335 in the XCom: the log must say 34 %, as the XCom does.
    report = CostReport(
        basis="node time",
        vm_size="standard_d2s_v3",
        region="eastus",
        prices_date="2026-11-01",
        node_seconds={"dedicated": 1799.96},
        task_seconds=1199.6,
        busy_node_seconds=1799.96 * (1 - 0.33497),
        estimate_usd=0.0479999,
    )
    shown = report.to_json()
    assert (shown["idle_share"], shown["node_seconds"], shown["task_seconds"]) == (0.335, {"dedicated": 1800.0}, 1199.6)
    assert report.lines()[0].startswith("Cost estimate: $0.0480 ")
    assert report.lines()[1:] == [
        "  node time: 0.500 h of standard_d2s_v3 (dedicated)",
        "  Batch task time: 0.333 h",
        "  idle: 34% of the paid node time ran no task",
    ]


def test_a_pools_idle_line_shows_the_rounded_values_the_xcom_holds():
    pool = IdlePool("p", "standard_d2s_v3", 1.76, 3600.0, 0.096, "node time")
    assert pool.to_json()["idle_node_seconds"] == 1.8  # 0.0005 h: 0.001 h shown, where 1.76 s alone is 0.000 h
    assert pool.line() == (
        "  pool p (standard_d2s_v3): 0.001 of 1.000 paid node-h idle, about $0.0000 at list prices (its node time)"
    )


def test_a_shared_pool_charges_task_time_per_slot():
    catalog = load_catalog()
    hourly = catalog.get("standard_d4s_v3").hourly_usd
    tasks = [_task("a", "n1", 0, 3600), _task("b", "n2", 0, 1800)]
    report = shared_pool_cost("standard_d4s_v3", 4, {"n1": True, "n2": False}, tasks, catalog, {"b": 2})
    assert report.estimate_usd == (3600 + 1800 * 2) / 3600 * hourly / 4
    assert report.node_seconds == {"dedicated": 900.0, "spot": 900.0}
    assert report.idle_share is None
    assert report.lines()[-1] == (
        f"  the pool is shared: charged by task time x the node's price per slot (standard_d4s_v3, 4 slot(s) per "
        f"node, ${hourly:.4f}/h per node)"
    )


def test_a_size_outside_the_catalog_has_no_estimate_but_its_times():
    report = auto_pool_cost(
        "standard_unknown_v9", [NodeSpan("n", True, T0, T0 + timedelta(hours=1))], [], load_catalog()
    )
    assert report.estimate_usd is None
    assert report.lines()[0].startswith("Cost estimate: no estimate (standard_unknown_v9 is not in the catalog)")
    assert report.node_seconds == {"dedicated": 3600.0}


def test_a_pools_idle_time_is_counted_between_samples_from_what_the_earlier_one_saw():
    from airflow_provider_azbatch.model.records import NodeTimes
    from airflow_provider_azbatch.results.cost import IdlePool, idle_pool_lines, sampled_idle_pool
    from airflow_provider_azbatch.watching import idle_time
    from airflow_provider_azbatch.watching.state import WatchState

    state = WatchState(job_id="job", pool_id="p")
    up = [
        NodeTimes("a", True, None, "running"),
        NodeTimes("b", True, None, "idle"),
        NodeTimes("c", False, None, "idle"),
    ]
    assert idle_time.sample_due(state, "p", 100.0, moved=False)
    idle_time.sample(state, "p", up, 100.0)
    assert not idle_time.sample_due(state, "p", 105.0, moved=True)
    assert idle_time.sample_due(state, "p", 110.0, moved=True)
    assert idle_time.sample_due(state, "p", 160.0, moved=False)
    # 60 s with 2 idle of 3 paid; then a preempted Spot node is not paid.
    idle_time.sample(state, "p", [*up[:2], NodeTimes("c", False, None, "preempted")], 160.0)
    idle_time.sample(state, "p", None, 190.0)  # 30 s with 1 idle of 2 paid; then the pool is gone
    idle_time.sample(state, "p", None, 250.0)
    record = state.pool_idle["p"]
    assert record["idle_seconds"] == {"dedicated": 60.0 + 30.0, "spot": 60.0}
    assert record["paid_seconds"] == {"dedicated": 120.0 + 60.0, "spot": 60.0}
    pool = sampled_idle_pool("p", record, "standard_d2s_v3", load_catalog())
    hourly = load_catalog().get("standard_d2s_v3").hourly_usd
    assert pool == IdlePool("p", "standard_d2s_v3", 150.0, 240.0, hourly, "sampled", (100.0, 250.0))
    assert (pool.to_json()["from"], pool.to_json()["to"]) == (
        "1970-01-01T00:01:40+00:00",
        "1970-01-01T00:04:10+00:00",
    )
    assert idle_pool_lines([pool]) == [
        f"Idle nodes during the run (paid, running no task): ${150 / 3600 * hourly:.4f} at list prices",
        f"  pool p (standard_d2s_v3): 0.042 of 0.067 paid node-h idle, about ${150 / 3600 * hourly:.4f} at list "
        "prices (its nodes sampled as the job ran)",
    ]


def test_nodes_allocated_between_two_samples_count_from_their_allocation():
    from datetime import datetime, timezone

    from airflow_provider_azbatch.model.records import NodeTimes
    from airflow_provider_azbatch.watching import idle_time
    from airflow_provider_azbatch.watching.state import WatchState

    def iso(epoch: float) -> str:
        return datetime.fromtimestamp(epoch, timezone.utc).isoformat()

    # A pool scaling up from zero during a short run: the first sample sees no node, the last one two.
    state = WatchState(job_id="job", pool_id="p")
    idle_time.sample(state, "p", [], 1000.0)
    idle_time.sample(
        state,
        "p",
        [
            # Allocated at 1010, booted and ran its start task, running a task since 1030.
            NodeTimes("a", True, iso(1010.0), "running", iso(1030.0)),
            # A Spot node allocated at 1020 and still idle.
            NodeTimes("b", False, iso(1020.0), "idle", iso(1025.0)),
            # Allocated at 1015, preempted at 1040: paid until then (Azure bills no preempted node).
            NodeTimes("c", False, iso(1015.0), "preempted", iso(1040.0)),
            # Allocated before the earlier sample, which did not list it: paid since that sample.
            NodeTimes("d", True, iso(900.0), "idle", iso(990.0)),
        ],
        1050.0,
    )
    record = state.pool_idle["p"]
    assert record["paid_seconds"] == {"dedicated": 40.0 + 50.0, "spot": 30.0 + 25.0}
    assert record["idle_seconds"] == {"dedicated": 20.0 + 50.0, "spot": 30.0 + 25.0}


def test_a_nodes_busy_time_is_the_time_its_recent_tasks_ran_between_the_samples():
    """A Spot node that ran a task 4 s and was preempted, then a dedicated one that ran a task 25 s and went idle,
    both between two samples: each is paid from its allocation, busy while its tasks ran (issue 41)."""
    from datetime import datetime, timezone

    from airflow_provider_azbatch.model.records import NodeTimes
    from airflow_provider_azbatch.watching import idle_time
    from airflow_provider_azbatch.watching.state import WatchState

    def iso(epoch: float) -> str:
        return datetime.fromtimestamp(epoch, timezone.utc).isoformat()

    state = WatchState(job_id="job", pool_id="spot")
    idle_time.sample(state, "spot", [], 1000.0)
    spot = NodeTimes("s", False, iso(1002.0), "preempted", iso(1010.0), task_spans=((iso(1006.0), None),))
    idle_time.sample(state, "spot", [spot], 1011.0)
    # Back later (Spot capacity again), booted at 1030, idle: paid again from its boot.
    back = NodeTimes("s", False, iso(1002.0), "idle", iso(1031.0), last_boot=iso(1030.0))
    idle_time.sample(state, "spot", [back], 1040.0)
    assert state.pool_idle["spot"]["paid_seconds"] == {"dedicated": 0.0, "spot": 8.0 + 10.0}
    assert state.pool_idle["spot"]["idle_seconds"] == {"dedicated": 0.0, "spot": 4.0 + 10.0}

    idle_time.sample(state, "twin", [], 1011.0)
    ran = NodeTimes("d", True, iso(1015.0), "idle", iso(1045.0), task_spans=((iso(1020.0), iso(1045.0)),))
    idle_time.sample(state, "twin", [ran], 1050.0)
    assert state.pool_idle["twin"]["paid_seconds"]["dedicated"] == 35.0
    assert state.pool_idle["twin"]["idle_seconds"]["dedicated"] == 35.0 - 25.0
    # Two tasks at once on one node (slots) count once; a task still running counts until the sample.
    both = NodeTimes(
        "d", True, iso(1015.0), "running", iso(1052.0), task_spans=((iso(1052.0), None), (iso(1054.0), iso(1056.0)))
    )
    idle_time.sample(state, "twin", [both], 1060.0)
    assert state.pool_idle["twin"]["idle_seconds"]["dedicated"] == 10.0 + 2.0


def test_a_pool_is_flagged_when_a_node_stays_idle_past_its_interval_and_the_margin():
    from datetime import datetime, timedelta, timezone
    from types import SimpleNamespace

    from airflow_provider_azbatch.cli.idle_pools import idle_verdict

    now = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
    fixed = SimpleNamespace(enable_auto_scale=False, auto_scale_evaluation_interval=None)
    scaled = SimpleNamespace(enable_auto_scale=True, auto_scale_evaluation_interval=timedelta(minutes=15))
    nodes = [now - timedelta(minutes=11), now - timedelta(minutes=2), None]
    assert idle_verdict(fixed, nodes, now, 300) == {
        "idle_seconds": 660.0,
        "idle_threshold_seconds": 600.0,
        "idle_too_long": True,
    }
    assert idle_verdict(scaled, nodes, now, 300)["idle_too_long"] is False  # 15 minutes + 5 not reached
    assert idle_verdict(scaled, [], now, 300) == {
        "idle_seconds": None,
        "idle_threshold_seconds": 1200.0,
        "idle_too_long": False,
    }
    as_text = SimpleNamespace(enable_auto_scale=True, auto_scale_evaluation_interval="PT10M")
    assert idle_verdict(as_text, nodes, now, 0)["idle_threshold_seconds"] == 600.0
