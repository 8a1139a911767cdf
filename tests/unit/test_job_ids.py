"""Job ids derived from the Airflow task instance: stable across retries, unique per run, valid for Batch."""

from __future__ import annotations

import hashlib
import re

import pytest

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.specs.validation import batch_id
from airflow_provider_azbatch.submission.job_ids import (
    MAX_ID_LENGTH,
    attempt_job_id,
    default_job_id,
    task_instance_metadata,
)


def check_job_id(job_id):
    return batch_id(job_id, "job_id", "Batch job id")


VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")
RUN = "manual__2024-01-01T00:00:00+00:00"


def test_known_value_is_stable():
    # Pinned: a retry after an upgrade must still find the job an earlier try created.
    assert default_job_id("my_dag", "my_task", RUN) == "my_dag-my_task-61829265ee72"
    assert default_job_id("my_dag", "my_task", RUN, 3) == "my_dag-my_task-487a51884214"


def test_digest_covers_every_part():
    digest = hashlib.sha256(f"my_dag\x00my_task\x00{RUN}\x00-1".encode()).hexdigest()[:12]

    assert default_job_id("my_dag", "my_task", RUN) == f"my_dag-my_task-{digest}"


def test_deterministic():
    assert default_job_id("d", "t", RUN, 2) == default_job_id("d", "t", RUN, 2)


def test_different_runs_and_map_indexes_give_different_ids():
    ids = {
        default_job_id("d", "t", RUN),
        default_job_id("d", "t", "scheduled__2024-01-02T00:00:00+00:00"),
        default_job_id("d", "t", RUN, 0),
        default_job_id("d", "t", RUN, 1),
        default_job_id("d", "t2", RUN),
        default_job_id("d2", "t", RUN),
    }

    assert len(ids) == 6


def test_ids_that_clean_to_the_same_text_still_differ():
    # "a.b" and "a b" both read "a-b": the hash keeps them apart.
    first, second = default_job_id("a.b", "t", RUN), default_job_id("a b", "t", RUN)

    assert first.startswith("a-b-t-")
    assert second.startswith("a-b-t-")
    assert first != second


@pytest.mark.parametrize(
    ("dag_id", "task_id", "head"),
    [
        ("données.étape v2", "tâche 1", "donn-es-tape-v2-t-che-1"),
        ("my.dag", "group.task", "my-dag-group-task"),
        ("...", "___", "x-x"),
        ("日本語", "🚀", "x-x"),
        ("  spaced  out  ", "tab\there", "spaced-out-tab-here"),
        ("a" * 23 + ".b", "x" * 100, "a" * 23 + "-" + "x" * 24),
        ("d" * 300, "-" * 5 + "task", "d" * 24 + "-task"),
    ],
)
def test_odd_dag_and_task_ids(dag_id, task_id, head):
    job_id = default_job_id(dag_id, task_id, "run with spaces/and:colons", 7)

    assert job_id.rsplit("-", 1)[0] == head
    assert re.fullmatch(r"[0-9a-f]{12}", job_id.rsplit("-", 1)[1])
    assert VALID.fullmatch(job_id)
    assert len(job_id) <= MAX_ID_LENGTH
    assert check_job_id(job_id) == job_id


def test_longest_possible_id_fits():
    job_id = default_job_id("d" * 1000, "t" * 1000, "r" * 1000, 10**9)

    assert len(job_id) == 24 + 1 + 24 + 1 + 12
    assert VALID.fullmatch(job_id)


@pytest.mark.parametrize(
    ("base", "attempt", "expected"),
    [
        ("job", 2, "job-a2"),
        ("my_dag-my_task-61829265ee72", 10, "my_dag-my_task-61829265ee72-a10"),
        ("j" * 64, 2, "j" * 61 + "-a2"),
        ("j" * 62, 123, "j" * 59 + "-a123"),
    ],
)
def test_attempt_job_id(base, attempt, expected):
    job_id = attempt_job_id(base, attempt)

    assert job_id == expected
    assert len(job_id) <= MAX_ID_LENGTH
    assert check_job_id(job_id) == job_id


def test_attempt_ids_differ_from_the_base_and_each_other():
    base = default_job_id("d" * 40, "t" * 40, RUN)

    ids = [base] + [attempt_job_id(base, n) for n in range(2, 6)]

    assert len(set(ids)) == len(ids)
    assert all(len(job_id) <= MAX_ID_LENGTH for job_id in ids)


@pytest.mark.parametrize("job_id", ["a", "A-b_c-1", "x" * 64])
def test_check_job_id_accepts(job_id):
    assert check_job_id(job_id) == job_id


@pytest.mark.parametrize(
    ("job_id", "shown"),
    [
        ("", "''"),
        ("x" * 65, repr("x" * 65)),
        ("has space", "'has space'"),
        ("dots.not.allowed", "'dots.not.allowed'"),
        ("é", "'é'"),
    ],
)
def test_check_job_id_rejects(job_id, shown):
    with pytest.raises(AzureBatchValidationError) as info:
        check_job_id(job_id)

    assert str(info.value) == (f"job_id {shown} is not a valid Batch job id: use 1 to 64 letters, digits, '-' or '_'")
    assert info.value.field == "job_id"


@pytest.mark.parametrize(("job_id", "kind"), [(None, "NoneType"), (42, "int")])
def test_check_job_id_rejects_other_types(job_id, kind):
    with pytest.raises(AzureBatchValidationError) as info:
        check_job_id(job_id)

    assert str(info.value) == f"job_id must be a string (Batch job id), got {kind} {job_id!r}"


def test_check_job_id_rejects_a_trailing_newline():
    with pytest.raises(AzureBatchValidationError):
        check_job_id("job\n")


def test_task_instance_metadata_names_the_submitter_and_the_map_index_only_when_mapped():
    assert task_instance_metadata("etl", "load", RUN) == {
        "airflow_dag_id": "etl",
        "airflow_task_id": "load",
        "airflow_run_id": RUN,
    }
    assert task_instance_metadata("etl", "load", RUN, 7) == {
        "airflow_dag_id": "etl",
        "airflow_task_id": "load",
        "airflow_run_id": RUN,
        "airflow_map_index": "7",
    }
