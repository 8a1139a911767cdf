"""The Azure CLI commands the documentation shows, and the table of them checked against the CLI's reference.

``docs/reference/az-commands.md`` holds one row per ``az`` command the pages use: the flags they use, each checked
against that command's own ``--help`` by ``scripts/check_az_commands.py`` (which writes the table where ``az`` is
installed), and the command's page in the Azure CLI reference. ``tests/docs`` holds every ``az`` line of every page
to the table, so a command or flag that was never checked fails there.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

TABLE_PAGE = Path(__file__).resolve().parents[1] / "reference" / "az-commands.md"
REFERENCE = "https://learn.microsoft.com/cli/azure"
# Arguments every az command takes (az's "Global Arguments").
GLOBAL_FLAGS = frozenset({"--query", "--output", "-o", "--only-show-errors", "--subscription", "--debug", "--verbose"})
# `VAR=value`, `VAR="$(az ...)"`, `VAR=$(az ...)`: a shell assignment, possibly capturing an az command's output.
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=(?P<value>.*)")
CAPTURED = re.compile(r"\$\((?P<command>az [^)]*)\)")
ROW = re.compile(r"^\| `(?P<command>az [^`]+)` \| (?P<flags>[^|]*) \| \[[^\]]+\]\((?P<url>[^)]+)\) \|$", re.MULTILINE)
VERSION = re.compile(r"azure-cli (?P<version>\d+\.\d+\.\d+)")


@dataclass(frozen=True)
class AzCommand:
    """One ``az`` invocation: the command's words (``batch account create``) and the flags it passes."""

    words: tuple[str, ...]
    flags: frozenset[str]

    @property
    def name(self) -> str:
        return "az " + " ".join(self.words)


def parse(line: str) -> AzCommand:
    """``az batch account create --name "$X" -g rg`` -> (batch account create, {--name, -g})."""
    tokens = shlex.split(line)
    if not tokens or tokens[0] != "az":
        raise ValueError(f"not an az command: {line!r}")
    words: list[str] = []
    for token in tokens[1:]:
        if token.startswith("-"):
            break
        words.append(token)
    flags = {token.split("=", 1)[0] for token in tokens[1:] if token.startswith("-")}
    return AzCommand(tuple(words), frozenset(flags))


def az_invocations(shell_line: str) -> list[AzCommand]:
    """The az commands one shell line runs: itself, or those an assignment captures with ``$(...)``."""
    if shell_line.startswith("az "):
        return [parse(shell_line)]
    assignment = ASSIGNMENT.fullmatch(shell_line)
    if assignment:
        return [parse(match["command"]) for match in CAPTURED.finditer(assignment["value"])]
    return []


def reference_url(words: tuple[str, ...]) -> str:
    """The command's entry in the Azure CLI reference: its group's page, anchored at the command."""
    group = "/".join(words[:-1]) or "reference-index"
    return f"{REFERENCE}/{group}#az-{'-'.join(words)}"


@dataclass(frozen=True)
class Row:
    flags: frozenset[str]
    url: str


def read_table(page: Path = TABLE_PAGE) -> tuple[str, dict[str, Row]]:
    """(the azure-cli version the table was checked with, command -> its checked flags and reference)."""
    text = page.read_text(encoding="utf-8")
    version = VERSION.search(text)
    rows = {
        match["command"]: Row(frozenset(re.findall(r"`(-[^`]+)`", match["flags"])), match["url"])
        for match in ROW.finditer(text)
    }
    return (version["version"] if version else ""), rows


def render_table(used: dict[str, AzCommand], cli_version: str) -> str:
    """The page: a row per command the docs use, with the flags they use."""
    lines = [
        "# Azure CLI commands in these docs",
        "",
        "Every `az` command the guides show, the flags they pass it, and its page in the Azure CLI reference.",
        f"Each flag was checked against the command's own `--help` in azure-cli {cli_version} by",
        "`scripts/check_az_commands.py`, which writes this table; `tests/docs` fails on an `az` command or flag in a",
        "page that is not in it. The global arguments",
        f"({', '.join(f'`{flag}`' for flag in sorted(GLOBAL_FLAGS))}) go with every command.",
        "",
        "| Command | Flags used | Reference |",
        "| --- | --- | --- |",
    ]
    for name in sorted(used):
        command = used[name]
        flags = " ".join(f"`{flag}`" for flag in sorted(command.flags - GLOBAL_FLAGS)) or "none"
        lines.append(f"| `{name}` | {flags} | [{name}]({reference_url(command.words)}) |")
    return "\n".join(lines) + "\n"


def merge(commands: list[AzCommand]) -> dict[str, AzCommand]:
    """One entry per command, with every flag any of its uses passes."""
    merged: dict[str, AzCommand] = {}
    for command in commands:
        known = merged.get(command.name)
        flags = command.flags | (known.flags if known else frozenset())
        merged[command.name] = AzCommand(command.words, flags)
    return merged
