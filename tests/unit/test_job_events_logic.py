"""Batch job events, pure logic: the filters, a job's outcome and event, the cursor that makes each job fire once."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from airflow_provider_azbatch.job_events.cursor import KEEP_SECONDS, SETTLE_SECONDS, Completions, Cursor
from airflow_provider_azbatch.job_events.filters import JobFilter, JobFilterError
from airflow_provider_azbatch.job_events.outcome import job_event, outcome_of
from airflow_provider_azbatch.model.outcomes import MAX_EXIT_CODES, TaskEnd, task_end_of
from airflow_provider_azbatch.model.records import JobChange
from airflow_provider_azbatch.triggers.job_events import AzureBatchJobCompletedTrigger, cursor_key

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)


def _listed(job_id: str, pool: str = "gpu", metadata: dict[str, str] | None = None, **execution: str) -> JobChange:
    fields = {
        "id": job_id,
        "state": "completed",
        "stateTransitionTime": "2026-12-03T12:00:00.1234567Z",
        "poolInfo": {"poolId": pool},
        "metadata": [{"name": k, "value": v} for k, v in (metadata or {}).items()],
        "executionInfo": {"poolId": pool, **execution},
    }
    return JobChange(job_id, "completed", fields["stateTransitionTime"], fields)


def test_each_filter_must_hold_and_a_missing_one_lets_everything_through():
    job = _listed("torchx-train-1", pool="gpu", metadata={"torchx-app": "train", "team": "vision"})
    assert JobFilter.of().matches_listing(job)
    assert JobFilter.of(job_id_prefix="torchx-").matches_listing(job)
    assert not JobFilter.of(job_id_prefix="torchx-eval").matches_listing(job)
    assert JobFilter.of(metadata={"torchx-app": "train"}).matches_listing(job)
    assert not JobFilter.of(metadata={"torchx-app": "train", "team": "nlp"}).matches_listing(job)
    assert not JobFilter.of(metadata={"owner": "x"}).matches_listing(job)
    assert JobFilter.of(pool_id="gpu").matches_listing(job)
    assert not JobFilter.of(pool_id="cpu").matches_listing(job)
    everything = JobFilter.of(job_id_prefix="torchx-", metadata={"team": "vision"}, pool_id="gpu", outcome="succeeded")
    assert everything.matches_listing(job)
    assert everything.matches_outcome("succeeded")
    assert not everything.matches_outcome("failed")
    assert JobFilter.of(outcome="any").matches_outcome("failed")
    assert JobFilter.of().matches_outcome("succeeded")


def test_the_pool_is_where_the_job_ran_else_where_it_was_sent():
    auto = JobChange(
        "j", "completed", "t", {"poolInfo": {"autoPoolSpecification": {}}, "executionInfo": {"poolId": "auto-1"}}
    )
    assert JobFilter.of(pool_id="auto-1").matches_listing(auto)
    sent = JobChange("j", "completed", "t", {"poolInfo": {"poolId": "cpu"}})
    assert JobFilter.of(pool_id="cpu").matches_listing(sent)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"outcome": "success"}, "outcome='success': give one of 'succeeded', 'failed', or leave it out for both"),
        ({"job_id_prefix": ""}, "job_id_prefix='': give the start of the job ids as a non-empty string"),
        ({"pool_id": 3}, "pool_id=3: give a pool id as a non-empty string, or leave it out"),
        ({"metadata": ["a"]}, "metadata=['a']: give the job metadata to match as a dict of names to values"),
        ({"metadata": {"epochs": 10}}, "metadata['epochs']=10: job metadata names and values are strings"),
    ],
)
def test_a_filter_that_cannot_work_is_refused_naming_the_argument_and_the_fix(arguments, message):
    with pytest.raises(JobFilterError) as error:
        JobFilter.of(**arguments)
    assert str(error.value).startswith(message)


def test_the_trigger_refuses_bad_arguments_when_the_dag_is_parsed():
    with pytest.raises(JobFilterError, match="outcome='ok'"):
        AzureBatchJobCompletedTrigger(outcome="ok")
    with pytest.raises(ValueError, match=r"poll_interval=0: give a number of seconds above 0 \(e.g. 10\)"):
        AzureBatchJobCompletedTrigger(poll_interval=0)


def test_the_trigger_serializes_its_filters_and_nothing_secret_and_is_rebuilt_from_them():
    trigger = AzureBatchJobCompletedTrigger(
        "batch_prod", job_id_prefix="torchx-", metadata={"torchx-app": "train"}, outcome="succeeded"
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_azbatch.triggers.job_events.AzureBatchJobCompletedTrigger"
    assert kwargs == {
        "conn_id": "batch_prod",
        "job_id_prefix": "torchx-",
        "metadata": {"torchx-app": "train"},
        "pool_id": None,
        "outcome": "succeeded",
        "poll_interval": 10.0,
    }
    assert AzureBatchJobCompletedTrigger(**kwargs).serialize() == (classpath, kwargs)


def test_the_cursor_is_named_after_every_argument_as_airflow_tells_triggers_apart():
    kwargs = AzureBatchJobCompletedTrigger("c", job_id_prefix="a").serialize()[1]
    assert cursor_key(kwargs) == cursor_key(dict(reversed(list(kwargs.items()))))
    assert cursor_key(kwargs) != cursor_key({**kwargs, "job_id_prefix": "b"})
    assert cursor_key(kwargs) != cursor_key({**kwargs, "poll_interval": 1.0})
    assert cursor_key(kwargs).startswith("azbatch_job_events.")


def test_a_job_succeeded_only_if_it_had_tasks_and_each_succeeded():
    ok = TaskEnd("a", "completed", 0, "success")
    assert outcome_of([ok, TaskEnd("b", "completed", 0, "success")]) == "succeeded"
    assert outcome_of([ok, TaskEnd("b", "completed", 3, "failure")]) == "failed"
    assert outcome_of([ok, TaskEnd("b", "active")]) == "failed"  # the job was ended before it ran
    assert outcome_of([]) == "failed"


def test_a_listed_task_reads_as_its_end():
    entry = {"id": "t1", "state": "completed", "executionInfo": {"exitCode": 2, "result": "failure"}}
    assert task_end_of(entry) == TaskEnd("t1", "completed", 2, "failure")
    assert task_end_of({"id": "t2", "state": "active"}) == TaskEnd("t2", "active", None, None)


def test_the_event_carries_the_job_its_outcome_exit_codes_and_metadata():
    change = _listed("torchx-train-1", metadata={"torchx-app": "train"}, terminateReason="AllTasksComplete")
    tasks = [TaskEnd("trainer-0", "completed", 0, "success"), TaskEnd("trainer-1", "completed", 0, "success")]
    assert job_event(change, tasks, conn_id="azbatch_default", account="acct") == {
        "job_id": "torchx-train-1",
        "outcome": "succeeded",
        "completed_at": "2026-12-03T12:00:00.1234567Z",
        "pool_id": "gpu",
        "terminate_reason": "AllTasksComplete",
        "exit_codes": {"trainer-0": 0, "trainer-1": 0},
        "tasks": {"succeeded": 2, "failed": 0},
        "metadata": {"torchx-app": "train"},
        "batch_account": "acct",
        "conn_id": "azbatch_default",
    }


def test_a_big_job_s_event_keeps_the_failed_tasks_exit_codes_first():
    tasks = [TaskEnd(f"t{i:04}", "completed", 0, "success") for i in range(500)] + [
        TaskEnd("z-bad", "completed", 9, "failure")
    ]
    event = job_event(_listed("big"), tasks, conn_id="c", account=None)
    assert len(event["exit_codes"]) == MAX_EXIT_CODES
    assert next(iter(event["exit_codes"].items())) == ("z-bad", 9)
    assert event["exit_codes_truncated"] is True
    assert event["tasks"] == {"succeeded": 500, "failed": 1}


def test_the_cursor_round_trips_as_json():
    cursor = Cursor(T0, {"b": (T0 + timedelta(seconds=2)).isoformat(), "a": T0.isoformat()})
    assert Cursor.from_json(cursor.to_json()) == cursor
    with pytest.raises(ValueError, match="fired is not a mapping"):
        Cursor.from_json('{"watermark": "2026-12-03T12:00:00+00:00", "fired": ["a"]}')


def test_a_new_watcher_starts_at_its_first_look_and_saves_that_before_any_job_fires():
    completions = Completions(None)
    assert completions.to_save(0.0) is None  # nothing to save before it knows where it starts
    completions.start(T0)
    assert completions.to_save(0.0) == Cursor(T0, {})
    completions.saved(Cursor(T0, {}))
    assert completions.to_save(1.0) is None  # unchanged
    assert not completions.is_new("old", T0 - timedelta(seconds=1))
    assert completions.is_new("new", T0)


def test_a_fired_job_is_saved_once_settled_and_the_watermark_never_passes_an_undecided_job():
    completions = Completions(Cursor(T0, {}))
    completions.saved(Cursor(T0, {}))
    done, later = T0 + timedelta(seconds=10), T0 + timedelta(seconds=400)
    completions.seen(later)
    completions.pending("a", done)
    assert not completions.is_new("a", done)  # being decided
    completions.fired("a", now=100.0)
    # Fired but not settled: not saved as fired, and the watermark stays before it (a restart fires it again).
    assert completions.to_save(100.0 + SETTLE_SECONDS / 2) == Cursor(done, {})
    completions.saved(Cursor(done, {}))
    # Settled: saved as fired, and the watermark moves up to KEEP_SECONDS before the newest change seen.
    watermark = later - timedelta(seconds=KEEP_SECONDS)
    assert completions.to_save(100.0 + SETTLE_SECONDS) == Cursor(watermark, {})  # "a" is before it: not kept
    assert not completions.is_new("a", done)


def test_a_restarted_watcher_fires_what_completed_since_its_watermark_and_not_what_it_fired():
    saved = Cursor(T0, {"fired": (T0 + timedelta(seconds=5)).isoformat()})
    completions = Completions(saved)
    assert completions.started
    assert not completions.is_new("fired", T0 + timedelta(seconds=5))
    assert completions.is_new("missed", T0 + timedelta(seconds=7))
    assert not completions.is_new("before", T0 - timedelta(seconds=1))
    completions.seen(T0 + timedelta(seconds=7))
    assert completions.to_save(0.0) is None  # the watermark cannot move (newest - KEEP is before it)


def test_metadata_as_airflow_3_2s_triggerer_passes_it_back_is_read_as_the_dict_it_was():
    # 3.2's triggerer hands a trigger its serialized dict kwargs still encoded ({"__var": ..., "__type": "dict"}).
    from airflow_provider_azbatch.triggers.job_events import AzureBatchJobCompletedTrigger

    encoded = {"__var": {"torchx-app": "train"}, "__type": "dict"}
    trigger = AzureBatchJobCompletedTrigger(metadata=encoded, job_id_prefix="torchx-")
    assert trigger.serialize()[1]["metadata"] == {"torchx-app": "train"}
    # As Airflow encodes it: its keys are Encoding members (str enums hashed by their names, not their values).
    from airflow.serialization.serialized_objects import BaseSerialization

    trigger = AzureBatchJobCompletedTrigger(metadata=BaseSerialization.serialize({"torchx-app": "train"}))
    assert trigger.serialize()[1]["metadata"] == {"torchx-app": "train"}
    # As 3.2's triggerer handed it over in a deployment: the members' names as strings.
    named = {"Encoding.VAR": {"torchx-app": "train"}, "Encoding.TYPE": "DagAttributeTypes.DICT"}
    assert AzureBatchJobCompletedTrigger(metadata=named).serialize()[1]["metadata"] == {"torchx-app": "train"}
