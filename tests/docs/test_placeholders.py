"""``make docs`` fails on a placeholder word in a page (docs/_ext/placeholders.py): one where a figure or a
sentence belongs (MEASURED, TBD, TODO, FIXME, XXX)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

import placeholders  # noqa: E402

WITH = "# Kill\n\nThe job is terminated within seconds (measured: MEASURED).\n\nThe rest TBD.\n"
WITHOUT = "# Kill\n\nThe job is terminated within 2.0 s (measured on 3.0.6), a todo list aside.\n"


def test_a_page_with_a_placeholder_is_refused_at_its_lines_and_one_without_passes():
    assert placeholders.placeholders(WITH) == [
        (3, "The job is terminated within seconds (measured: MEASURED)."),
        (5, "The rest TBD."),
    ]
    assert placeholders.placeholders(WITHOUT) == []
    # Whole words only: a size or an identifier holding the letters is not one.
    assert placeholders.placeholders("standard_XXX_v2, TODOS, MEASUREDLY") == []


@pytest.mark.parametrize("word", placeholders.WORDS)
def test_each_placeholder_word_is_refused(word):
    assert placeholders.placeholders(f"a figure: {word}.") == [(1, f"a figure: {word}.")]


def test_the_docs_build_runs_the_check_and_no_page_holds_a_placeholder():
    assert '"placeholders",' in (DOCS / "conf.py").read_text(encoding="utf-8")
    pages = [path for path in DOCS.rglob("*.md") if "_build" not in path.parts]
    found = [
        f"{page.relative_to(ROOT)}:{number}: {line}"
        for page in pages
        for number, line in placeholders.placeholders(page.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_sphinx_fails_a_build_on_a_page_with_a_placeholder(tmp_path):
    pytest.importorskip("sphinx", reason="Sphinx is in the docs extra (make docs-venv), not in this venv")
    pytest.importorskip("myst_parser", reason="MyST is in the docs extra (make docs-venv), not in this venv")
    (tmp_path / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\nextensions = ['myst_parser', 'placeholders']\n",
        encoding="utf-8",
    )

    def build(page: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / "index.md").write_text(page, encoding="utf-8")
        command = [sys.executable, "-m", "sphinx", "-W", "-q", "-E", "-b", "html", str(tmp_path), str(tmp_path / "out")]
        return subprocess.run(command, capture_output=True, text=True, timeout=300)

    refused = build(WITH)
    assert refused.returncode != 0
    assert "index.md:3: WARNING: placeholder 'MEASURED'" in refused.stderr
    assert build(WITHOUT).returncode == 0
