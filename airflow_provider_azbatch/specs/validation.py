"""The rules every value the provider sends to Batch must keep, checked before anything is submitted.

Each check raises :class:`~airflow_provider_azbatch.exceptions.AzureBatchValidationError` naming the
parameter as the user wrote it (``tasks[2].environment['A=B']``) and the rule it breaks. Type errors get
the same treatment as value errors. Limits are the Batch service's documented ones (REST API
2025-06-01), or the node's where the service leaves it to the node (the length of a command line).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from airflow_provider_azbatch.exceptions import AzureBatchValidationError

# Job and task ids: letters, digits, hyphens and underscores, at most 64 (case-insensitive uniqueness).
MAX_ID_LENGTH = 64
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
# displayName of jobs and tasks.
MAX_DISPLAY_NAME = 1024
# Linux nodes run a command line as one argument of `/bin/sh -c`: the kernel's MAX_ARG_STRLEN (128 KiB,
# including the terminating NUL) bounds it.
MAX_COMMAND_BYTES = 128 * 1024 - 1
# Environment variable names a POSIX shell can use.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Task dependencies: the ids of one task's dependsOn.taskIds may total at most 64,000 characters.
MAX_DEPENDENCY_CHARS = 64000
# taskSlotsPerNode (and so a task's requiredSlots) is at most 256.
MAX_SLOTS = 256
# A task lives at most 180 days from when it is added; no wall clock can usefully exceed it.
MAX_WALL_CLOCK = timedelta(days=180)
# Blob container names: 3 to 63 lowercase letters, digits and single hyphens, starting with a letter or digit.
CONTAINER_NAME = re.compile(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}")


def fail(field: str, problem: str) -> AzureBatchValidationError:
    return AzureBatchValidationError(field, problem)


def suggestion(name: Any, known: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The known name ``name`` is most likely a typo of (case-insensitive), or None."""
    if not isinstance(name, str):
        return None
    by_lower = {item.lower(): item for item in known}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    near = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=cutoff)
    return by_lower[near[0]] if near else None


def did_you_mean(name: Any, known: Iterable[str], *, cutoff: float = 0.6) -> str:
    """`` (did you mean 'command'?)`` when ``name`` is close to a known name, else ``""``."""
    near = suggestion(name, known, cutoff=cutoff)
    return f" (did you mean {near!r}?)" if near is not None and near != name else ""


def unknown_fields(field: str, given: Iterable[Any], known: Sequence[str]) -> AzureBatchValidationError | None:
    """The error for the keys of ``given`` that are not in ``known`` (each with its likely intended name)."""
    unknown = sorted(str(key) for key in given if key not in known)
    if not unknown:
        return None
    named = ", ".join(f"{name}{did_you_mean(name, known)}" for name in unknown)
    return fail(field, f"has unknown field(s) {named}; known: {', '.join(known)}")


def _type_name(value: Any) -> str:
    return type(value).__name__


def known_mapping(
    value: Any, field: str, known: Sequence[str], *, must_be: str, quote_value: bool = False
) -> Mapping[Any, Any]:
    """``value``, a mapping whose keys are all ``known`` fields; the error says what it ``must_be`` otherwise
    (with ``quote_value``, also the value given, where it is small enough to read)."""
    if not isinstance(value, Mapping):
        got = f"{_type_name(value)} {value!r}" if quote_value else _type_name(value)
        raise fail(field, f"must be {must_be}, got {got}")
    unknown = unknown_fields(field, value, known)
    if unknown is not None:
        raise unknown
    return value


def image(value: Any, field: str) -> str | None:
    """A container image reference (see :mod:`.image_references`); one holding a template waits for the run."""
    from airflow_provider_azbatch.specs.image_references import likely_tag_typo, reference_problem

    reference = text(value, field)
    if reference is None or "{{" in reference or "{%" in reference:
        return reference
    problem = reference_problem(reference)
    if problem is not None:
        raise fail(field, f"{reference!r} is not a valid image reference: it {problem}")
    typo = likely_tag_typo(reference)
    if typo is not None:
        name = reference.rsplit(":", 1)[0]
        raise fail(
            field,
            f"{reference!r} names the tag {reference.rsplit(':', 1)[1]!r}: did you mean {name}:{typo}? (a tag the "
            "registry does not hold fails the task when the node pulls the image)",
        )
    return reference


def batch_id(value: Any, field: str, what: str = "Batch id") -> str:
    if not isinstance(value, str):
        raise fail(field, f"must be a string ({what}), got {_type_name(value)} {value!r}")
    if not ID_PATTERN.fullmatch(value):
        raise fail(
            field,
            f"{value!r} is not a valid {what}: use 1 to {MAX_ID_LENGTH} letters, digits, '-' or '_'",
        )
    return value


def text(value: Any, field: str, *, required: bool = False, max_chars: int | None = None) -> str | None:
    """A non-empty string (or None when not required), without NUL characters, within ``max_chars``."""
    if value is None:
        if required:
            raise fail(field, "is missing")
        return None
    if not isinstance(value, str):
        raise fail(field, f"must be a string, got {_type_name(value)} {value!r}")
    if not value.strip():
        raise fail(field, "is empty")
    if "\x00" in value:
        raise fail(field, "contains a NUL character")
    if max_chars is not None and len(value) > max_chars:
        raise fail(field, f"is {len(value)} characters long; the Batch service allows at most {max_chars}")
    return value


def command_line(value: Any, field: str) -> str:
    command = text(value, field, required=True)
    assert command is not None
    size = len(command.encode("utf-8"))
    if size > MAX_COMMAND_BYTES:
        raise fail(
            field,
            f"is {size} bytes long; a node runs at most {MAX_COMMAND_BYTES} bytes as one command (stage long "
            "scripts as an input file, or use workspace=, and run the file)",
        )
    return command


def integer(value: Any, field: str, *, minimum: int | None = None, maximum: int | None = None, hint: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(field, f"must be a whole number{hint}, got {_type_name(value)} {value!r}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        bounds = (
            f"between {minimum} and {maximum}"
            if minimum is not None and maximum is not None
            else f">= {minimum}"
            if minimum is not None
            else f"<= {maximum}"
        )
        raise fail(field, f"must be {bounds}{hint}, got {value!r}")
    return value


def number(value: Any, field: str, *, positive: bool = True, maximum: float | None = None) -> float:
    """A finite int or float (not a string, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(field, f"must be a number, got {_type_name(value)} {value!r}")
    if not math.isfinite(value):
        raise fail(field, f"must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise fail(field, f"must be greater than 0, got {value!r}")
    if maximum is not None and value > maximum:
        raise fail(field, f"must be at most {maximum:g}, got {value!r}")
    return float(value)


def duration(value: Any, field: str) -> timedelta | None:
    """A positive timedelta or number of seconds, at most ``MAX_WALL_CLOCK``."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise fail(field, f"must be a timedelta or a number of seconds, got {_type_name(value)} {value!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise fail(field, f"must be a positive duration, got {value!r}")
    if seconds > MAX_WALL_CLOCK.total_seconds():
        raise fail(field, f"must be at most 180 days (the longest a Batch task lives), got {value!r}")
    return timedelta(seconds=seconds)


def retries(value: Any, field: str) -> int | None:
    if value is None:
        return None
    return integer(value, field, minimum=-1, hint=" (-1 retries without limit)")


def _strings_by_name(value: Any, field: str, names: str, checked: Callable[[str, Any, Any], str]) -> dict[str, str]:
    """A mapping of ``names`` to strings (None: empty), each name and value as ``checked(field, name, item)`` takes
    them, in the order given."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail(field, f"must be a mapping of {names} to strings, got {_type_name(value)} {value!r}")
    return {name: checked(field, name, item) for name, item in value.items()}


def _variable(field: str, name: Any, item: Any) -> str:
    if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
        raise fail(
            f"{field}[{name!r}]",
            "is not a valid environment variable name: use letters, digits and '_', not starting with a digit",
        )
    if isinstance(item, bool) or not isinstance(item, (str, int, float)):
        raise fail(f"{field}[{name!r}]", f"must be a string, got {_type_name(item)} {item!r}")
    if isinstance(item, float) and not math.isfinite(item):
        raise fail(f"{field}[{name!r}]", f"must be a string, got {item!r}")
    if isinstance(item, str) and "\x00" in item:
        raise fail(f"{field}[{name!r}]", "contains a NUL character")
    return str(item)


def environment(value: Any, field: str) -> dict[str, str]:
    """A mapping of shell variable names to strings (numbers are written out)."""
    return _strings_by_name(value, field, "variable names", _variable)


def _metadata_item(field: str, name: Any, item: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise fail(field, f"has an invalid name {name!r}: names are non-empty strings")
    if not isinstance(item, str):
        raise fail(f"{field}[{name!r}]", f"must be a string, got {_type_name(item)} {item!r}")
    return item


def metadata(value: Any, field: str) -> dict[str, str]:
    """Name/value pairs stored on the job: both strings."""
    return _strings_by_name(value, field, "names", _metadata_item)


def relative_path(value: Any, field: str, *, required: bool = False) -> str | None:
    """A path below a task's working directory (or a blob path): relative, without '..'."""
    path = text(value, field, required=required)
    if path is None:
        return None
    if path.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", path):
        raise fail(field, f"{path!r} is absolute; give a path relative to the task's working directory")
    if ".." in re.split(r"[/\\]", path):
        raise fail(field, f"{path!r} goes up with '..'; give a path inside the task's working directory")
    return path


def container_name(value: Any, field: str) -> str | None:
    name = text(value, field)
    if name is None:
        return None
    if name != "$root" and not CONTAINER_NAME.fullmatch(name):
        raise fail(
            field,
            f"{name!r} is not a valid Blob container name: 3 to 63 lowercase letters, digits and single hyphens, "
            "starting with a letter or digit",
        )
    return name


def string_list(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise fail(field, f"must be a list of strings, got {_type_name(value)} {value!r}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise fail(f"{field}[{index}]", f"must be a string, got {_type_name(item)} {item!r}")
    return list(value)


def dependency_graph(depends_on: Mapping[str, Sequence[str]], fields: Mapping[str, str]) -> None:
    """Every dependency names a task of the job, none its own task, and there is no cycle.

    ``depends_on``: task id -> ids it waits for; ``fields``: task id -> where it was written (``tasks[3]``).
    """
    by_key = {task.lower(): task for task in depends_on}
    for task, needs in depends_on.items():
        where = f"{fields[task]}.depends_on"
        for need in needs:
            if need.lower() == task.lower():
                raise fail(where, f"names the task itself ({task!r}): a task cannot wait for itself")
            if need.lower() not in by_key:
                hint = did_you_mean(need, [t for t in depends_on if t.lower() != task.lower()], cutoff=0.5)
                raise fail(where, f"names {need!r}, which is not a task of this job{hint}")
        if sum(len(need) for need in needs) > MAX_DEPENDENCY_CHARS:
            raise fail(where, f"names tasks whose ids total more than {MAX_DEPENDENCY_CHARS} characters")
    # Depth-first search for a cycle; reported as the path around it.
    state: dict[str, int] = {}
    for start in depends_on:
        if state.get(start):
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[str] = []
        while stack:
            task, index = stack.pop()
            if index == 0:
                state[task] = 1
                path.append(task)
            needs = [by_key[n.lower()] for n in depends_on[task]]
            if index < len(needs):
                stack.append((task, index + 1))
                nxt = needs[index]
                if state.get(nxt) == 1:
                    cycle = [*path[path.index(nxt) :], nxt]
                    raise fail(
                        f"{fields[task]}.depends_on",
                        f"makes a cycle ({' -> '.join(cycle)}): these tasks would wait for each other forever",
                    )
                if not state.get(nxt):
                    stack.append((nxt, 0))
            else:
                state[task] = 2
                path.pop()
