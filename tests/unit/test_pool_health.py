"""Telling a pool that will never give the job nodes from one that is on its way (pure diagnosis)."""

from __future__ import annotations

from azure.batch import models as m

from airflow_provider_azbatch.watching.pool_health import diagnose


def _pool(**fields) -> m.BatchPool:
    base = {"id": "p", "allocation_state": "steady", "current_dedicated_nodes": 0, "current_low_priority_nodes": 0}
    return m.BatchPool(**{**base, **fields})


def test_a_failing_autoscale_formula_is_a_problem_with_its_details():
    run = m.AutoScaleRun(
        timestamp="2026-12-01T00:00:00Z",
        error=m.AutoScaleRunError(
            code="InvalidFormula",
            message="The formula is invalid",
            error_values=[m.NameValuePair(name="Line", value="2")],
        ),
    )
    problem = diagnose(_pool(enable_auto_scale=True, auto_scale_run=run), [], [])
    assert problem is not None
    assert (
        str(problem)
        == "Pool p cannot scale up: its autoscale formula failed (InvalidFormula: The formula is invalid; Line=2)"
    )


def test_a_pool_still_allocating_is_no_problem():
    assert diagnose(_pool(allocation_state="resizing", target_dedicated_nodes=2), [], []) is None


def test_allocation_errors_with_no_node_are_a_problem():
    errors = [m.ResizeError(code="AccountCoreQuotaReached", message="no cores left")]
    problem = diagnose(_pool(resize_errors=errors), [], [])
    assert str(problem) == "Pool p could not allocate nodes for the job: AccountCoreQuotaReached: no cores left"
    assert problem.certain


def test_a_shared_pool_made_by_another_version_of_the_formula_is_reused_if_its_bounds_match():
    from airflow_provider_azbatch.pools.comparison import formula_outdated, pool_differences, spec_differences
    from airflow_provider_azbatch.pools.strategy import BatchPool

    strategy = BatchPool.shared("p", requirements={"cpus": 1}, max_nodes=4)
    wanted = strategy.pool_body(containers=False, multi_node=1)
    older = dict(wanted, autoScaleFormula=wanted["autoScaleFormula"].replace("avg(", "max(0, avg(") + " // older")
    assert older["autoScaleFormula"] != wanted["autoScaleFormula"]
    assert pool_differences(older, wanted) == []
    # The specification hash stands for the formula's bounds, not its text.
    assert spec_differences(older, wanted) == []
    assert formula_outdated(older, wanted) is True
    assert formula_outdated(wanted, wanted) is False
    bigger = BatchPool.shared("p", requirements={"cpus": 1}, max_nodes=8).pool_body(containers=False, multi_node=1)
    assert pool_differences(older, bigger) == [
        "autoscale is 0 to 4 dedicated nodes of 2 task slots, this task wants 0 to 8 dedicated nodes of 2 task slots"
    ]
    hand_written = dict(wanted, autoScaleFormula="$TargetDedicatedNodes = 3;")
    assert pool_differences(hand_written, wanted)[0].startswith("autoScaleFormula is '$TargetDedicatedNodes = 3;'")


def test_a_pool_made_for_multi_node_tasks_before_0_5_is_told_by_its_bounds_and_hash():
    from airflow_provider_azbatch.compute.autoscale import autoscale_formula
    from airflow_provider_azbatch.pools.comparison import as_older_versions_made_it, spec_differences, with_spec_hash
    from airflow_provider_azbatch.pools.strategy import BatchPool

    wanted = BatchPool.shared("p", requirements={"cpus": 1}, max_nodes=4).pool_body(containers=False, multi_node=3)
    unhashed = {key: value for key, value in wanted.items() if key != "metadata"}
    older = with_spec_hash({**unhashed, "autoScaleFormula": autoscale_formula(4, min_nodes=3)})
    assert spec_differences(older, wanted) == [
        "autoscale is 3 to 4 dedicated nodes of 1 task slot, this task wants 0 to 4 dedicated nodes of 1 task slot, "
        "at least 3 while tasks are pending"
    ]
    # As 0.4 made it for these same settings: its hash says so.
    assert spec_differences(older, as_older_versions_made_it(wanted)) == []
    # The same bounds, created with something else (here: another VM size's hash): not an older version's pool.
    other = {**older, "metadata": with_spec_hash({**unhashed, "vmSize": "standard_d4s_v3"})["metadata"]}
    assert spec_differences(other, as_older_versions_made_it(wanted))[0].startswith(
        "it was created with another specification"
    )
    # Pools of single-node tasks compare as they did: nothing older to look for.
    assert (
        as_older_versions_made_it(
            BatchPool.shared("p", requirements={"cpus": 1}).pool_body(containers=False, multi_node=1)
        )
        is None
    )
