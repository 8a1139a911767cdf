"""What a task's exit means for its job and its dependents: exit conditions, fail-fast and skip codes, checked
when the DAG is defined and mapped to the Batch ``exitConditions`` of each task.

The provider's shape (``snake_case``, codes as keys)::

    exit_conditions={
        "exit_codes": {3: {"dependency_action": "satisfy"}, 4: {"job_action": "terminate"}},
        "exit_code_ranges": [{"start": 10, "end": 19, "dependency_action": "satisfy"}],
        "pre_processing_error": {"job_action": "terminate"},   # the task could not start
        "file_upload_error": {"dependency_action": "satisfy"},  # its outputs could not be uploaded
        "default": {"job_action": "terminate"},                # any other failure
    }

``job_action``: ``none``, ``disable`` (the job's tasks wait until someone enables it) or ``terminate``;
``dependency_action``: ``satisfy`` (dependents run) or ``block`` (they never run). What an entry leaves out
follows the provider's rules: a failure the entry accepts (``satisfy``) never ends the job; any other failure
ends it when the operator's ``fail_fast`` is on; dependents of a failure are blocked, of a success run.

Batch lets a task's exit options act on its job only when the job's ``onTaskFailure`` is
``performexitoptionsjobaction``, and then every failure that says nothing terminates the job. So a job with
any job action (or ``fail_fast``) is sent with it, and every task with its job actions spelled out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_azbatch.specs import validation

JOB_ACTIONS = ("none", "disable", "terminate")
DEPENDENCY_ACTIONS = ("satisfy", "block")
# Exit codes are 32-bit signed integers on the service.
MIN_EXIT_CODE, MAX_EXIT_CODE = -(2**31), 2**31 - 1
CONDITION_FIELDS = ("exit_codes", "exit_code_ranges", "pre_processing_error", "file_upload_error", "default")
OPTION_FIELDS = ("job_action", "dependency_action")
RANGE_FIELDS = ("start", "end", *OPTION_FIELDS)


def exit_code(value: Any, field: str) -> int:
    return validation.integer(value, field, minimum=MIN_EXIT_CODE, maximum=MAX_EXIT_CODE, hint=" (an exit code)")


def skip_codes(value: Any, field: str) -> frozenset[int] | None:
    """Exit codes that skip the Airflow task: one exit code or a list of them (None: none)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple, set, frozenset)):
        codes = frozenset(exit_code(item, f"{field}[{index}]") for index, item in enumerate(value))
    else:
        codes = frozenset({exit_code(value, field)})
    if 0 in codes:
        raise validation.fail(field, "cannot hold 0: a task that exits with 0 succeeded")
    return codes


@dataclass(frozen=True)
class ExitOptions:
    job_action: str | None = None
    dependency_action: str | None = None

    @classmethod
    def parse(cls, value: Any, field: str, *, known: Collection[str] = OPTION_FIELDS) -> ExitOptions:
        value = validation.known_mapping(
            value, field, tuple(known), must_be="a mapping with job_action and/or dependency_action"
        )
        job = value.get("job_action")
        dependency = value.get("dependency_action")
        if job is not None and job not in JOB_ACTIONS:
            raise validation.fail(f"{field}.job_action", f"must be one of {', '.join(JOB_ACTIONS)}, got {job!r}")
        if dependency is not None and dependency not in DEPENDENCY_ACTIONS:
            raise validation.fail(
                f"{field}.dependency_action", f"must be one of {', '.join(DEPENDENCY_ACTIONS)}, got {dependency!r}"
            )
        return cls(job, dependency)

    def to_rest(self, *, failure: bool, fail_fast: bool) -> dict[str, str]:
        """With the job action spelled out (``performexitoptionsjobaction`` would terminate otherwise)."""
        job = self.job_action
        if job is None:
            job = "terminate" if failure and fail_fast and self.dependency_action != "satisfy" else "none"
        out = {"jobAction": job}
        if self.dependency_action is not None:
            out["dependencyAction"] = self.dependency_action
        return out


@dataclass(frozen=True)
class ExitConditions:
    codes: tuple[tuple[int, ExitOptions], ...] = ()
    ranges: tuple[tuple[int, int, ExitOptions], ...] = ()
    pre_processing_error: ExitOptions | None = None
    file_upload_error: ExitOptions | None = None
    default: ExitOptions | None = None

    @classmethod
    def parse(cls, value: Any, field: str) -> ExitConditions | None:
        if value is None or isinstance(value, ExitConditions):
            return value
        value = validation.known_mapping(
            value, field, CONDITION_FIELDS, must_be=f"a mapping ({', '.join(CONDITION_FIELDS)})"
        )
        codes_value = value.get("exit_codes") or {}
        if not isinstance(codes_value, Mapping):
            raise validation.fail(
                f"{field}.exit_codes",
                f'must map exit codes to options (e.g. {{3: {{"dependency_action": "satisfy"}}}}), '
                f"got {type(codes_value).__name__}",
            )
        codes = []
        for key, options in codes_value.items():
            code = exit_code(key, f"{field}.exit_codes[{key!r}]")
            codes.append((code, ExitOptions.parse(options, f"{field}.exit_codes[{code}]")))
        ranges = _ranges(value.get("exit_code_ranges"), f"{field}.exit_code_ranges")
        return cls(
            codes=tuple(sorted(codes)),
            ranges=ranges,
            **{
                name: ExitOptions.parse(value[name], f"{field}.{name}") if value.get(name) is not None else None
                for name in ("pre_processing_error", "file_upload_error", "default")
            },
        )

    def options(self) -> list[ExitOptions]:
        entries = [options for _, options in self.codes] + [options for *_, options in self.ranges]
        return entries + [o for o in (self.pre_processing_error, self.file_upload_error, self.default) if o]

    @property
    def acts_on_job(self) -> bool:
        """Some exit of the task acts on its job (disable or terminate)."""
        return any(options.job_action not in (None, "none") for options in self.options())


def _ranges(value: Any, field: str) -> tuple[tuple[int, int, ExitOptions], ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        raise validation.fail(field, f'must be a list of {{"start", "end", ...options}}, got {type(value).__name__}')
    ranges: list[tuple[int, int, ExitOptions]] = []
    for index, item in enumerate(value):
        where = f"{field}[{index}]"
        if not isinstance(item, Mapping) or "start" not in item or "end" not in item:
            raise validation.fail(where, f"must be a mapping with start and end (and options), got {item!r}")
        start, end = exit_code(item["start"], f"{where}.start"), exit_code(item["end"], f"{where}.end")
        if start > end:
            raise validation.fail(where, f"starts after it ends ({start} > {end})")
        options = ExitOptions.parse(
            {k: v for k, v in item.items() if k not in ("start", "end")}, where, known=OPTION_FIELDS
        )
        for other_index, (other_start, other_end, _) in enumerate(ranges):
            if start <= other_end and other_start <= end:
                raise validation.fail(
                    where, f"({start}..{end}) overlaps {field}[{other_index}] ({other_start}..{other_end})"
                )
        ranges.append((start, end, options))
    return tuple(ranges)


def to_rest(
    conditions: ExitConditions | None,
    *,
    fail_fast: bool,
    acts_on_job: bool,
    skip: frozenset[int] | None = None,
) -> dict[str, Any] | None:
    """A task's REST ``exitConditions``. ``acts_on_job``: the job is sent with ``performexitoptionsjobaction``,
    so every job action is spelled out. Skip codes never end the job (unless an entry says so)."""
    conditions = conditions or ExitConditions()
    if not acts_on_job:
        if conditions == ExitConditions():
            return None
        fail_fast = False  # nothing acts on the job: only the dependency actions matter
    mapped = {code for code, _ in conditions.codes}
    entries = list(conditions.codes)
    if acts_on_job:
        entries += [(code, ExitOptions(job_action="none")) for code in sorted(skip or ()) if code not in mapped]
    out: dict[str, Any] = {}
    if entries:
        out["exitCodes"] = [
            {"code": code, "exitOptions": options.to_rest(failure=code != 0, fail_fast=fail_fast)}
            for code, options in sorted(entries, key=lambda entry: entry[0])
        ]
    if conditions.ranges:
        out["exitCodeRanges"] = [
            {
                "start": start,
                "end": end,
                "exitOptions": options.to_rest(failure=not start <= 0 <= end, fail_fast=fail_fast),
            }
            for start, end, options in conditions.ranges
        ]
    for name, rest in (("pre_processing_error", "preProcessingError"), ("file_upload_error", "fileUploadError")):
        options = getattr(conditions, name)
        if options is not None:
            out[rest] = options.to_rest(failure=True, fail_fast=fail_fast)
    if conditions.default is not None or acts_on_job:
        out["default"] = (conditions.default or ExitOptions()).to_rest(failure=True, fail_fast=fail_fast)
    if not acts_on_job:
        # The job ignores job actions: send only what decides dependencies.
        for entry in [*out.get("exitCodes", ()), *out.get("exitCodeRanges", ())]:
            entry["exitOptions"].pop("jobAction", None)
        for rest in ("preProcessingError", "fileUploadError", "default"):
            if rest in out:
                out[rest].pop("jobAction", None)
    return out or None
