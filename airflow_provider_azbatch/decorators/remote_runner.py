"""Runs one ``@task.azure_batch`` function on a Batch node (shipped to the node as a file; standard library only,
Python 3.8 and later).

    python3 azbatch_runner.py CALL_FILE RESULT_FILE

``CALL_FILE`` (JSON) holds the function's source, its name, its arguments and how they are serialised. The
function is defined from its source in a module of its own, then called with its arguments in the current
directory (the task's working directory; the workspace, when the task has one, is importable). Its return
value is written to ``RESULT_FILE`` as ``{"value": ...}`` (JSON) or ``{"pickle": "<base64>"}``; if it raises,
the traceback goes to stderr, ``{"error": {...}}`` (type, message, the last frame) to ``RESULT_FILE``, and
the exit code is 1. A return value that cannot be serialised, or is larger than the call's bound, is an
error of the same kind, raised here before anything is uploaded.
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any

# Exit codes: the function raised (or its value could not be returned); the call file itself is unusable.
FUNCTION_FAILED = 1
BAD_CALL = 2


class ReturnValueError(Exception):
    """The function returned, but its value cannot be handed back."""


def _serializer(name: str) -> types.ModuleType | None:
    if name == "json":
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ImportError(
            f"serializer={name!r}: the module {name!r} is not installed for {sys.executable} on this node "
            f"(Python {sys.version.split()[0]})"
        ) from None


def _arguments(call: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    module = _serializer(call["serializer"])
    if module is None:
        return call["args"], call["kwargs"]
    worker = call.get("python")
    here = "{}.{}".format(*sys.version_info[:2])
    if worker and worker != here:
        sys.stderr.write(
            f"azbatch: the arguments were serialised with {call['serializer']} by Python {worker} and are read "
            f"by Python {here} here; objects may not survive the trip between versions\n"
        )
    args, kwargs = module.loads(base64.b64decode(call["payload"]))
    return args, kwargs


def _function(call: dict[str, Any], directory: str) -> Callable[..., Any]:
    name = call["function"]
    # The source is kept in a file, so that a traceback shows its lines.
    path = os.path.join(directory, f"{name}.py")
    with open(path, "w", encoding="utf-8") as out:
        out.write(call["source"])
    module = types.ModuleType(f"azbatch_task_{name}")
    module.__file__ = path
    sys.modules[module.__name__] = module
    exec(compile(call["source"], path, "exec"), module.__dict__)
    function: Callable[..., Any] = getattr(module, name)
    return function


def _encoded(call: dict[str, Any], value: Any) -> str:
    module = _serializer(call["serializer"])
    if module is None:
        try:
            text = json.dumps({"value": value})
        except (TypeError, ValueError) as exc:
            raise ReturnValueError(
                f"the return value of {call['function']}() cannot be returned as JSON: {type(value).__name__}: "
                f"{exc} (serializer='json': return dicts, lists, strings, numbers, booleans or None)"
            ) from None
    else:
        text = json.dumps({"pickle": base64.b64encode(module.dumps(value)).decode("ascii")})
    limit = int(call["max_result_bytes"])
    size = len(text.encode("utf-8"))
    if size > limit:
        raise ReturnValueError(
            f"the return value of {call['function']}() is {size} bytes as sent back; at most {limit} bytes are "
            "read back ([azbatch] max_result_bytes): write large results to Blob (outputs=) and return where "
            "they are"
        )
    return text


def _error(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1] if frames else None
    error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    if last is not None:
        error["frame"] = {"file": last.filename, "line": last.lineno, "function": last.name, "code": last.line}
    return json.dumps({"error": error})


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write("usage: azbatch_runner.py CALL_FILE RESULT_FILE\n")
        return BAD_CALL
    call_file, result_file = argv[1], argv[2]
    with open(call_file, encoding="utf-8") as handle:
        call = json.load(handle)
    workspace = os.environ.get("AZBATCH_WORKSPACE")
    if workspace:
        sys.path.insert(0, workspace)
    sys.path.insert(0, os.getcwd())
    try:
        function = _function(call, os.path.dirname(os.path.abspath(call_file)))
        args, kwargs = _arguments(call)
        text = _encoded(call, function(*args, **kwargs))
    except SystemExit as exc:  # the function ended the process: its exit code is the task's
        code = exc.code if isinstance(exc.code, int) else FUNCTION_FAILED
        if code == 0:
            text = json.dumps({"value": None})
        else:
            with open(result_file, "w", encoding="utf-8") as out:
                out.write(_error(exc))
            return code
    except BaseException as exc:  # the function's own exceptions, whatever they are
        if isinstance(exc, ReturnValueError):
            sys.stderr.write(f"azbatch: {exc}\n")
        else:
            traceback.print_exc()
        with open(result_file, "w", encoding="utf-8") as out:
            out.write(_error(exc))
        return FUNCTION_FAILED
    with open(result_file, "w", encoding="utf-8") as out:
        out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
