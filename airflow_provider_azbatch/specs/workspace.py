"""How a DAG author asks for a workspace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_provider_azbatch.specs import validation

# The fixed place, under a task's working directory, where its command finds the workspace.
MOUNT = "workspace"
# Job metadata listing the content hashes of the workspaces the job's tasks got.
METADATA_KEY = "azbatch-workspaces"
# Job metadata listing the blobs staged for the job's tasks (``<container>/<blob>``, comma-separated): workspace
# archives and a TaskFlow function's call (what lineage reports the job read).
STAGED_METADATA_KEY = "azbatch-staged"
# Left out of every workspace (on top of its own .gitignore and .azbatchignore).
DEFAULT_IGNORE = (
    ".git/",
    "__pycache__/",
    "*.pyc",
    "*.pyo",
    ".DS_Store",
    ".venv/",
    "venv/",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
    "node_modules/",
    "*.egg-info/",
)


@dataclass
class Workspace:
    """A local directory (absolute, or relative to the DAG file) every task gets as ``workspace/``.

    :param path: the directory.
    :param ignore: more ``.gitignore``-style patterns to leave out (the directory's own ``.gitignore`` and
        ``.azbatchignore`` and a default list apply too).
    :param max_mb: refuse a workspace larger than this (uncompressed); default ``[azbatch] workspace_max_mb``.
    :param container: Blob container the archive is staged in; default ``[azbatch] workspace_container``.
    :param prefix: blob path prefix of staged archives; default ``[azbatch] workspace_prefix``.
    """

    path: str
    ignore: Sequence[str] = field(default_factory=tuple)
    max_mb: float | None = None
    container: str | None = None
    prefix: str | None = None

    template_fields: ClassVar[Sequence[str]] = ("path",)

    @classmethod
    def parse(cls, value: Any, where: str) -> Workspace | None:
        if value is None:
            return None
        path_field = where if isinstance(value, str) else f"{where}.path"
        if isinstance(value, str):
            value = cls(value)
        if not isinstance(value, Workspace):
            raise validation.fail(
                where, f"must be a directory path or a Workspace, got {type(value).__name__} {value!r}"
            )
        validation.text(value.path, path_field, required=True)
        for index, pattern in enumerate(validation.string_list(list(value.ignore), f"{where}.ignore")):
            validation.text(pattern, f"{where}.ignore[{index}]", required=True)
        if value.max_mb is not None:
            validation.number(value.max_mb, f"{where}.max_mb")
        validation.container_name(value.container, f"{where}.container")
        if value.prefix is not None:
            validation.relative_path(value.prefix, f"{where}.prefix")
        return value
