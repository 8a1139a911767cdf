"""No placeholder ships: a page holding a word that stands for something not written yet (``MEASURED`` where a
figure belongs, ``TBD``, ``TODO``, ``FIXME``, ``XXX``) fails ``make docs``.

Each page is read as Sphinx reads it (``source-read``, generated API pages included); a placeholder is a warning
at its line, which ``sphinx-build -W`` turns into a failed build.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # tests/docs imports this module where Sphinx is not installed
    from sphinx.application import Sphinx

WORDS = ("MEASURED", "TBD", "TODO", "FIXME", "XXX")
PLACEHOLDER = re.compile(rf"\b(?:{'|'.join(WORDS)})\b")


def placeholders(text: str) -> list[tuple[int, str]]:
    """(line number, the line) of each line of ``text`` holding a placeholder word."""
    return [(number, line) for number, line in enumerate(text.splitlines(), 1) if PLACEHOLDER.search(line)]


def _check(app: Sphinx, docname: str, source: list[str]) -> None:
    from sphinx.util import logging

    log = logging.getLogger(__name__)
    for number, line in placeholders(source[0]):
        word = PLACEHOLDER.search(line)
        assert word is not None
        log.warning(
            "placeholder %r where the page should say what it means: %s",
            word.group(0),
            line.strip(),
            location=(docname, number),
        )


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("source-read", _check)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
