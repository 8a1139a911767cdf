"""A workspace directory as one deterministic archive, named by its content.

The archive is the same bytes for the same files whatever the machine, clock or file order (sorted
entries, no timestamps or owners, executable bits kept), so its SHA-256 names it: an unchanged workspace
has the same name, and is not uploaded again.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pathspec

from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.specs.workspace import DEFAULT_IGNORE

IGNORE_FILES = (".gitignore", ".azbatchignore")


@dataclass(frozen=True)
class PackedWorkspace:
    directory: str
    data: bytes
    sha256: str
    files: int
    size: int  # bytes of the files, uncompressed

    @property
    def name(self) -> str:
        """The archive's file name: ``workspace-<first 16 hex digits of the hash>.tar.gz``."""
        return f"workspace-{self.sha256[:16]}.tar.gz"

    def summary(self) -> dict[str, object]:
        return {"sha256": self.sha256, "files": self.files, "bytes": self.size, "directory": self.directory}


def ignore_spec(root: Path, extra: Iterable[str]) -> pathspec.GitIgnoreSpec:
    lines = list(DEFAULT_IGNORE)
    for name in IGNORE_FILES:
        file = root / name
        if file.is_file():
            lines += file.read_text(errors="replace").splitlines()
    lines += list(extra)
    return pathspec.GitIgnoreSpec.from_lines(lines)


def included_files(root: Path, spec: pathspec.GitIgnoreSpec) -> list[tuple[str, Path]]:
    """(archive path, file) of every file kept, sorted; ignored directories are not walked into."""
    kept: list[tuple[str, Path]] = []
    for current, dirs, files in os.walk(root, followlinks=False):
        relative = Path(current).relative_to(root)
        dirs[:] = sorted(d for d in dirs if not spec.match_file(f"{(relative / d).as_posix()}/"))
        for name in files:
            path = (relative / name).as_posix()
            if not spec.match_file(path) and (Path(current) / name).is_file():
                kept.append((path, Path(current) / name))
    return sorted(kept)


def pack(
    directory: str | Path, *, ignore: Sequence[str] = (), max_bytes: int, field: str = "workspace"
) -> PackedWorkspace:
    """Pack ``directory``; errors name ``field`` and say what to do (a missing directory, too large)."""
    root = Path(directory)
    if not root.is_dir():
        raise validation.fail(
            field, f"{str(directory)!r} is not a directory (a relative path is taken from the DAG file's)"
        )
    files = included_files(root, ignore_spec(root, ignore))
    sizes = [(path, file.stat().st_size) for path, file in files]
    total = sum(size for _, size in sizes)
    if total > max_bytes:
        largest = ", ".join(f"{path} ({size / 1e6:.1f} MB)" for path, size in sorted(sizes, key=lambda s: -s[1])[:3])
        raise validation.fail(
            field,
            f"{str(directory)!r} holds {total / 1e6:.1f} MB in {len(files)} files, over the limit of "
            f"{max_bytes / 1e6:.0f} MB; the largest: {largest}. Leave data out (ignore patterns, .azbatchignore) "
            "and give it to the tasks as inputs, or raise the limit ([azbatch] workspace_max_mb, Workspace(max_mb=))",
        )
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive,
    ):
        for path, file in files:
            info = tarfile.TarInfo(path)
            info.size = file.stat().st_size
            info.mode = 0o755 if os.access(file, os.X_OK) else 0o644
            info.mtime = 0
            with file.open("rb") as content:
                archive.addfile(info, content)
    data = buffer.getvalue()
    return PackedWorkspace(str(root), data, hashlib.sha256(data).hexdigest(), len(files), total)
