"""The source of a ``@task.azure_batch`` function as it travels to the node: its ``def`` and body, without the
decorator lines above it.

Airflow's own decorators drop their decorator line by its text (``@task.docker``), which misses
``@sdk_task.azure_batch`` (``task`` imported under another name), so the node would run the line and fail with
``NameError: name 'sdk_task' is not defined``. Here the source is parsed, and everything from the ``def`` line on
is kept, whatever the decorators are called. Airflow's decorators (the task decorator itself, ``run_if``,
``skip_if``, ``setup``, ``teardown``) act where the DAG is defined; any other decorator would change what the
function does, and it cannot travel (only the function's source does), so it is refused when the DAG is defined.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

from airflow_provider_azbatch.specs import validation

# Airflow decorators found by name when their object cannot be looked up (a name imported inside a function).
_AIRFLOW_DECORATOR_NAMES = ("azure_batch", "run_if", "skip_if", "setup", "teardown")


def _parsed(function: Callable[..., Any]) -> tuple[str, ast.FunctionDef]:
    source = textwrap.dedent(inspect.getsource(function))
    tree = ast.parse(source)
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef):
        raise validation.fail("@task.azure_batch", f"needs a function defined with def, got {type(node).__name__}")
    return source, node


def function_source(function: Callable[..., Any]) -> str:
    """The function's ``def`` and body (dedented), without its decorators."""
    source, node = _parsed(function)
    return "".join(source.splitlines(keepends=True)[node.lineno - 1 :])


def _root_name(expression: ast.expr) -> tuple[str | None, list[str]]:
    """``sdk_task.azure_batch(...)`` -> (``sdk_task``, [``sdk_task``, ``azure_batch``])."""
    if isinstance(expression, ast.Call):
        return _root_name(expression.func)
    if isinstance(expression, ast.Attribute):
        root, chain = _root_name(expression.value)
        return root, [*chain, expression.attr]
    if isinstance(expression, ast.Name):
        return expression.id, [expression.id]
    return None, []


def _is_airflows(decorator: ast.expr, function: Callable[..., Any]) -> bool:
    root, chain = _root_name(decorator)
    if root is None:
        return False
    namespace = function.__globals__
    if root in namespace or hasattr(builtins, root):
        found = namespace.get(root, getattr(builtins, root, None))
        module = getattr(found, "__module__", None) or type(found).__module__
        return module.split(".")[0] in ("airflow", "airflow_provider_azbatch")
    return any(name in _AIRFLOW_DECORATOR_NAMES for name in chain)


def refuse_foreign_decorators(function: Callable[..., Any]) -> None:
    """Refuse, when the DAG is defined, a decorator of the function that is not Airflow's (see the module)."""
    inner = inspect.unwrap(function)
    try:
        source, node = _parsed(inner)
    except (OSError, TypeError, SyntaxError):
        return  # no source to read here (the run says so when it takes the source)
    name = getattr(function, "__name__", "the function")
    for decorator in node.decorator_list:
        if not _is_airflows(decorator, inner):
            text = ast.get_source_segment(source, decorator) or ast.unparse(decorator)
            raise validation.fail(
                "@task.azure_batch",
                f"cannot run {name}() decorated with @{text}: only the function's own source travels to the node, "
                "without its decorators; call what the decorator does inside the function instead",
            )
