"""The options of ``AzureBatchJobOperator``, declared once: each with its type, default, doc and where it goes.

The operator's keyword parameters and their ``:param`` docs are written from this table into
``operators/job.py`` by ``python scripts/operator_options.py`` (IDEs and the API reference read that source;
``tests/unit/test_operator_options.py`` fails when it differs from the table). When the operator is made, it
checks each value with the option's ``check`` and hands it where the option goes: the job request, the run's
settings, an option group (a flat form such as ``image=``), or the operator itself. The TaskFlow decorator and
the TorchX operator read from here which options say what runs. Adding an option: a line here, then the code
that acts on it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from airflow_provider_azbatch import config
from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.specs.exit_conditions import skip_codes
from airflow_provider_azbatch.specs.options import FanOut, merge
from airflow_provider_azbatch.specs.sdk_fields import as_rest

# Where an option goes: a field of the job request, of the run's settings, or kept by the operator itself.
JOB, RUN, OPERATOR = "job", "run", "operator"
# A flat form goes into its option group (``image=`` into ``containers``).
CONTAINERS, BLOB, FAN_OUT = "containers", "blob", "fan_out"


@dataclass(frozen=True)
class Option:
    """One keyword parameter of the operator.

    ``type`` and ``default`` are written as the signature writes them; ``field`` is the name of the field it goes
    to, where that differs from the option's; ``check`` checks (and normalizes) a value when the operator is
    made, so that a mistake fails the DAG file (a templated option is checked after rendering, by the request).
    """

    name: str
    type: str
    doc: str
    default: str = "None"
    goes: str = JOB
    field: str | None = None
    check: Callable[[Any, str], Any] | None = None
    # Rendered by Jinja when the task runs (an Airflow template field), and how the UI shows it rendered.
    templated: bool = False
    renderer: str | None = None
    # The Batch REST fields it sets, which overrides may not set over it (see specs/overrides.py).
    sets: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return self.field or self.name


def _optional(check: Callable[..., Any], **limits: Any) -> Callable[[Any, str], Any]:
    return lambda value, name: None if value is None else check(value, name, **limits)


def _fail_fast(value: Any, name: str) -> Any:
    return value if value is not None else config.get_bool("fail_fast")


# The options in the order the signature and the docs show them, by part (its heading in the docs).
PARTS: tuple[tuple[str, tuple[Option, ...]], ...] = (
    (
        "What to run (one of):",
        (
            Option(
                "command",
                "str | None",
                "one task: the shell command it runs (``/bin/sh -c`` on Linux nodes).",
                templated=True,
                renderer="bash",
            ),
            Option(
                "tasks",
                "Sequence[Mapping[str, Any] | TaskSpec] | None",
                "several tasks, each a mapping (or :class:`~airflow_provider_azbatch.specs.tasks.TaskSpec`) with "
                "``id`` and ``command_line`` and optionally ``environment``, ``max_retries``, ``max_wall_clock``, "
                "``depends_on``, ``required_slots``, ``display_name``, ``image``, ``num_nodes``, "
                "``coordination_command``, ``inputs``, ``outputs``.",
                templated=True,
                renderer="json",
            ),
            Option(
                "fan_out",
                "FanOut | None",
                "one task per item of a list: a :class:`~airflow_provider_azbatch.specs.options.FanOut` (or the "
                "flat ``command_template``, ``parameters``, ``task_id_prefix``).",
                templated=True,
            ),
        ),
    ),
    (
        "Where it runs (one of):",
        (
            Option(
                "pool_id",
                "str | None",
                "an existing pool (shorthand for ``batch_pool=BatchPool.existing(pool_id)``).",
                goes=OPERATOR,
                templated=True,
            ),
            Option(
                "batch_pool",
                "BatchPool | None",
                "a :class:`~airflow_provider_azbatch.pools.strategy.BatchPool`: ``existing`` (checked: exists, VM "
                "size fits ``requirements``), ``shared`` (a named pool created from resource requirements if "
                "missing) or ``auto`` (a pool made for the job and deleted with it).",
                goes=OPERATOR,
            ),
        ),
    ),
    (
        "Job settings:",
        (
            Option(
                "job_id",
                "str | None",
                "the Batch job id; default: derived from DAG, task, run and map index, so a retry of the same task "
                "instance finds the job an earlier try submitted.",
                templated=True,
            ),
            Option("display_name", "str | None", "the job's display name (at most 1,024 characters).", templated=True),
            Option(
                "environment",
                "Mapping[str, str] | None",
                "environment variables for every task of the job.",
                templated=True,
                renderer="json",
            ),
            Option(
                "metadata",
                "Mapping[str, str] | None",
                "name/value strings stored on the job.",
                templated=True,
                renderer="json",
            ),
            Option(
                "max_task_retries",
                "int | None",
                "how often the service retries a failed task (-1: without limit); a task's own ``max_retries`` wins.",
                check=validation.retries,
            ),
            Option(
                "max_wall_clock",
                "timedelta | float | None",
                "longest a task may run (timedelta or seconds); a task's own value wins.",
                check=validation.duration,
            ),
            Option(
                "job_max_wall_clock",
                "timedelta | float | None",
                "longest the whole job may run before the service terminates it.",
                check=validation.duration,
            ),
            Option(
                "max_parallel_tasks",
                "int | None",
                "most tasks of the job running at once.",
                check=_optional(validation.integer, minimum=1),
            ),
            Option(
                "num_nodes",
                "int",
                "with ``command``: run it as a multi-node task on this many nodes.",
                default="1",
                check=lambda value, name: validation.integer(value, name, minimum=1),
            ),
            Option("coordination_command", "str | None", "with ``num_nodes``: what every node runs first."),
            Option(
                "containers",
                "ContainerOptions | None",
                "a :class:`~airflow_provider_azbatch.specs.options.ContainerOptions` (or the flat ``image``, "
                "``registry_conn_id``, ``container_run_options``, ``container_working_directory``).",
                templated=True,
            ),
            Option(
                "blob",
                "BlobOptions | None",
                "a :class:`~airflow_provider_azbatch.specs.options.BlobOptions` (or the flat ``inputs``, "
                "``outputs``, ``output_container``, ``upload_logs``, ``logs_prefix``, ``output_identity``).",
                templated=True,
            ),
            Option(
                "workspace",
                "str | Workspace | None",
                "a local directory (absolute, or relative to the DAG file), or a "
                ":class:`~airflow_provider_azbatch.workspace.Workspace`: packed (ignore rules, size limit), staged in "
                "Blob once per content and unpacked into every task's ``workspace/`` (``$AZBATCH_WORKSPACE``) before "
                "its command runs; a task's own ``workspace`` wins.",
                templated=True,
            ),
            Option(
                "priority",
                "int | str | None",
                "the job's priority, -1000 to 1000 (the service's default 0): on a busy pool, a higher priority "
                "job's tasks start before a lower one's.",
                templated=True,
            ),
            Option(
                "run_as",
                "str | RunAs | Mapping[str, Any] | None",
                'who the tasks run as: ``"admin"``, ``"nonadmin"`` (the pool\'s automatic user), or a '
                ":class:`~airflow_provider_azbatch.specs.identity.RunAs` (task scope, or a pool's named user); a "
                "task's own ``run_as`` wins.",
            ),
            Option(
                "job_overrides",
                "Mapping[str, Any] | Any",
                "Batch REST job fields (camelCase, or an SDK model) merged over the job the operator builds, checked "
                "against azure-batch's ``BatchJobCreateOptions`` (see "
                ":mod:`airflow_provider_azbatch.specs.overrides`).",
                check=lambda value, name: as_rest(value),
                templated=True,
                renderer="json",
            ),
            Option(
                "task_overrides",
                "Mapping[str, Any] | Any",
                "Batch REST task fields merged over every task (a task's own ``overrides`` after them), checked "
                "against ``BatchTaskCreateOptions``.",
                check=lambda value, name: as_rest(value),
                templated=True,
                renderer="json",
            ),
        ),
    ),
    (
        "Waiting:",
        (
            Option(
                "azbatch_conn_id",
                "str | None",
                "the ``azbatch`` connection (default ``[azbatch] default_conn_id``).",
                goes=RUN,
            ),
            Option(
                "deferrable",
                "bool | None",
                "wait in the triggerer instead of holding a worker slot (default ``[operators] default_deferrable``).",
                goes=OPERATOR,
            ),
            Option(
                "poll_interval",
                "float | None",
                "seconds between polls (default ``[azbatch] poll_interval``).",
                goes=RUN,
            ),
            Option(
                "stream_output",
                "bool | None",
                "show task stdout/stderr in the Airflow log (default ``[azbatch] stream_task_output``).",
                goes=RUN,
            ),
            Option(
                "max_streamed_tasks",
                "int | None",
                "show live output of at most this many tasks, the first ones submitted (default ``[azbatch] "
                "max_streamed_tasks``); stderr of failed tasks is always shown at the end.",
                goes=RUN,
            ),
            Option("failure_tail_lines", "int | None", "stderr lines quoted in the error for a failed task.", goes=RUN),
            Option(
                "max_outage",
                "float",
                "seconds of Batch service errors a wait rides out before failing.",
                default="DEFAULT_MAX_OUTAGE_SECONDS",
                goes=RUN,
            ),
            Option(
                "on_finish_action",
                "str",
                "``keep_job`` (default), ``delete_job`` or ``delete_succeeded_job``.",
                default='"keep_job"',
                goes=RUN,
            ),
            Option(
                "force_new_job",
                "bool",
                "submit a new job even if this task instance already has one.",
                default="False",
                goes=RUN,
            ),
        ),
    ),
    (
        "When tasks fail (see docs/howto/when-tasks-fail.md):",
        (
            Option(
                "fail_fast",
                "bool | None",
                "the first task that fails (after its retries) terminates the job (default ``[azbatch] fail_fast``).",
                check=_fail_fast,
            ),
            Option(
                "exit_conditions",
                "Mapping[str, Any] | None",
                "what exit codes do to the job and to dependents, for tasks without their own: a mapping of "
                "``exit_codes``, ``exit_code_ranges``, ``pre_processing_error``, ``file_upload_error``, ``default`` "
                "to ``job_action`` / ``dependency_action`` (see "
                ":mod:`~airflow_provider_azbatch.specs.exit_conditions`).",
                sets=("exitConditions",),
            ),
            Option(
                "skip_on_exit_code",
                "int | Sequence[int] | None",
                "an exit code or a list of them: a job whose only failures exited with one of them skips the "
                "Airflow task; a task's own ``skip_on_exit_code`` wins.",
                field="skip_codes",
                check=skip_codes,
                sets=("exitConditions",),
            ),
            Option(
                "job_preparation",
                "str | Mapping[str, Any] | JobSideTask | None",
                "a command (or a mapping, or a :class:`~airflow_provider_azbatch.specs.job_side_tasks.JobSideTask`) "
                "run once per node before the job's first task there; if it fails on every node, the wait ends "
                "naming it.",
                templated=True,
            ),
            Option(
                "job_release",
                "str | Mapping[str, Any] | JobSideTask | None",
                "a command (or a mapping) run after the job on each node that ran ``job_preparation``.",
                templated=True,
            ),
        ),
    ),
    (
        "Results:",
        (
            Option(
                "result_file",
                "str | None",
                "a JSON file every task (without its own ``result_file``) writes in its working directory: read back "
                "when the job succeeded, into the XCom result's ``results`` by task id (a single task's also as "
                "``return_value``), at most ``[azbatch] max_result_bytes`` each.",
            ),
        ),
    ),
    (
        "Flat forms of the option groups above:",
        (
            Option("command_template", "str | None", "see ``fan_out``.", goes=FAN_OUT),
            Option("parameters", "Sequence[Any] | None", "see ``fan_out``.", goes=FAN_OUT),
            Option("task_id_prefix", "str | None", "see ``fan_out``.", goes=FAN_OUT),
            Option("image", "str | None", "see ``containers``.", goes=CONTAINERS),
            Option("registry_conn_id", "str | None", "see ``containers``.", goes=CONTAINERS),
            Option("container_run_options", "str | None", "see ``containers``.", goes=CONTAINERS, field="run_options"),
            Option(
                "container_working_directory",
                "str | None",
                "see ``containers``.",
                goes=CONTAINERS,
                field="working_directory",
            ),
            Option("inputs", "Sequence[Mapping[str, Any]] | None", "see ``blob``.", goes=BLOB),
            Option("outputs", "Sequence[Mapping[str, Any]] | None", "see ``blob``.", goes=BLOB),
            Option("output_container", "str | None", "see ``blob``.", goes=BLOB),
            Option("upload_logs", "bool | None", "see ``blob``.", goes=BLOB),
            Option("logs_prefix", "str | None", "see ``blob``.", goes=BLOB),
            Option("output_identity", "str | None", "see ``blob``.", goes=BLOB),
        ),
    ),
)

OPTIONS: tuple[Option, ...] = tuple(option for _, options in PARTS for option in options)
NAMES: frozenset[str] = frozenset(option.name for option in OPTIONS)


def templated() -> tuple[str, ...]:
    """The options Jinja renders when the task runs (the operator's template fields)."""
    return tuple(option.name for option in OPTIONS if option.templated)


def renderers() -> dict[str, str]:
    return {option.name: option.renderer for option in OPTIONS if option.renderer is not None}


def owners_of(rest_field: str) -> str:
    """The options that set a Batch REST field (``exit_conditions or ...``)."""
    return " or ".join(option.name for option in OPTIONS if rest_field in option.sets)


def going_to(where: str) -> tuple[Option, ...]:
    """The options that go to ``where`` (``JOB``, ``RUN``, ``OPERATOR``, or an option group), in order."""
    return tuple(option for option in OPTIONS if option.goes == where)


def what_runs() -> tuple[str, ...]:
    """The options that say what runs, with their flat forms: what a face that decides it itself refuses."""
    return (*(option.name for option in PARTS[0][1]), *(option.name for option in going_to(FAN_OUT)))


# The operator's own names of option fields given flat (``image=`` rather than ``containers=``), where they differ.
FLAT_NAMES = {option.target: option.name for group in (CONTAINERS, BLOB) for option in going_to(group) if option.field}


def _parameters(cls: type) -> list[str]:
    """The keyword parameters of ``cls`` and its bases (Airflow's BaseOperator's among them)."""
    names: dict[str, None] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            parameters = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):  # a builtin's
            continue
        for parameter in parameters:
            if parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD) and parameter.name != "self":
                names.setdefault(parameter.name)
    return list(names)


def refuse_unknown_arguments(cls: type, kwargs: Mapping[str, Any]) -> None:
    """A misspelt argument named with the one it is likely meant to be, instead of Airflow's bare "Invalid
    arguments were passed" (names Airflow adds itself start with ``_``)."""
    known = _parameters(cls)
    unknown = [name for name in kwargs if name not in known and not name.startswith("_")]
    if unknown:
        what = getattr(cls, "custom_operator_name", None) or cls.__name__
        name = unknown[0]
        near = validation.suggestion(name, known, cutoff=0.7)
        # The decorator's class is private: its parameters are the operator's.
        documented = cls.__name__ if not cls.__name__.startswith("_") else "AzureBatchJobOperator"
        hint = f": did you mean {near!r}?" if near is not None else f" (see help({documented}) for its parameters)"
        raise validation.fail(name, f"is not a parameter of {what}{hint}")


def fan_out_of(given: Mapping[str, Any]) -> FanOut | None:
    """``fan_out``, or the one its flat form gives (``command_template``, ``parameters``, ``task_id_prefix``)."""
    fan_out, template, parameters = given["fan_out"], given["command_template"], given["parameters"]
    if fan_out is not None and (template is not None or parameters is not None):
        raise validation.fail("command_template", "is also set in fan_out: give fan_out or command_template, not both")
    if fan_out is None and template is not None:
        return FanOut(template, parameters if parameters is not None else [], given["task_id_prefix"] or "task")
    if parameters is not None:
        raise validation.fail("parameters", "only go with command_template")
    # Given as the user gave it: the operator's own check (FanOut.check) refuses anything else, naming the field.
    return cast("FanOut | None", fan_out)


def group_of(group: str, given: Mapping[str, Any], kind: type[Any]) -> Any:
    """An option group (``containers``, ``blob``): given as one object, or by its flat forms (``image=``...)."""
    flat = {option.target: given[option.name] for option in going_to(group)}
    return merge(group, given[group], flat, kind, aliases=FLAT_NAMES)
