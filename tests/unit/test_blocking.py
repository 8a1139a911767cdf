"""Which tasks can never run: the analysis behind ending a wait that nothing more can end."""

from __future__ import annotations

from airflow_provider_azbatch.model.records import ActiveTask, FailedTask, SideTaskRun
from airflow_provider_azbatch.watching.blocking import blocked_by_dependencies, preparation_blocks_all

SATISFY_3 = {"exitCodes": [{"code": 3, "exitOptions": {"dependencyAction": "satisfy"}}]}


def test_dependents_of_a_failure_and_their_dependents_are_blocked():
    active = [ActiveTask("b", ("a",)), ActiveTask("c", ("b",)), ActiveTask("d", ("C",))]
    assert blocked_by_dependencies(active, [FailedTask("A", 1)]) == (["b", "c", "d"], ["A"])


def test_a_task_waiting_for_a_task_that_can_still_run_is_not_blocked():
    active = [ActiveTask("b", ("a",)), ActiveTask("ready"), ActiveTask("after", ("ready",))]
    assert blocked_by_dependencies(active, [FailedTask("a", 1)]) == (["b"], ["a"])


def test_a_failure_whose_exit_code_satisfies_blocks_nothing():
    active = [ActiveTask("b", ("a",))]
    assert blocked_by_dependencies(active, [FailedTask("a", 3, "FailureExitCode", SATISFY_3)]) == ([], [])
    assert blocked_by_dependencies(active, [FailedTask("a", 4, "FailureExitCode", SATISFY_3)]) == (["b"], ["a"])


def test_ranges_of_integer_ids_wait_on_failures_inside_them():
    active = [ActiveTask("reduce", depends_on_ranges=((0, 99),)), ActiveTask("other", depends_on_ranges=((100, 199),))]
    assert blocked_by_dependencies(active, [FailedTask("42", 1)]) == (["reduce"], ["42"])


def test_a_job_preparation_task_blocks_all_once_it_failed_on_every_node():
    def run(node: str, result: str = "failure", kind: str = "preparation") -> SideTaskRun:
        return SideTaskRun(kind, node, "completed", result)

    assert preparation_blocks_all([run("n1"), run("n2")], current_nodes=2) == [run("n1"), run("n2")]
    assert preparation_blocks_all([run("n1")], current_nodes=2) == []  # n2 has not tried yet
    assert preparation_blocks_all([run("n1"), run("n2", "success")], current_nodes=2) == []
    assert preparation_blocks_all([run("n1", kind="release")], current_nodes=1) == []
    assert preparation_blocks_all([], current_nodes=0) == []
