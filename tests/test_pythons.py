"""The Pythons the packages declare are exactly the Pythons CI runs: `make test` on one, `make py` on the others
(.ci/run), each with a dependency set scripts/constraints.py resolves for it."""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from pathlib import Path

import pytest

# Python 3.11 on: this runs in `make test`.
tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTIONS = (ROOT / "pyproject.toml", ROOT / "local-azure-batch" / "pyproject.toml")


@functools.cache
def _constraints_script():
    spec = importlib.util.spec_from_file_location("constraints_script", ROOT / "scripts" / "constraints.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Its dataclasses look their module up while they are defined.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _ci_pythons() -> set[str]:
    """.ci/run: `make test` (on the Makefile's python3, checked below to be constraints.py's PYTHON) and one
    `make py-*` part per other Python."""
    text = (ROOT / ".ci" / "run").read_text()
    loop = re.search(r"^( *)for python in ([0-9. ]+); do\n(.*?)^\1done$", text, re.MULTILINE | re.DOTALL)
    assert loop, ".ci/run has no `for python in ...` loop"
    for target in ("py-venv", "py-unit", "py-examples"):
        assert f'make {target} PYTHON_VERSION="$python"' in loop.group(3)
    return set(loop.group(2).split())


def test_ci_runs_every_python_the_packages_declare():
    script = _constraints_script()
    others = set(script.OTHER_PYTHONS)
    assert script.PYTHON not in others
    assert _ci_pythons() == others
    pythons = sorted(others | {script.PYTHON}, key=_key)
    for path in DISTRIBUTIONS:
        project = tomllib.loads(path.read_text())["project"]
        declared = [
            c.rsplit(" :: ", 1)[1]
            for c in project["classifiers"]
            if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
        ]
        assert declared == pythons, path
        assert "Programming Language :: Python :: 3 :: Only" in project["classifiers"], path
        # A floor only: an upper bound makes resolvers pick an older release on a newer Python instead of failing.
        assert project["requires-python"] == f">={pythons[0]}", path


def test_lint_and_type_checks_hold_the_code_to_the_oldest_python():
    script = _constraints_script()
    oldest = min([*script.OTHER_PYTHONS, script.PYTHON], key=_key)
    tools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
    assert tools["ruff"]["target-version"] == "py" + oldest.replace(".", "")
    assert tools["mypy"]["python_version"] == oldest


def test_make_test_runs_on_the_python_of_the_lines_sets():
    """`make test` and the lines run on the machine's python3; the sets for them are resolved for that Python."""
    script = _constraints_script()
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^PYTHON \?= python3$", makefile, re.MULTILINE)
    assert re.search(rf"^NEWEST_LINE := {re.escape(script.NEWEST.name)}$", makefile, re.MULTILINE)
    assert re.search(rf"^UV_VERSION := {re.escape(script.UV_VERSION)}$", makefile, re.MULTILINE)
    major, minor = script.PYTHON.split(".")
    assert f"sys.version_info[:2] != ({major}, {minor})" in (ROOT / ".ci" / "run").read_text()


def test_each_other_python_has_its_set_or_the_newest_lines_pins():
    """A Python whose pins are the same as the 3.11 set's gets no file (the Makefile then uses the line's); a
    file that exists says which Python it was resolved for."""
    script = _constraints_script()
    for python in script.OTHER_PYTHONS:
        path = ROOT / "constraints" / f"airflow-{script.NEWEST.name}-py{python}.txt"
        if path.exists():
            assert f"Python {python}, as resolved" in path.read_text()
