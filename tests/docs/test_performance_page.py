"""The performance page cannot drift from the benchmarks: its figures are the files they write, included when the
docs are built, and its own words hold no number those files do not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "explanation" / "performance.md"
INCLUDE = re.compile(r"^```\{include\} (\S+)\n```", re.MULTILINE)
# A number as prose writes one (1,000; 0.5; 10), not inside a word, a link target or inline code.
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])")
STAMP = re.compile(r"^Measured \d{4}-\d\d-\d\d \d\d:\d\d UTC at commit `[0-9a-f]{10}` on .+, (\d+) cores, ")


def _included() -> list[Path]:
    return [(PAGE.parent / target).resolve() for target in INCLUDE.findall(PAGE.read_text(encoding="utf-8"))]


def _prose(text: str) -> str:
    text = INCLUDE.sub("", text)
    text = re.sub(r"`[^`]*`", "", text)  # inline code: names of settings, commands, files
    return re.sub(r"\]\([^)]*\)", "]", text)  # link targets


def test_the_page_includes_every_results_file_the_benchmarks_write():
    written = sorted((ROOT / "bench").glob("*results.md"))
    assert sorted(_included()) == written


# What the page says, in a note just before a file's table, of a file measured before the stamps named the commit.
UNSTAMPED_NOTE = re.compile(
    r":::\{note\}\n(?:(?!:::).)*before the stamp named the commit(?:(?!:::).)*:::\n\n"
    r"```\{include\} \.\./\.\./bench/(\S+)\n",
    re.DOTALL,
)


@pytest.mark.parametrize("results", sorted((ROOT / "bench").glob("*results.md")), ids=lambda path: path.name)
def test_each_results_file_is_stamped_with_commit_date_cores_and_command_or_the_page_says_it_is_not(results):
    # (A run with uncommitted changes to the provider or the benchmarks is stamped "+changes": not a committed one.)
    first = results.read_text(encoding="utf-8").splitlines()[0]
    said_unstamped = results.name in UNSTAMPED_NOTE.findall(PAGE.read_text(encoding="utf-8"))
    if STAMP.match(first):
        assert "Command: `" in first
        assert not said_unstamped, f"the page still says {results.name} predates the stamps: remove its note"
    else:
        assert first.startswith("Measured "), f"{results.name} says nothing of when: {first!r}"
        assert " cores" in first, f"{results.name} says nothing of where: {first!r}"
        assert said_unstamped, f"{results.name} is not stamped with its commit, and the page does not say so"


def test_every_number_the_page_says_is_in_the_files_it_includes():
    measured = "\n".join(path.read_text(encoding="utf-8") for path in _included())
    said = set(NUMBER.findall(_prose(PAGE.read_text(encoding="utf-8"))))
    assert {number for number in said if number not in measured} == set()


def test_a_number_of_its_own_in_the_prose_is_found():
    assert NUMBER.findall(_prose("It made 186 polls/s (`make bench`, [x](y.md#a-1))")) == ["186"]
