"""The glossary names where each word lives: every module or package it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "docs" / "explanation" / "glossary.md"
PACKAGE = ROOT / "airflow_provider_azbatch"


def test_every_module_the_glossary_names_exists():
    named = set(re.findall(r"`([a-z_/]+(?:\.py|/))`", GLOSSARY.read_text(encoding="utf-8")))
    assert len(named) > 30
    assert sorted(path for path in named if not (PACKAGE / path).exists()) == []


def test_the_glossary_is_in_the_docs_and_each_term_is_defined_once():
    text = GLOSSARY.read_text(encoding="utf-8")
    terms = [term.lower() for term in re.findall(r"^- \*\*([^*]+)\*\*", text, re.MULTILINE)]
    assert len(terms) == len(set(terms))
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert "explanation/*" in index  # the Explanation toctree's glob takes it in
