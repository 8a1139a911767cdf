"""Overrides: Batch REST fields a user adds to what the provider generates, checked against the SDK's models.

``job_overrides``, ``task_overrides`` (and a task's own ``overrides``) and a pool's ``pool_overrides`` are
REST-shaped mappings (camelCase, as the Batch REST reference writes them) or SDK models, deep-merged over the
request the provider built:

- a mapping merges key by key into the generated one;
- a list of name/value pairs (environment settings, metadata) merges by ``name``; any other list is added to the
  generated list (what the provider put there stays: the workspace's resource file, the upload of the logs);
- any other value replaces the generated one.

The azure-batch models send whatever keys they are given, so a misspelt key would reach the service unnoticed:
every key is checked here against the model's fields (nested models and lists of models included), with the
nearest valid name suggested. Keys the provider sets itself are refused with the reason and the parameter to
use instead. Values are checked for their type (a template renders to a string: whole numbers and booleans are
read from one), enum values against the SDK's enums.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from azure.batch import models as batch_models

if TYPE_CHECKING:
    from azure.batch._utils.model_base import Model  # the SDK models' base class, which azure-batch keeps private

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.specs.operator_options import owners_of
from airflow_provider_azbatch.specs.sdk_fields import SdkField, as_rest, model_fields

_DURATION = re.compile(r"-?P(?=\d|T\d)(\d+(\.\d+)?D)?(T(?=\d)(\d+(\.\d+)?H)?(\d+(\.\d+)?M)?(\d+(\.\d+)?S)?)?")
_INTEGER = re.compile(r"[+-]?\d+")


@dataclass(frozen=True)
class Owned:
    """A field the provider sets itself: why, and what to use instead (None: nothing, it is the provider's)."""

    reason: str
    use: str | None = None

    def problem(self) -> str:
        instead = f": use {self.use}" if self.use else ": it cannot be overridden"
        return f"is set by the provider ({self.reason}){instead}"


@dataclass(frozen=True)
class OverrideSchema:
    """What an override of one request may hold: the SDK model it is merged into and the provider's own fields.

    ``owned`` is keyed by dotted REST path without list indices (``startTask.userIdentity``).
    """

    model: type
    owned: Mapping[str, Owned] = field(default_factory=dict)

    def check(self, value: Any, where: str, *, templates: bool = False) -> dict[str, Any]:
        """The override as a REST dict, checked; ``where`` names it in errors (``task_overrides``).

        ``templates``: the DAG is being parsed, so a value holding a Jinja template is left for the run (its
        key is checked now all the same).
        """
        if value is None:
            return {}
        if templates and holds_template(value):
            return {}
        value = as_rest(value)
        if not isinstance(value, Mapping):
            raise AzureBatchValidationError(
                where,
                f"must be a mapping of Batch REST fields ({self.model.__name__}), got {type(value).__name__} {value!r}",
            )
        checker = _Checker(self.owned, templates)
        return checker.mapping(value, self.model, where, "")


def holds_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


class _Checker:
    def __init__(self, owned: Mapping[str, Owned], templates: bool) -> None:
        self.owned = owned
        self.templates = templates

    def mapping(self, value: Mapping[Any, Any], model: type, where: str, path: str) -> dict[str, Any]:
        fields = model_fields(model)
        out: dict[str, Any] = {}
        for key, item in value.items():
            if self.templates and holds_template(key):
                out[key] = item
                continue
            here = f"{where}.{key}"
            if not isinstance(key, str) or key not in fields:
                raise AzureBatchValidationError(here, _unknown_key(key, model, fields))
            sdk_field = fields[key]
            dotted = f"{path}.{key}" if path else key
            owned = self.owned.get(dotted)
            if owned is not None:
                raise AzureBatchValidationError(here, owned.problem())
            if sdk_field.read_only:
                raise AzureBatchValidationError(here, "is read-only: the Batch service sets it")
            out[key] = self.value(item, sdk_field, here, dotted)
        return out

    def value(self, item: Any, sdk_field: SdkField, where: str, path: str) -> Any:
        if item is None or (self.templates and holds_template(item)):
            return item
        if sdk_field.is_list:
            if isinstance(item, (str, bytes, Mapping)) or not isinstance(item, Sequence):
                raise AzureBatchValidationError(
                    where, f"must be a list ({sdk_field.describe()}), got {type(item).__name__} {item!r}"
                )
            return [self.element(element, sdk_field, f"{where}[{index}]", path) for index, element in enumerate(item)]
        return self.element(item, sdk_field, where, path)

    def element(self, item: Any, sdk_field: SdkField, where: str, path: str) -> Any:
        if self.templates and holds_template(item):
            return item
        kind = sdk_field.kind
        if kind == "model":
            assert sdk_field.model is not None
            if not isinstance(item, Mapping):
                raise AzureBatchValidationError(
                    where, f"must be a mapping ({sdk_field.model.__name__}), got {type(item).__name__} {item!r}"
                )
            return self.mapping(item, sdk_field.model, where, path)
        return _scalar(item, sdk_field, where)


def _scalar(item: Any, sdk_field: SdkField, where: str) -> Any:
    kind = sdk_field.kind
    what = sdk_field.describe()
    wrong = f"must be {what if kind == 'bool' else 'a ' + what}, got {type(item).__name__} {item!r}"
    if kind == "enum":
        canonical = {option.lower(): option for option in sdk_field.enum_values}
        if not isinstance(item, str) or item.lower() not in canonical:
            near = difflib.get_close_matches(str(item).lower(), list(canonical), n=1)
            hint = f" (did you mean {canonical[near[0]]!r}?)" if near else ""
            raise AzureBatchValidationError(where, f"{item!r} is not {sdk_field.describe()}{hint}")
        return item
    if kind == "bool":
        if isinstance(item, str) and item.lower() in ("true", "false"):
            return item.lower() == "true"
        if not isinstance(item, bool):
            raise AzureBatchValidationError(where, wrong)
        return item
    if kind == "int":
        if isinstance(item, str) and _INTEGER.fullmatch(item.strip()):
            return int(item)
        if isinstance(item, bool) or not isinstance(item, int):
            raise AzureBatchValidationError(where, wrong)
        return item
    if kind == "float":
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not math.isfinite(item):
            raise AzureBatchValidationError(where, wrong)
        return item
    if kind == "str":
        if not isinstance(item, str):
            raise AzureBatchValidationError(where, wrong)
        return item
    if kind == "duration":
        if isinstance(item, timedelta):
            return item
        if isinstance(item, (int, float)) and not isinstance(item, bool) and math.isfinite(item):
            return timedelta(seconds=item)
        if not isinstance(item, str) or not _DURATION.fullmatch(item.strip().upper()):
            raise AzureBatchValidationError(
                where, f"must be an ISO 8601 duration such as 'PT1H30M' (or a timedelta), got {item!r}"
            )
        return item
    if kind == "map":
        if not isinstance(item, Mapping):
            raise AzureBatchValidationError(where, wrong)
        return dict(item)
    return item


def _unknown_key(key: Any, model: type, fields: Mapping[str, SdkField]) -> str:
    names = sorted(name for name, sdk_field in fields.items() if not sdk_field.read_only)
    prefix = f"is not a field of {model.__name__}"
    if isinstance(key, str):
        by_python = {sdk_field.python_name: name for name, sdk_field in fields.items()}
        if key in by_python:
            return f"{prefix}: overrides use the REST names (camelCase), write {by_python[key]!r}"
        by_lower = {name.lower(): name for name in names}
        if key.lower() in by_lower:
            return f"{prefix}: REST names are case-sensitive, write {by_lower[key.lower()]!r}"
        near = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
        if near:
            return f"{prefix}: did you mean {near[0]!r}?"
    return f"{prefix} (its fields: {', '.join(names)})"


# -- merging ----------------------------------------------------------------------------------------
def deep_merge(base: Any, override: Any) -> Any:
    """``override`` merged over ``base`` (both REST JSON), as the module docstring says; neither is changed."""
    if isinstance(base, Mapping) and isinstance(override, Mapping):
        merged = dict(base)
        for key, item in override.items():
            merged[key] = deep_merge(base[key], item) if key in base else item
        return merged
    if isinstance(base, list) and isinstance(override, list):
        if _named(base) and _named(override):
            by_name = {item["name"]: item for item in base}
            by_name.update({item["name"]: item for item in override})
            return list(by_name.values())
        return [*base, *(item for item in override if item not in base)]
    return override


def _named(items: list[Any]) -> bool:
    return all(isinstance(item, Mapping) and isinstance(item.get("name"), str) for item in items)


SdkModel = TypeVar("SdkModel", bound="Model")


def apply_overrides(generated: SdkModel, *overrides: Mapping[str, Any]) -> SdkModel:
    """The SDK model ``generated`` with every override merged over it, in order, as a model of the same class."""
    if not any(overrides):
        return generated
    body = generated.as_dict()
    for override in overrides:
        if override:
            body = deep_merge(body, override)
    return type(generated)(body)


def find_keys(value: Any, key: str, path: str = "") -> list[str]:
    """Dotted paths (with list indices) of every ``key`` inside ``value``: where identity references are."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for name, item in value.items():
            here = f"{path}.{name}" if path else str(name)
            if name == key:
                found.append(here)
            found.extend(find_keys(item, key, here))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(find_keys(item, key, f"{path}[{index}]"))
    return found


# -- what the provider owns -------------------------------------------------------------------------
def _side_task_owned(name: str, parameter: str, *, retries: bool) -> dict[str, Owned]:
    """A job preparation or release task: what its parameter sets."""
    owned = {
        f"{name}.id": Owned(f"the id Batch gives a job {parameter.split('_')[1]} task"),
        f"{name}.commandLine": Owned("its command, handed to a shell (and unpacking the workspace)", parameter),
        f"{name}.environmentSettings": Owned("its environment", f"{parameter}'s environment"),
        f"{name}.userIdentity": Owned("who it runs as", f"{parameter}'s run_as, or run_as"),
        f"{name}.containerSettings.imageName": Owned("its container image", f"{parameter}'s image"),
        f"{name}.containerSettings.registry": Owned("the registry credentials, from a connection", "registry_conn_id"),
    }
    if retries:
        owned[f"{name}.constraints.maxWallClockTime"] = Owned("its wall clock", f"{parameter}'s max_wall_clock")
        owned[f"{name}.constraints.maxTaskRetryCount"] = Owned("its retries", f"{parameter}'s max_retries")
        owned[f"{name}.waitForSuccess"] = Owned("whether tasks wait for it", f"{parameter}'s wait_for_success")
    else:
        owned[f"{name}.maxWallClockTime"] = Owned("its wall clock", f"{parameter}'s max_wall_clock")
    return owned


JOB_OVERRIDES = OverrideSchema(
    batch_models.BatchJobCreateOptions,
    {
        "id": Owned("the job id", "job_id"),
        "poolInfo": Owned("the pool the job runs on", "pool_id or batch_pool"),
        "onAllTasksComplete": Owned(
            "it ends the job once its tasks are done, set only after every task is added so the job cannot end "
            "between two batches of tasks"
        ),
        "usesTaskDependencies": Owned("computed from the tasks' depends_on", "depends_on in tasks"),
        "displayName": Owned("the job's display name", "display_name"),
        "priority": Owned("the job's priority", "priority"),
        "maxParallelTasks": Owned("the job's parallelism", "max_parallel_tasks"),
        "constraints.maxWallClockTime": Owned("the job's wall clock", "job_max_wall_clock"),
        "commonEnvironmentSettings": Owned("the job's environment", "environment"),
        "metadata": Owned("with names of its own (airflow_dag_id, ...)", "metadata"),
        "onTaskFailure": Owned("whether task failures act on the job", "fail_fast, or job actions in exit_conditions"),
        **_side_task_owned("jobPreparationTask", "job_preparation", retries=True),
        **_side_task_owned("jobReleaseTask", "job_release", retries=False),
    },
)

TASK_OVERRIDES = OverrideSchema(
    batch_models.BatchTaskCreateOptions,
    {
        "id": Owned("the task id", "the task's id"),
        "commandLine": Owned("the command, handed to a shell", "command, or the task's command_line"),
        "dependsOn": Owned("the task's dependencies", "the task's depends_on"),
        "displayName": Owned("the task's display name", "the task's display_name"),
        "environmentSettings": Owned("the task's environment", "environment, or the task's environment"),
        "constraints.maxWallClockTime": Owned("the task's wall clock", "max_wall_clock (operator or task)"),
        "constraints.maxTaskRetryCount": Owned("the task's retries", "max_task_retries, or the task's max_retries"),
        "requiredSlots": Owned("the task's slots", "the task's required_slots"),
        "userIdentity": Owned("the user the task runs as", "run_as (operator or task)"),
        "multiInstanceSettings.numberOfInstances": Owned("the task's nodes", "num_nodes"),
        "multiInstanceSettings.coordinationCommandLine": Owned(
            "the coordination command, handed to a shell (and unpacking the workspace)", "coordination_command"
        ),
        "containerSettings.imageName": Owned("the task's container image", "image (operator or task)"),
        "containerSettings.registry": Owned("the registry credentials, from a connection", "registry_conn_id"),
        "containerSettings.containerRunOptions": Owned("the container's options", "container_run_options"),
        "containerSettings.workingDirectory": Owned("the container's working directory", "container_working_directory"),
        "exitConditions": Owned("what exit codes do, with every job action spelled out", owners_of("exitConditions")),
    },
)
