"""The provider's rooms stay ones a person can open (docs/explanation/design.md#rooms): no module over 500 lines, no
function over 80, seams typed, and an operator option named where it is declared and where it acts."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_provider_azbatch"
# Generated from the provider's metadata, not written by hand.
GENERATED = {"get_provider_info.py"}
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
# Parameters that carry another part of the system across a seam: typed, so that an IDE and mypy follow them.
SEAM_NAMES = {
    "hook",
    "async_hook",
    "operator",
    "client",
    "conn",
    "connection",
    "context",
    "ti",
    "task_instance",
    "log",
    "logger",
    "credential",
    "storage",
    "scheduler",
    "session",
    "watcher",
}
MAX_ANY_SEAMS = 10


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name not in GENERATED:
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def _functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _where(path: Path, line: int | None = None) -> str:
    relative = path.relative_to(PACKAGE.parent)
    return f"{relative}:{line}" if line else str(relative)


def test_no_module_is_over_500_lines():
    long = {
        _where(path): count
        for path, _ in _modules()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_80_lines():
    long = {
        f"{_where(path, node.lineno)} {node.name}": node.end_lineno - node.lineno + 1
        for path, tree in _modules()
        for node in _functions(tree)
        if node.end_lineno is not None and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    }
    assert long == {}


def test_seam_parameters_are_typed():
    untyped = [
        f"{_where(path, node.lineno)} {node.name}({arg.arg})"
        for path, tree in _modules()
        for node in _functions(tree)
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        if arg.arg in SEAM_NAMES and arg.annotation is not None and ast.unparse(arg.annotation) in {"Any", "Any | None"}
    ]
    assert len(untyped) <= MAX_ANY_SEAMS, "\n".join(untyped)


def test_an_operator_option_is_named_where_it_is_declared_and_where_it_acts():
    naming = sorted(_where(path) for path, _ in _modules() if "skip_on_exit_code" in path.read_text(encoding="utf-8"))
    assert len(naming) <= 3, naming
