"""Regenerate the committed dependency sets in constraints/: one per Airflow 3 line, the floors, and other Pythons.

Each Airflow line's set is what a resolver picked the week its latest patch release came out:
``uv pip compile --exclude-newer <cut-off>`` with the cut-off a week after that release's upload to
PyPI, for Python 3.11, resolving the provider with its ``[test]`` extra (what the tests need on every
line), ``local-azure-batch[test]`` (with the Azure SDK the tests drive) and ``apache-airflow==<patch>``.
Airflow publishes constraint files per release for the same reason (installed today without them, old
Airflow lines break on newer fastapi, pydantic or svcs); those files cannot be downloaded here, a cut-off
date reproduces them.

The provider needs azure-batch 15.1, released 2026-05-01, after Airflow 3.0.6 and 3.1.8: on those lines
azure-batch and the azure-core it requires are taken as of a week after azure-batch 15.1.0 (a user of
those lines installing this provider gets exactly that), everything else as of the line's week.

``lowest-direct`` is the newest line with every direct dependency of the provider and of
local-azure-batch at the floor pyproject.toml declares (``--resolution lowest-direct``), the rest as of
that line's week: the floors are versions the tests passed on, not guesses.

Other Pythons: the newest line's set resolved the same way for each other supported Python
(``--python-version``), named ``3.3-py3.10`` (file ``airflow-3.3-py3.10.txt``). Such a file is written only
where its pins differ from the Python 3.11 set's (a package that dropped a Python, a backport, a package
only that Python needs); where they are the same, none is written (an old one is removed) and the Makefile
uses ``airflow-3.3.txt`` for that Python.

The ``[torchx]`` and ``[docs]`` extras are added to every set in a second pass: resolved with the first
pass's pins as constraints, so they change no pin a line's set has and only add what they bring, as of
``EXTRAS_CUTOFF`` (the week they were chosen; torchx-nightly 2026.10.26 and Sphinx 9.0.4 are older). They
are not part of what a line's week or the floors prove: the pass resolves the highest versions.

The provider's ``[dev]`` extra (ruff, mypy, and the official Azure provider, which needs azure-batch 15 and
so exists only from August 2026) is left out: lint and type checks do not depend on the Airflow line and
run in ``make test``, on constraints.txt, which this script does not write (it is the newest line's
working set, edited by hand one pin at a time).

Usage: ``python scripts/constraints.py [NAME ...]`` (names: 3.0 3.1 3.2 3.3 lowest-direct 3.3-py3.10
3.3-py3.12 3.3-py3.13; default all). Needs uv on PATH, or installs the pinned uv into .venv-uv. Needs the
package registry. The same command, run again, writes the same files.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "constraints"
UV_VERSION = "0.13.9"
# The Python of `make test` and of every Airflow line's set.
PYTHON = "3.11"
# The other Pythons CI runs (the unit tests and an example DAG on the newest line): keep in step with
# .ci/run and the classifiers in both pyproject.toml files (tests/test_pythons.py checks).
OTHER_PYTHONS = ("3.10", "3.12", "3.13")

# azure-batch 15.1.0 was uploaded 2026-05-01; it requires azure-core>=1.37.
AZURE_SDK_CUTOFF = "2026-05-08"
AZURE_SDK_PACKAGES = ("azure-batch", "azure-core")

# Extras resolved over each set's pins (see the docstring), as of this date.
EXTRAS = ("torchx", "docs")
EXTRAS_CUTOFF = "2026-12-01"


@dataclass(frozen=True)
class DependencySet:
    name: str
    airflow: str
    # A week after the release's upload (PyPI upload time of the apache-airflow wheel).
    cutoff: str
    released: str
    resolution: str = "highest"
    newer: dict[str, str] = field(default_factory=dict)
    python: str = PYTHON

    @property
    def path(self) -> Path:
        stem = self.name if self.resolution != "highest" else f"airflow-{self.name}"
        return OUT / f"{stem}.txt"

    @property
    def same_as(self) -> DependencySet | None:
        """The Python 3.11 set this one is written only where it differs from."""
        if self.python == PYTHON:
            return None
        return next(s for s in SETS if s.python == PYTHON and s.airflow == self.airflow and s.resolution == "highest")


AZURE_SDK_NEWER = dict.fromkeys(AZURE_SDK_PACKAGES, AZURE_SDK_CUTOFF)

NEWEST = DependencySet("3.3", "3.3.2", "2026-09-24", "2026-09-17")
SETS = [
    DependencySet("3.0", "3.0.6", "2025-09-05", "2025-08-29", newer=AZURE_SDK_NEWER),
    DependencySet("3.1", "3.1.8", "2026-03-18", "2026-03-11", newer=AZURE_SDK_NEWER),
    DependencySet("3.2", "3.2.2", "2026-06-05", "2026-05-29"),
    NEWEST,
    DependencySet("lowest-direct", "3.3.2", "2026-09-24", "2026-09-17", resolution="lowest-direct"),
    *(
        DependencySet(f"{NEWEST.name}-py{python}", NEWEST.airflow, NEWEST.cutoff, NEWEST.released, python=python)
        for python in OTHER_PYTHONS
    ),
]
assert all(spec.cutoff <= EXTRAS_CUTOFF for spec in SETS), "the extras' pass would exclude pins of a set"


def find_uv() -> str:
    found = shutil.which("uv")
    if found:
        return found
    venv = ROOT / ".venv-uv"
    uv = venv / "bin" / "uv"
    if not uv.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", f"uv=={UV_VERSION}"], check=True)
    return str(uv)


def command(uv: str, spec: DependencySet, requirements: Path, output: Path) -> list[str]:
    args = [uv, "pip", "compile", str(requirements), "--python-version", spec.python]
    args += ["--exclude-newer", f"{spec.cutoff}T00:00:00Z", "--resolution", spec.resolution]
    for package, cutoff in spec.newer.items():
        args += ["--exclude-newer-package", f"{package}={cutoff}T00:00:00Z"]
    return [*args, "--no-header", "--no-annotate", "--quiet", "-o", str(output)]


def extras_command(uv: str, spec: DependencySet, requirements: Path, pinned: Path, output: Path) -> list[str]:
    args = [uv, "pip", "compile", str(requirements), "--constraint", str(pinned), "--python-version", spec.python]
    args += ["--exclude-newer", f"{EXTRAS_CUTOFF}T00:00:00Z"]
    return [*args, "--no-header", "--no-annotate", "--quiet", "-o", str(output)]


def described(spec: DependencySet, differing: list[str]) -> str:
    """The header: how this file was made, in words a reader can repeat."""
    lines = [
        f"# Airflow {spec.airflow} (uploaded {spec.released}), airflow-provider-azbatch[test] and",
        "# local-azure-batch[test],"
        f" Python {spec.python}, as resolved with packages uploaded before {spec.cutoff}"
        + (" (resolution: lowest-direct, the floors in pyproject.toml)" if spec.resolution != "highest" else "")
        + ".",
    ]
    if spec.newer:
        lines.append(
            f"# {', '.join(spec.newer)}: uploaded before {AZURE_SDK_CUTOFF} (the provider needs azure-batch 15.1)."
        )
    lines.append(
        f"# Then the [{'] and ['.join(EXTRAS)}] extras over those pins (none changed), uploaded before {EXTRAS_CUTOFF}."
    )
    if spec.same_as is not None:
        what = f"Differs from {spec.same_as.path.name} (Python {PYTHON}) in: {'; '.join(differing)}."
        lines += textwrap.wrap(what, 110, initial_indent="# ", subsequent_indent="#   ", break_on_hyphens=False)
    lines.append(f"# Generated by scripts/constraints.py {spec.name} (uv {UV_VERSION}); do not edit by hand.")
    return "\n".join(lines) + "\n"


def pins_of(text: str) -> list[str]:
    # pip refuses editable requirements in a constraints file: keep the pins only.
    return sorted((line for line in text.splitlines() if re.match(r"^[A-Za-z0-9]", line)), key=str.lower)


def resolve(uv: str, spec: DependencySet) -> list[str]:
    env = {**os.environ, "UV_NO_CONFIG": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        requirements = Path(tmp) / "requirements.in"
        service = "-e ./local-azure-batch[test]"
        requirements.write_text(f"-e .[test]\n{service}\napache-airflow=={spec.airflow}\n")
        # uv prefers the versions of an existing output file: each pass writes a new one.
        first = Path(tmp) / "first.txt"
        subprocess.run(command(uv, spec, requirements, first), cwd=ROOT, env=env, check=True)
        pinned = Path(tmp) / "pinned.txt"
        pinned.write_text("\n".join(pins_of(first.read_text())) + "\n")
        requirements.write_text(f"-e .[test,{','.join(EXTRAS)}]\n{service}\napache-airflow=={spec.airflow}\n")
        output = Path(tmp) / "out.txt"
        subprocess.run(extras_command(uv, spec, requirements, pinned, output), cwd=ROOT, env=env, check=True)
        return pins_of(output.read_text())


def differences(pins: list[str], reference: list[str]) -> list[str]:
    """What differs from the reference set, in words: other versions, packages only here, packages not here."""
    ours, theirs = (dict(pin.split("==", 1) for pin in each) for each in (pins, reference))
    groups = {
        "other versions": [f"{name} {ours[name]}" for name in ours if name in theirs and ours[name] != theirs[name]],
        "only here": [name for name in ours if name not in theirs],
        "not here": [name for name in theirs if name not in ours],
    }
    return [f"{label} {', '.join(names)}" for label, names in groups.items() if names]


def generate(uv: str, spec: DependencySet) -> None:
    pins = resolve(uv, spec)
    OUT.mkdir(exist_ok=True)
    differing: list[str] = []
    if spec.same_as is not None:
        differing = differences(pins, pins_of(spec.same_as.path.read_text()))
        if not differing:
            spec.path.unlink(missing_ok=True)
            print(f"{spec.path.relative_to(ROOT)}: not written, the same {len(pins)} pins as {spec.same_as.path.name}")
            return
    spec.path.write_text(described(spec, differing) + "\n".join(pins) + "\n")
    print(f"{spec.path.relative_to(ROOT)}: {len(pins)} pins")


def main() -> int:
    names = [spec.name for spec in SETS]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="*", metavar="NAME", help=" ".join(names))
    chosen = parser.parse_args().sets or names
    unknown = set(chosen) - set(names)
    if unknown:
        parser.error(f"unknown set(s) {', '.join(sorted(unknown))}; choose from {' '.join(names)}")
    uv = find_uv()
    # In this order: another Python's set is compared with its line's set, written first.
    for spec in SETS:
        if spec.name in chosen:
            generate(uv, spec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
