"""The typos a new user makes, refused when the DAG is defined with the field and the fix (pure checks)."""

from __future__ import annotations

import pytest

from airflow_provider_azbatch.cli.outcomes import job_outcome
from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.model.records import TaskCounts
from airflow_provider_azbatch.pools import BatchPool
from airflow_provider_azbatch.pools.errors import PoolStrategyError
from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.specs.image_references import reference_problem

VALID_IMAGES = [
    "ubuntu",
    "ubuntu:22.04",
    "library/ubuntu:latest",
    "MyRegistry.azurecr.io/train-image:1",
    "myregistry.azurecr.io/team/train_image:v1.2-rc.3",
    "localhost:5000/a__b/c-d:tag",
    "localhost/x",
    "registry.example.com:443/x/y/z@sha256:" + "a" * 64,
    "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest",
    "ghcr.io/org/img:latest1",
]


@pytest.mark.parametrize("reference", VALID_IMAGES)
def test_valid_image_references_pass(reference):
    assert reference_problem(reference) is None
    assert validation.image(reference, "image") == reference


BAD_IMAGES = [
    (
        "MyRegistry.azurecr.io/Train Image:1",
        "'MyRegistry.azurecr.io/Train Image:1' is not a valid image reference: it has whitespace, which no image "
        "reference holds ([registry/]repository[:tag][@digest], e.g. myregistry.azurecr.io/train-image:1); did you "
        "mean 'myregistry.azurecr.io/train-image:1'?",
    ),
    (
        "MyRegistry.azurecr.io/TrainImage:1",
        "'MyRegistry.azurecr.io/TrainImage:1' is not a valid image reference: it has an invalid repository name "
        "'TrainImage': repository names are lowercase (only the registry's host may hold capitals): lowercase "
        "letters, digits and single '.', '_' or '-' between them ([registry/]repository[:tag][@digest], e.g. "
        "myregistry.azurecr.io/train-image:1); did you mean 'MyRegistry.azurecr.io/trainimage:1'?",
    ),
    ("Ubuntu:22.04", "invalid repository name 'Ubuntu'"),
    ("ubuntu:-x", "has an invalid tag '-x': a tag is 1 to 128 letters"),
    ("ubuntu:" + "x" * 129, "has an invalid tag"),
    ("ubuntu@sha256:abc", "has an invalid digest 'sha256:abc'"),
    ("my_registry.io:port/x", "has an invalid registry 'my_registry.io:port'"),
    ("a//b", "has an invalid repository name ''"),
    ("ubuntu:latset", "'ubuntu:latset' names the tag 'latset': did you mean ubuntu:latest?"),
    ("ghcr.io/o/i:lates", "did you mean ghcr.io/o/i:latest?"),
]


@pytest.mark.parametrize(("reference", "words"), BAD_IMAGES)
def test_bad_image_references_say_the_rule_and_the_fix(reference, words):
    with pytest.raises(AzureBatchValidationError) as caught:
        validation.image(reference, "containers.image")
    assert caught.value.field == "containers.image"
    assert words in caught.value.problem


def test_templated_image_waits_for_the_run():
    assert validation.image("{{ var.value.image }}", "image") == "{{ var.value.image }}"


def test_requirement_keys_get_a_suggestion():
    with pytest.raises(PoolStrategyError) as caught:
        BatchPool.auto(requirements={"gpu": 1})
    assert str(caught.value) == (
        "requirements has unknown key(s) 'gpu' (did you mean 'gpus'?); known: cpus, memory (e.g. '8Gi') or "
        "memory_gib, gpus, gpu_kind, low_priority, os_image, containers"
    )


def test_requirements_no_size_fits_are_refused_when_the_pool_is_defined():
    with pytest.raises(PoolStrategyError) as caught:
        BatchPool.shared("huge", requirements={"cpus": 100000})
    assert str(caught.value).startswith("No Azure VM size in the catalog fits cpus=100000, memory=1 GiB, gpus=0. ")
    with pytest.raises(PoolStrategyError, match="No Azure VM size in the catalog fits"):
        BatchPool.auto(requirements={"memory": "100Ti"})


def test_unknown_vm_size_warns_with_the_closest_names():
    with pytest.warns(UserWarning, match="is not in the VM catalog") as caught:
        BatchPool.auto(vm_size="standard_nc4as_t4_v9")
    message = str(caught[0].message)
    assert message.startswith("VM size 'standard_nc4as_t4_v9' is not in the VM catalog (")
    assert "did you mean standard_nc4as_t4_v3" in message
    assert "Azure refuses a size it does not offer when the pool is created" in message


def test_pool_container_images_are_checked():
    with pytest.raises(PoolStrategyError, match=r"container_images\[1\] 'a b' is not a valid image reference"):
        BatchPool.auto(requirements={"cpus": 1}, container_images=["ubuntu", "a b"])


def test_unknown_fields_name_the_likely_one():
    error = validation.unknown_fields("tasks[0]", {"id": 1, "comand_line": 2}, ("id", "command_line", "environment"))
    assert error is not None
    assert error.problem == (
        "has unknown field(s) comand_line (did you mean 'command_line'?); known: id, command_line, environment"
    )
    assert validation.unknown_fields("x", {"id": 1}, ("id",)) is None


def test_dependency_on_a_misspelt_task_gets_a_suggestion():
    with pytest.raises(AzureBatchValidationError) as caught:
        validation.dependency_graph({"aaa": [], "bbb": ["aa"]}, {"aaa": "tasks[0]", "bbb": "tasks[1]"})
    assert str(caught.value) == "tasks[1].depends_on names 'aa', which is not a task of this job (did you mean 'aaa'?)"


def _counts(active=0, running=0, succeeded=0, failed=0):
    return TaskCounts(active, running, succeeded + failed, succeeded, failed)


@pytest.mark.parametrize(
    ("state", "counts", "reason", "error", "outcome"),
    [
        ("completed", _counts(succeeded=3), "AllTasksComplete", False, "succeeded"),
        ("completed", _counts(succeeded=2, failed=1), "AllTasksComplete", False, "failed"),
        ("completed", _counts(succeeded=1, failed=1, active=2), "TaskFailed", False, "failed"),
        ("completed", _counts(active=2), "MaxWallClockTimeExpiry", False, "failed"),
        ("completed", _counts(active=1, running=1), "UserTerminate", False, "cancelled"),
        ("terminating", _counts(running=1), "AirflowTaskKilled", False, "cancelled"),
        ("active", _counts(running=1, failed=1), None, False, "running"),
        ("active", _counts(active=2, failed=1), None, False, "blocked"),
        ("active", _counts(active=2), None, True, "blocked"),
        ("active", _counts(active=2), None, False, "waiting"),
        ("active", _counts(), None, False, "waiting"),
        ("active", _counts(succeeded=2), None, False, "succeeded"),
        ("active", _counts(succeeded=1, failed=1), None, False, "failed"),
        ("disabled", _counts(active=1), None, False, "disabled"),
        ("deleting", _counts(), None, False, "deleting"),
    ],
)
def test_job_outcome(state, counts, reason, error, outcome):
    assert job_outcome(state, counts, reason, error) == outcome


def test_the_shipped_source_is_the_def_whatever_the_decorators_are_called():
    from airflow.sdk import task as sdk_task

    from airflow_provider_azbatch.decorators.source import function_source

    def decorate(**_):
        return lambda function: function

    @decorate(
        pool_id="p",
        image="x",
    )
    # comment
    def first(a, b=1):
        """Doc."""
        return a + b

    assert function_source(first) == 'def first(a, b=1):\n    """Doc."""\n    return a + b\n'
    assert sdk_task is not None


def test_the_connection_form_fields_are_the_extras_a_connection_may_hold():
    from airflow_provider_azbatch.get_provider_info import CONN_FIELDS
    from airflow_provider_azbatch.hooks.connection import EXTRA_FIELDS

    assert sorted(CONN_FIELDS) == sorted(EXTRA_FIELDS)


def test_a_misspelt_argument_of_the_decorator_is_named_with_the_right_one():
    from airflow.sdk import DAG

    from airflow_provider_azbatch.decorators.azure_batch import azure_batch_task

    def work():
        return 1

    with DAG("first_hour_decorator_typo", schedule=None), pytest.raises(AzureBatchValidationError) as caught:
        azure_batch_task(work, pool_id="shared", max_wall_clok=60)()
    assert str(caught.value) == "max_wall_clok is not a parameter of @task.azure_batch: did you mean 'max_wall_clock'?"
    with DAG("first_hour_decorator_unknown", schedule=None), pytest.raises(AzureBatchValidationError) as caught:
        azure_batch_task(work, pool_id="shared", zzz_unheard_of=1)()
    assert str(caught.value) == (
        "zzz_unheard_of is not a parameter of @task.azure_batch (see help(AzureBatchJobOperator) for its parameters)"
    )
