"""The provider's wheel holds the provider only: no local Batch service, no pytest plugin, and it declares
exactly the distributions its code imports."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The distribution behind each top-level import of the provider (aiohttp: azure-core's async transport).
DISTRIBUTIONS = {
    "airflow": "apache-airflow",
    "azure.batch": "azure-batch",
    "azure.core": "azure-core",
    "azure.identity": "azure-identity",
    "azure.storage.blob": "azure-storage-blob",
    "structlog": "structlog",
    "pathspec": "pathspec",
    "rich": "rich",
    "asgiref": "asgiref",
    "async_timeout": "async-timeout",  # before Python 3.11 only
}
# Imported only by what an extra installs: the distribution and the extra that brings it.
OPTIONAL = {
    "local_azure_batch": ("local-azure-batch", "local"),  # azbatch-dev (devenv/)
    "torchx": ("torchx-nightly", "torchx"),  # airflow_provider_azbatch/torchx, operators/torchx.py
    # lineage/openlineage.py and parent.py, imported only when the OpenLineage provider is (it brings its client,
    # whose facets are attrs classes, as the provider's run facet is).
    "airflow.providers.openlineage": ("apache-airflow-providers-openlineage", "openlineage"),
    "openlineage": ("apache-airflow-providers-openlineage", "openlineage"),
    "attr": ("apache-airflow-providers-openlineage", "openlineage"),
}


def _third_party_imports() -> set[str]:
    stdlib = set(sys.stdlib_module_names)
    found: set[str] = set()
    for path in (ROOT / "airflow_provider_azbatch").rglob("*.py"):
        tree = ast.parse(path.read_text())
        # What `if TYPE_CHECKING:` imports is the type checker's (the dev environment's), not a running provider's.
        type_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and ast.unparse(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}
            for statement in node.body
            for inner in ast.walk(statement)
        }
        for node in ast.walk(tree):
            if id(node) in type_only:
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in stdlib or top == "airflow_provider_azbatch":
                    continue
                if name.startswith("airflow.providers.openlineage"):
                    found.add("airflow.providers.openlineage")
                    continue
                found.add(
                    next(key for key in DISTRIBUTIONS if name == key or name.startswith(f"{key}."))
                    if top == "azure"
                    else top
                )
    return found


@pytest.mark.packaging
def test_the_wheel_is_the_provider_alone(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", "node_modules", ".git", ".test-home", "build", "*.egg-info", "__pycache__"
        ),
    )
    wheels = tmp_path / "wheels"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = wheels.glob("airflow_provider_azbatch-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = archive.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    modules = {name.split("/")[0] for name in names if not name.startswith("airflow_provider_azbatch-")}
    # The TorchX scheduler's and named resources' registration: portions of the torchx_plugins namespace package
    # (no __init__.py).
    assert modules == {"airflow_provider_azbatch", "torchx_plugins"}
    assert sorted(name for name in names if name.startswith("torchx_plugins/")) == [
        "torchx_plugins/named_resources/azure.py",
        "torchx_plugins/schedulers/azure_batch.py",
    ]
    assert not any("emulator" in name or "local_azure_batch" in name for name in names)
    assert "airflow_provider_azbatch/py.typed" in names
    assert "airflow_provider_azbatch/compute/data/vm_sizes.json" in names
    assert entry_points.split() == [
        "[apache_airflow_provider]",
        "provider_info",
        "=",
        "airflow_provider_azbatch.get_provider_info:get_provider_info",
        "[console_scripts]",
        "azbatch-dev",
        "=",
        "airflow_provider_azbatch.devenv.cli:main",
    ]
    required = {
        line.split(":", 1)[1].strip().split(">")[0].split("<")[0].split("=")[0].split(";")[0].strip().lower()
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    }
    imports = _third_party_imports()
    imported = {DISTRIBUTIONS[name] for name in imports - OPTIONAL.keys()}
    assert required == imported | {"aiohttp"}
    for name in imports & OPTIONAL.keys():
        distribution, extra = OPTIONAL[name]
        assert f"Provides-Extra: {extra}" in metadata
        assert any(
            line.startswith(f"Requires-Dist: {distribution}") and f'extra == "{extra}"' in line
            for line in metadata.splitlines()
        )
