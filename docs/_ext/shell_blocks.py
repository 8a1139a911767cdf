"""The fenced blocks of the documentation's Markdown pages, and the shell commands their shell blocks hold.

Shared by ``tests/docs`` (every command a page shows is run or checked by a test) and
``scripts/check_az_commands.py`` (every ``az`` command is checked against the CLI's reference).
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
SHELL_INFOS = ("shell", "console", "bash", "sh")


def pages() -> list[Path]:
    return sorted(path for path in DOCS.rglob("*.md") if "_build" not in path.parts)


def blocks(page: Path) -> list[tuple[int, str, list[str]]]:
    """(line, info string, body lines) of each fenced block of a Markdown page."""
    found, lines, i = [], page.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, start, body = opening["fence"], i, []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i])
            i += 1
        found.append((start + 1, opening["info"].strip(), body))
        i += 1
    return found


def without_comment(line: str) -> str:
    """A shell line without its comment: as in sh, a ``#`` that begins a word outside quotes starts one."""
    quote, i = "", 0
    while i < len(line):
        char = line[i]
        if char == "\\" and quote != "'":
            i += 2  # an escaped character, quoted or not, is the character itself
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
        i += 1
    return line


def commands(body: list[str]) -> list[str]:
    """The commands of a shell block: comments dropped, a line ending in ``\\`` joined with the next."""
    found, pending = [], ""
    for text in body:
        line = without_comment(text)
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        command = (pending + line.strip()).strip()
        pending = ""
        if command:
            found.append(command)
    if pending.strip():
        found.append(pending.strip())
    return found


def shell_commands(documents: list[Path] | None = None, root: Path | None = None) -> list[tuple[str, str]]:
    """(``page:line``, command) of every command in the shell blocks of the pages."""
    root = root or DOCS.parent
    found = []
    for page in documents if documents is not None else pages():
        for line, info, body in blocks(page):
            if info in SHELL_INFOS:
                found += [(f"{page.relative_to(root)}:{line}", command) for command in commands(body)]
    return found
