"""Overrides checked against the azure-batch 15.1 models' fields, and merged over what the provider generates."""

from __future__ import annotations

from datetime import timedelta

import pytest
from azure.batch import models as m

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.specs.overrides import (
    JOB_OVERRIDES,
    TASK_OVERRIDES,
    apply_overrides,
    deep_merge,
    find_keys,
)
from airflow_provider_azbatch.specs.sdk_fields import model_fields


def _refused(schema, value, where="task_overrides", **kwargs) -> str:
    with pytest.raises(AzureBatchValidationError) as info:
        schema.check(value, where, **kwargs)
    return str(info.value)


def test_the_sdk_models_fields_are_read_with_rest_names_types_and_read_only_marks():
    task = model_fields(m.BatchTaskCreateOptions)
    assert {"userIdentity", "exitConditions", "affinityInfo", "resourceFiles", "constraints"} <= set(task)
    assert task["resourceFiles"].is_list
    assert task["resourceFiles"].model is m.ResourceFile
    assert task["requiredSlots"].kind == "int"
    auto_user = model_fields(m.AutoUserSpecification)
    assert auto_user["elevationLevel"].enum_values == ("nonadmin", "admin")
    assert model_fields(m.BatchVmImageReference)["exactVersion"].read_only
    assert model_fields(m.VirtualMachineConfiguration)["nodeAgentSKUId"].python_name == "node_agent_sku_id"
    assert model_fields(m.BatchTaskConstraints)["retentionTime"].kind == "duration"


def test_a_valid_nested_override_is_returned_as_rest_json():
    value = {
        "constraints": {"retentionTime": "PT1H"},
        "outputFiles": [
            {
                "filePattern": "out/*",
                "destination": {"container": {"containerUrl": "https://a/b", "uploadHeaders": [{"name": "x"}]}},
                "uploadOptions": {"uploadCondition": "taskCompletion"},
            }
        ],
        "affinityInfo": {"affinityId": "TVM:node"},
    }
    assert TASK_OVERRIDES.check(value, "task_overrides") == value


def test_sdk_models_are_accepted_anywhere_and_turned_into_rest_json():
    mount = m.ContainerHostBatchBindMountEntry(source="Shared", is_read_only=True)
    value = {"containerSettings": m.BatchTaskContainerSettings(container_host_batch_bind_mounts=[mount])}
    assert TASK_OVERRIDES.check(value, "task_overrides") == {
        "containerSettings": {"containerHostBatchBindMounts": [{"source": "Shared", "isReadOnly": True}]}
    }
    whole = m.BatchTaskCreateOptions(affinity_info=m.BatchAffinityInfo(affinity_id="TVM:n"))
    assert TASK_OVERRIDES.check(whole, "task_overrides") == {"affinityInfo": {"affinityId": "TVM:n"}}


def test_a_misspelt_key_is_refused_with_its_nearest_valid_field():
    assert _refused(TASK_OVERRIDES, {"constraints": {"retentionTim": "PT1H"}}) == (
        "task_overrides.constraints.retentionTim is not a field of BatchTaskConstraints: did you mean 'retentionTime'?"
    )
    assert _refused(JOB_OVERRIDES, {"allowTaskPremption": True}, "job_overrides") == (
        "job_overrides.allowTaskPremption is not a field of BatchJobCreateOptions: did you mean 'allowTaskPreemption'?"
    )


def test_keys_deep_inside_lists_of_models_are_checked():
    value = {
        "outputFiles": [{"filePattern": "a"}, {"filePattern": "b", "destination": {"container": {"contanerUrl": "u"}}}]
    }
    assert _refused(TASK_OVERRIDES, value) == (
        "task_overrides.outputFiles[1].destination.container.contanerUrl is not a field of "
        "OutputFileBlobContainerDestination: did you mean 'containerUrl'?"
    )


def test_python_and_wrongly_cased_names_are_told_apart():
    assert _refused(TASK_OVERRIDES, {"exit_conditions": {}}) == (
        "task_overrides.exit_conditions is not a field of BatchTaskCreateOptions: overrides use the REST names "
        "(camelCase), write 'exitConditions'"
    )
    assert _refused(TASK_OVERRIDES, {"ExitConditions": {}}) == (
        "task_overrides.ExitConditions is not a field of BatchTaskCreateOptions: REST names are case-sensitive, "
        "write 'exitConditions'"
    )


def test_a_key_nothing_resembles_lists_the_fields():
    message = _refused(TASK_OVERRIDES, {"zzz": 1})
    assert message.startswith("task_overrides.zzz is not a field of BatchTaskCreateOptions (its fields: affinityInfo, ")


@pytest.mark.parametrize(
    ("schema", "value", "message"),
    [
        (
            JOB_OVERRIDES,
            {"poolInfo": {}},
            "job_overrides.poolInfo is set by the provider (the pool the job runs on): use pool_id or batch_pool",
        ),
        (
            JOB_OVERRIDES,
            {"priority": 5},
            "job_overrides.priority is set by the provider (the job's priority): use priority",
        ),
        (
            JOB_OVERRIDES,
            {"onAllTasksComplete": "terminatejob"},
            "job_overrides.onAllTasksComplete is set by the "
            "provider (it ends the job once its tasks are done, set only after every task is added so the job "
            "cannot end "
            "between two batches of tasks): it cannot be overridden",
        ),
        (
            JOB_OVERRIDES,
            {"metadata": []},
            "job_overrides.metadata is set by the provider (with names of its own (airflow_dag_id, ...)): use metadata",
        ),
        (
            JOB_OVERRIDES,
            {"constraints": {"maxWallClockTime": "PT1H"}},
            "job_overrides.constraints.maxWallClockTime is "
            "set by the provider (the job's wall clock): use job_max_wall_clock",
        ),
        (
            TASK_OVERRIDES,
            {"userIdentity": {"username": "x"}},
            "task_overrides.userIdentity is set by the provider (the "
            "user the task runs as): use run_as (operator or task)",
        ),
        (
            TASK_OVERRIDES,
            {"dependsOn": {"taskIds": ["a"]}},
            "task_overrides.dependsOn is set by the provider (the task's dependencies): use the task's depends_on",
        ),
        (
            TASK_OVERRIDES,
            {"exitConditions": {"default": {"dependencyAction": "satisfy"}}},
            "task_overrides.exitConditions is set by the provider (what exit codes do, with every job action spelled "
            "out): use exit_conditions or skip_on_exit_code",
        ),
        (
            JOB_OVERRIDES,
            {"onTaskFailure": "performexitoptionsjobaction"},
            "job_overrides.onTaskFailure is set by the provider (whether task failures act on the job): use "
            "fail_fast, or job actions in exit_conditions",
        ),
        (
            JOB_OVERRIDES,
            {"jobPreparationTask": {"commandLine": "x"}},
            "job_overrides.jobPreparationTask.commandLine is set by the provider (its command, handed to a shell "
            "(and unpacking the workspace)): use job_preparation",
        ),
        (
            TASK_OVERRIDES,
            {"multiInstanceSettings": {"numberOfInstances": 3}},
            "task_overrides.multiInstanceSettings."
            "numberOfInstances is set by the provider (the task's nodes): use num_nodes",
        ),
    ],
)
def test_keys_the_provider_owns_are_refused_with_the_reason_and_the_parameter(schema, value, message):
    where = "job_overrides" if schema is JOB_OVERRIDES else "task_overrides"
    assert _refused(schema, value, where) == message


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"affinityInfo": "TVM:n"},
            "task_overrides.affinityInfo must be a mapping (BatchAffinityInfo), got str 'TVM:n'",
        ),
        (
            {"resourceFiles": {"httpUrl": "u"}},
            "task_overrides.resourceFiles must be a list (list of ResourceFile), got dict {'httpUrl': 'u'}",
        ),
        (
            {"constraints": {"retentionTime": "1 hour"}},
            "task_overrides.constraints.retentionTime must be an ISO 8601 "
            "duration such as 'PT1H30M' (or a timedelta), got '1 hour'",
        ),
        (
            {"containerSettings": {"containerHostBatchBindMounts": [{"source": "Shard"}]}},
            "task_overrides.containerSettings.containerHostBatchBindMounts[0].source 'Shard' is not one of: Shared, "
            "Startup, VfsMounts, Task, JobPrep, Applications (did you mean 'Shared'?)",
        ),
        (
            {"containerSettings": {"containerHostBatchBindMounts": [{"isReadOnly": "yes"}]}},
            "task_overrides.containerSettings.containerHostBatchBindMounts[0].isReadOnly must be true or false, "
            "got str 'yes'",
        ),
    ],
)
def test_values_are_checked_for_their_type(value, message):
    assert _refused(TASK_OVERRIDES, value) == message


def test_rendered_numbers_booleans_and_durations_are_read():
    checked = TASK_OVERRIDES.check({"constraints": {"retentionTime": timedelta(hours=2)}}, "task_overrides")
    assert checked["constraints"]["retentionTime"] == timedelta(hours=2)
    job = JOB_OVERRIDES.check(
        {"allowTaskPreemption": "true", "constraints": {"maxTaskRetryCount": "3"}}, "job_overrides"
    )
    assert job == {"allowTaskPreemption": True, "constraints": {"maxTaskRetryCount": 3}}
    assert _refused(JOB_OVERRIDES, {"constraints": {"maxTaskRetryCount": "three"}}, "job_overrides") == (
        "job_overrides.constraints.maxTaskRetryCount must be a whole number, got str 'three'"
    )


def test_read_only_fields_are_refused():
    schema = type(JOB_OVERRIDES)(m.BatchPoolSpecification)
    value = {"virtualMachineConfiguration": {"imageReference": {"exactVersion": "1"}}}
    with pytest.raises(AzureBatchValidationError) as info:
        schema.check(value, "pool_overrides")
    assert str(info.value) == (
        "pool_overrides.virtualMachineConfiguration.imageReference.exactVersion is read-only: the Batch service sets it"
    )


def test_at_parse_time_templated_values_wait_but_their_keys_are_checked():
    templated = {"constraints": {"retentionTime": "{{ params.keep }}"}}
    assert TASK_OVERRIDES.check(templated, "task_overrides", templates=True) == templated
    assert TASK_OVERRIDES.check("{{ var.json.overrides }}", "task_overrides", templates=True) == {}
    with pytest.raises(AzureBatchValidationError, match="retentionTme is not a field"):
        TASK_OVERRIDES.check({"constraints": {"retentionTme": "{{ params.keep }}"}}, "task_overrides", templates=True)
    with pytest.raises(AzureBatchValidationError, match="must be an ISO 8601 duration"):
        TASK_OVERRIDES.check(templated, "task_overrides")


def test_mappings_merge_named_lists_merge_by_name_and_other_lists_are_added_to():
    generated = {
        "constraints": {"maxWallClockTime": "PT1H"},
        "environmentSettings": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        "resourceFiles": [{"httpUrl": "workspace"}],
    }
    override = {
        "constraints": {"retentionTime": "P1D"},
        "environmentSettings": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
        "resourceFiles": [{"httpUrl": "extra"}, {"httpUrl": "workspace"}],
    }
    assert deep_merge(generated, override) == {
        "constraints": {"maxWallClockTime": "PT1H", "retentionTime": "P1D"},
        "environmentSettings": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
        "resourceFiles": [{"httpUrl": "workspace"}, {"httpUrl": "extra"}],
    }
    assert generated["constraints"] == {"maxWallClockTime": "PT1H"}  # not changed in place


def test_overrides_are_applied_in_order_onto_the_sdk_model():
    generated = m.BatchTaskCreateOptions(
        id="t", command_line="true", constraints=m.BatchTaskConstraints(max_task_retry_count=2)
    )
    merged = apply_overrides(
        generated, {"constraints": {"retentionTime": "PT1H"}}, {"constraints": {"retentionTime": "PT2H"}}
    )
    assert isinstance(merged, m.BatchTaskCreateOptions)
    assert merged.as_dict() == {
        "id": "t",
        "commandLine": "true",
        "constraints": {"maxTaskRetryCount": 2, "retentionTime": "PT2H"},
    }


def test_identity_references_are_found_wherever_they_are():
    value = {
        "resourceFiles": [{"httpUrl": "u"}, {"storageContainerUrl": "c", "identityReference": {"resourceId": "r"}}]
    }
    assert find_keys(value, "identityReference") == ["resourceFiles[1].identityReference"]
