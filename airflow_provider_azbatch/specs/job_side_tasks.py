"""A job's preparation and release tasks as an operator user writes them, checked when the DAG is defined.

The preparation task runs once on each node before the job's first task there (fetch a dataset once per
node, warm a cache); the release task on each node that ran it, when the job ends (clean up). Both are shell
commands like a task's, with environment, Blob inputs, a wall clock, the job's container image (their own
``image`` wins) and the job's workspace unpacked into ``workspace/`` first.

    job_preparation={"command": "python3 workspace/fetch.py", "max_retries": 2}
    job_release="rm -rf $AZ_BATCH_NODE_SHARED_DIR/cache"
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar

from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.specs.blob_io import InputSpec, parse_inputs
from airflow_provider_azbatch.specs.identity import RunAs

PREPARATION, RELEASE = "preparation", "release"
# The ids Batch gives them when none is set.
SIDE_TASK_IDS = {PREPARATION: "jobpreparation", RELEASE: "jobrelease"}
PREPARATION_FIELDS = (
    "command",
    "environment",
    "inputs",
    "max_wall_clock",
    "max_retries",
    "wait_for_success",
    "image",
    "run_as",
)
RELEASE_FIELDS = ("command", "environment", "inputs", "max_wall_clock", "image", "run_as")
# The service's limit of a release task's run (and its default).
MAX_RELEASE_WALL_CLOCK = timedelta(minutes=15)


@dataclass(frozen=True)
class JobSideTask:
    """A job preparation or release task (see the module docstring)."""

    kind: str
    command: str
    environment: Mapping[str, str] = field(default_factory=dict)
    inputs: tuple[InputSpec, ...] = ()
    max_wall_clock: timedelta | None = None
    max_retries: int | None = None
    # Preparation: the job's tasks run on a node only once it succeeded there (Batch's default).
    wait_for_success: bool = True
    image: str | None = None
    # Who it runs as (the operator's run_as when None).
    run_as: RunAs | None = None
    # Not a user's field: the task gets the job's log container (a write SAS URL) and log path, to upload what
    # a node keeps beyond its tasks' output files (the TorchX scheduler's other replicas; see JobSubmission).
    log_upload: bool = False

    template_fields: ClassVar[tuple[str, ...]] = ("command", "environment", "inputs", "image")

    @property
    def id(self) -> str:
        return SIDE_TASK_IDS[self.kind]

    @property
    def workspace(self) -> None:
        """It gets the job's workspace (it has none of its own)."""
        return None

    @property
    def outputs(self) -> tuple[()]:
        """It uploads nothing (its output stays on the node)."""
        return ()

    @classmethod
    def parse(cls, value: Any, kind: str, where: str) -> JobSideTask | None:
        if value is None:
            return None
        if isinstance(value, JobSideTask):
            if value.kind != kind:
                raise validation.fail(where, f"is a job {value.kind} task, not a job {kind} task")
            parsed = cls.parse({name: getattr(value, name) for name in cls._fields(kind)}, kind, where)
            return dataclasses.replace(parsed, log_upload=value.log_upload) if parsed is not None else None
        if isinstance(value, str):
            value = {"command": value}
        known = cls._fields(kind)
        value = validation.known_mapping(
            value, where, tuple(known), must_be=f"a command or a mapping ({', '.join(known)})"
        )
        wall_clock = validation.duration(value.get("max_wall_clock"), f"{where}.max_wall_clock")
        if kind == RELEASE and wall_clock is not None and wall_clock > MAX_RELEASE_WALL_CLOCK:
            raise validation.fail(
                f"{where}.max_wall_clock", f"must be at most 15 minutes (the Batch service's limit), got {wall_clock}"
            )
        wait = value.get("wait_for_success", True)
        if not isinstance(wait, bool):
            raise validation.fail(f"{where}.wait_for_success", f"must be True or False, got {wait!r}")
        image = validation.image(value.get("image"), f"{where}.image")
        return cls(
            kind=kind,
            command=validation.command_line(value.get("command"), f"{where}.command"),
            environment=validation.environment(value.get("environment"), f"{where}.environment"),
            inputs=parse_inputs(value.get("inputs"), f"{where}.inputs"),
            max_wall_clock=wall_clock,
            max_retries=validation.retries(value.get("max_retries"), f"{where}.max_retries"),
            wait_for_success=wait,
            image=image,
            run_as=RunAs.parse(value.get("run_as"), f"{where}.run_as"),
        )

    @staticmethod
    def _fields(kind: str) -> tuple[str, ...]:
        return PREPARATION_FIELDS if kind == PREPARATION else RELEASE_FIELDS
