"""No module of the provider imports a private Airflow module or name (``airflow.*._*``), on any line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_provider_azbatch"
IMPORTERS = {"import_module", "__import__", "import_string"}


def _private_name(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))  # __version__ is public


def _private(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] == "airflow" and any(_private_name(part) for part in parts[1:])


def private_airflow_imports(source: str) -> list[str]:
    """``line: what`` for every import of a private Airflow module or name, by statement or by string."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {alias.name}" for alias in node.names if _private(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _private(node.module):
                found.append(f"{node.lineno}: from {node.module} import ...")
            elif node.module.split(".")[0] == "airflow":
                found += [
                    f"{node.lineno}: from {node.module} import {alias.name}"
                    for alias in node.names
                    if _private_name(alias.name)
                ]
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in IMPORTERS and node.args and isinstance(node.args[0], ast.Constant):
                target = node.args[0].value
                if isinstance(target, str) and _private(target):
                    found.append(f"{node.lineno}: {name}({target!r})")
    return found


def test_the_provider_imports_no_private_airflow_module():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50  # the whole package, not an empty glob
    offences = {
        str(path.relative_to(PACKAGE.parent)): found
        for path in modules
        if (found := private_airflow_imports(path.read_text(encoding="utf-8")))
    }
    assert offences == {}


@pytest.mark.parametrize(
    "source",
    [
        "from airflow.sdk._shared.observability.metrics import stats",
        "import airflow._shared.module_loading",
        "def f():\n    from airflow.sdk import _internal_thing",
        "import importlib\nimportlib.import_module('airflow.sdk._shared.x')",
        "from airflow.utils.module_loading import import_string\nimport_string('airflow._shared.y.Z')",
    ],
)
def test_the_check_finds_each_form_of_private_import(source):
    assert len(private_airflow_imports(source)) == 1


@pytest.mark.parametrize(
    "source",
    [
        "from airflow.sdk import BaseOperator",
        "from airflow.sdk.observability.stats import Stats",
        "from airflow_provider_azbatch._private import x",  # our own private modules are ours to use
        "from . import _sibling",
        "import airflow",
        "from airflow import __version__",
    ],
)
def test_public_imports_pass(source):
    assert private_airflow_imports(source) == []
