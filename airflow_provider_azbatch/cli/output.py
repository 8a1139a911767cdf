"""``--output table|json|yaml|plain``: the same records as Airflow's own commands print them.

Tables go through Airflow's ``AirflowConsole`` (``table``: a rich table; ``plain``: tab-free columns for
``awk``). JSON and YAML keep the values' types: numbers stay numbers, times are ISO 8601 in UTC, durations
are seconds, unknown values are null.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from airflow_provider_azbatch.cli.times import format_duration, format_time, iso_time

OUTPUTS = ("table", "json", "yaml", "plain")


def cell(value: Any) -> str:
    """A value as a table shows it: empty when unknown, times in UTC."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, Enum):
        return str(value.value)
    return str(value)


def duration_cell(value: Any) -> str:
    return format_duration(value)


@dataclass(frozen=True)
class Column:
    """One column of a table: the record's ``key``, its ``header``, and how a value is shown."""

    key: str
    header: str
    text: Callable[[Any], str] = cell


def jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso_time(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def _console() -> Any:
    from airflow.cli.simple_table import AirflowConsole
    from airflow.utils.platform import is_tty

    console = AirflowConsole()
    if not is_tty():
        # Piped or redirected: one row per line, however wide (Airflow's default of 200 columns would
        # wrap long node ids and failure messages inside their cells).
        console.width = 100_000
    return console


def print_structured(data: Any, output: str) -> None:
    """The whole of ``data`` as JSON or YAML."""
    console = _console()
    if output == "json":
        console.print_as_json(jsonable(data))
    else:
        console.print_as_yaml(jsonable(data))


# A rich table ends with a blank line (its caption): the next heading needs no other.
_state = {"blank_line_printed": False}


def print_rows(rows: Sequence[Mapping[str, str]], output: str) -> None:
    """Rows of text as a table (``table`` or ``plain``); "No data found" when there are none, like Airflow's."""
    from rich.markup import escape

    console = _console()
    if output == "plain":
        console.print_as_plain_table(list(rows))
    else:
        # Cells are text, not rich markup: "[Errno 2]" in a message stays as it is.
        console.print_as_table([{escape(k): escape(v) for k, v in row.items()} for row in rows])
    _state["blank_line_printed"] = output != "plain" and bool(rows)


def print_records(records: Sequence[Mapping[str, Any]], columns: Sequence[Column], output: str) -> None:
    """A list of records: every field as JSON/YAML, or the ``columns`` as a table."""
    if output in ("json", "yaml"):
        print_structured(list(records), output)
        return
    rows = [{column.header: column.text(record.get(column.key)) for column in columns} for record in records]
    print_rows(rows, output)


def print_fields(fields: Sequence[tuple[str, str]]) -> None:
    """``Label:  value`` lines, aligned; fields without a value are left out; a multi-line value is indented."""
    _state["blank_line_printed"] = False
    shown = [(label, value) for label, value in fields if value]
    width = max((len(label) for label, _ in shown), default=0) + 2
    for label, value in shown:
        first, *rest = value.split("\n")
        print(f"{label + ':':<{width}}{first}".rstrip())
        for line in rest:
            print(f"{'':<{width}}{line}".rstrip())
    sys.stdout.flush()


def print_heading(text: str) -> None:
    """A section's title, after a blank line."""
    if not _state["blank_line_printed"]:
        print()
    print(text)
    _state["blank_line_printed"] = False
    sys.stdout.flush()
