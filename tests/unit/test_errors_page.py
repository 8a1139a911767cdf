"""docs/troubleshooting/errors.md is what the code raises: regenerated and compared, so it cannot go stale."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("errors_page", ROOT / "scripts" / "errors_page.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_errors_page_is_what_the_code_raises():
    generator = _generator()
    assert generator.PAGE.read_text(encoding="utf-8") == generator.page(), (
        "docs/troubleshooting/errors.md differs from the code's messages: run python scripts/errors_page.py"
    )


def test_each_first_hour_symptom_is_a_message_of_the_code():
    generator = _generator()
    source = "\n".join(path.read_text(encoding="utf-8") for path in generator.PACKAGE.rglob("*.py"))
    messages = "\n".join(message.text for message in generator.messages())
    missing = []
    for symptom, _, _ in generator.FIRST_HOUR:
        for piece in symptom.split(generator.HOLE):
            # The parts the code writes literally (examples of the user's values aside).
            words = [word for word in piece.replace("'", " ").split() if len(word) > 3]
            absent = [word for word in words if word not in source and word not in messages]
            if len(absent) > len(words) // 2:
                missing.append(f"{symptom!r}: {absent}")
    assert missing == []


def test_the_typos_of_a_first_hour_are_among_the_generated_messages():
    symptoms = [message.text for message in _generator().messages()]
    for words in (
        "is not a valid image reference: it",
        "cannot run …() decorated with @…",
        "Not deleted: confirm with --yes",
    ):
        assert any(words in text for text in symptoms), words
