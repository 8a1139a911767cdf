"""How one run watches its job and what it does when the job ends: the operator's waiting options, checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from airflow_provider_azbatch import config
from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.watching.outages import DEFAULT_MAX_OUTAGE_SECONDS

if TYPE_CHECKING:
    from typing_extensions import Unpack

ON_FINISH_ACTIONS = ("keep_job", "delete_job", "delete_succeeded_job")


class WaitingOptions(TypedDict, total=False):
    """The operator's waiting options as a user gives them (declared in ``specs/operator_options.py``); ``None``
    takes the ``[azbatch]`` default. The sensor gives some of them."""

    azbatch_conn_id: str | None
    poll_interval: float | None
    stream_output: bool | None
    max_streamed_tasks: int | None
    failure_tail_lines: int | None
    max_outage: float
    on_finish_action: str
    force_new_job: bool


@dataclass(frozen=True)
class RunSettings:
    """``None`` takes the ``[azbatch]`` default; every value is checked when the settings are made."""

    azbatch_conn_id: str
    poll_interval: float
    stream_output: bool
    max_streamed_tasks: int
    failure_tail_lines: int
    max_outage: float = DEFAULT_MAX_OUTAGE_SECONDS
    on_finish_action: str = "keep_job"
    force_new_job: bool = False
    # Who submits (metrics are tagged with it).
    operator: str = "AzureBatchJobOperator"

    @classmethod
    def from_parameters(
        cls, *, operator: str = "AzureBatchJobOperator", **given: Unpack[WaitingOptions]
    ) -> RunSettings:
        """``operator``'s settings from the waiting options it was given (one not given: its default)."""
        on_finish_action = given.get("on_finish_action", cls.on_finish_action)
        if on_finish_action not in ON_FINISH_ACTIONS:
            raise validation.fail(
                "on_finish_action", f"must be one of {', '.join(ON_FINISH_ACTIONS)}, got {on_finish_action!r}"
            )
        stream = given.get("stream_output")
        stream = stream if stream is not None else config.get_bool("stream_task_output")
        force_new_job = given.get("force_new_job", cls.force_new_job)
        for name, value in (("stream_output", stream), ("force_new_job", force_new_job)):
            if not isinstance(value, bool):
                raise validation.fail(name, f"must be True or False, got {value!r}")
        poll_interval = given.get("poll_interval")
        max_streamed_tasks = given.get("max_streamed_tasks")
        failure_tail_lines = given.get("failure_tail_lines")
        return cls(
            azbatch_conn_id=validation.text(given.get("azbatch_conn_id"), "azbatch_conn_id")
            or config.get_str("default_conn_id"),
            poll_interval=validation.number(
                poll_interval if poll_interval is not None else config.get_float("poll_interval"),
                "poll_interval",
                maximum=3600,
            ),
            stream_output=stream,
            max_streamed_tasks=validation.integer(
                max_streamed_tasks if max_streamed_tasks is not None else config.get_int("max_streamed_tasks"),
                "max_streamed_tasks",
                minimum=0,
                maximum=1000,
            ),
            failure_tail_lines=validation.integer(
                failure_tail_lines if failure_tail_lines is not None else config.get_int("failure_tail_lines"),
                "failure_tail_lines",
                minimum=0,
                maximum=10000,
            ),
            max_outage=validation.number(given.get("max_outage", cls.max_outage), "max_outage"),
            on_finish_action=on_finish_action,
            force_new_job=force_new_job,
            operator=operator,
        )
