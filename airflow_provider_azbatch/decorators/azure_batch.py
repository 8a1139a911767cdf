"""``@task.azure_batch``: a Python function run on Azure Batch, its return value in XCom::

    from airflow.sdk import task

    @task.azure_batch(batch_pool=BatchPool.shared("gpu", requirements={"gpus": 1}), workspace="code")
    def evaluate(model_uri: str, threshold: float) -> dict:
        import metrics                      # from the workspace
        return {"auc": metrics.auc(model_uri), "promote": ...}

The decorated operator is :class:`~airflow_provider_azbatch.operators.job.AzureBatchJobOperator` with one Batch
task whose command runs the function (:mod:`~airflow_provider_azbatch.decorators.remote_runner` on the node):
every parameter of the operator applies (pool, containers, workspace, environment, inputs/outputs, retries,
deferrable, ``num_nodes``...). The function's source (its ``def`` and body, without decorators:
:mod:`~airflow_provider_azbatch.decorators.source`) and its arguments
(templated, XCom inputs resolved) travel as a call file staged in the connection's storage by content and
downloaded by Batch with a read-only SAS; the node writes the return value to a result file that is read
back like any ``result_file``. Only the function's own source travels: imports go inside it, and helpers
come from the workspace.
"""

from __future__ import annotations

import base64
import inspect
import json
import re
import shlex
import sys
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compat import AirflowException
from airflow_provider_azbatch.decorators.source import function_source, refuse_foreign_decorators
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.results.task_results import read_results
from airflow_provider_azbatch.runs import RunResult
from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.specs.operator_options import what_runs
from airflow_provider_azbatch.watching.drivers import run_sync
from airflow_provider_azbatch.workspace.staged_files import FileForTasks

if TYPE_CHECKING:
    from airflow.sdk import Context

SERIALIZERS = ("json", "pickle", "cloudpickle")
STAGING_DIR = ".azbatch"
RUNNER_FILE = f"{STAGING_DIR}/azbatch_runner.py"
CALL_FILE = f"{STAGING_DIR}/call.json"
RESULT_FILE = "azbatch-result.json"
# The one Batch task of a decorated function's job (the operator's id for a ``command``).
TASK_ID = "main"
# How the failure report introduces a task's stderr tail (results.failure_report._quoted).
_STDERR_HEADING = re.compile(r"\. Last \d+ lines of its stderr:$")
# What the decorator sets itself: giving it is an error that says why.
OWNED = (*what_runs(), "result_file")


def _runner_script() -> bytes:
    return resources.files(__package__).joinpath("remote_runner.py").read_bytes()


def _refuse_unrunnable(function: Callable[..., Any]) -> None:
    """What cannot run on a node, refused when the DAG is defined (with why)."""
    name = getattr(function, "__name__", repr(function))
    if name == "<lambda>":
        raise validation.fail(
            "@task.azure_batch", "cannot run a lambda: its source cannot be taken alone; define it with def"
        )
    if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
        raise validation.fail(
            "@task.azure_batch",
            f"cannot run {name}(): it is async; the node calls the function and writes what it returns, so "
            "define it with def (and run an event loop inside it if it needs one)",
        )
    if inspect.isgeneratorfunction(function):
        raise validation.fail(
            "@task.azure_batch",
            f"cannot run {name}(): it is a generator (it uses yield); return a list instead",
        )
    if not inspect.isfunction(function):
        raise validation.fail("@task.azure_batch", f"needs a function defined with def, got {type(function).__name__}")
    if "." in function.__qualname__.rsplit("<locals>.", 1)[-1]:
        raise validation.fail("@task.azure_batch", f"cannot run {function.__qualname__}: a method is not a function")
    refuse_foreign_decorators(function)


def _json_arguments(
    name: str, op_args: Collection[Any], op_kwargs: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments as JSON values, or an error naming the one that is not."""
    for label, value in [*((f"argument {i}", v) for i, v in enumerate(op_args)), *op_kwargs.items()]:
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            where = label if label.startswith("argument ") else f"argument {label!r}"
            raise AirflowException(
                f"{where} of {name}() cannot be sent as JSON ({type(value).__name__}: {exc}): pass JSON values "
                "(dicts, lists, strings, numbers, booleans, None), or use serializer='pickle'"
            ) from None
    return list(op_args), dict(op_kwargs)


class _AzureBatchDecoratedOperator(DecoratedOperator, AzureBatchJobOperator):
    """A function run as the one task of a Batch job (see the module docstring)."""

    custom_operator_name = "@task.azure_batch"
    template_fields: Sequence[str] = (
        *(name for name in AzureBatchJobOperator.template_fields if name not in what_runs()),
        "op_args",
        "op_kwargs",
    )
    template_fields_renderers = {**AzureBatchJobOperator.template_fields_renderers, "op_args": "py", "op_kwargs": "py"}
    shallow_copy_attrs: Sequence[str] = ("python_callable",)

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        python: str = "python3",
        serializer: str = "json",
        **kwargs: Any,
    ) -> None:
        _refuse_unrunnable(python_callable)
        for name in OWNED:
            if kwargs.get(name) is not None:
                raise validation.fail(name, "is set by @task.azure_batch itself (the function is the one task it runs)")
        if serializer not in SERIALIZERS:
            raise validation.fail("serializer", f"must be one of {', '.join(SERIALIZERS)}, got {serializer!r}")
        if serializer != "json":
            try:
                __import__(serializer)
            except ImportError:
                raise validation.fail(
                    "serializer", f"{serializer!r} needs the module {serializer!r}: install it"
                ) from None
            warnings.warn(
                f"@task.azure_batch serializer={serializer!r}: the arguments and the return value are pickled, so "
                f"the node must run the same Python ({sys.version_info[0]}.{sys.version_info[1]} here) and the same "
                "versions of every library whose objects they hold; serializer='json' has no such bond",
                UserWarning,
                stacklevel=3,
            )
        python = validation.text(python, "python", required=True) or "python3"
        self.python = python
        self.serializer = serializer
        self._files: tuple[FileForTasks, ...] = ()
        command = f"{shlex.quote(python)} {RUNNER_FILE} {CALL_FILE} {RESULT_FILE}"
        super().__init__(
            python_callable=python_callable,
            op_args=op_args,
            op_kwargs=op_kwargs,
            command=command,
            result_file=RESULT_FILE,
            **kwargs,
        )

    # -- the call ---------------------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        self._files = self._call_files()
        return super().execute(context)

    def execute_after_quota_wait(
        self, context: Context, event: dict[str, Any] | None = None, quota_since: float | None = None
    ) -> Any:
        self._files = self._call_files()
        return super().execute_after_quota_wait(context, event, quota_since)

    def files_for_tasks(self) -> Sequence[FileForTasks]:
        return self._files

    def get_python_source(self) -> str:
        """The function's ``def`` and body: its decorators stay here, whatever name they are imported under."""
        return function_source(self.python_callable)

    def _call_files(self) -> tuple[FileForTasks, ...]:
        name = self.python_callable.__name__
        call: dict[str, Any] = {
            "function": name,
            "source": self.get_python_source(),
            "serializer": self.serializer,
            "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
            "max_result_bytes": config.get_int("max_result_bytes"),
        }
        if self.serializer == "json":
            call["args"], call["kwargs"] = _json_arguments(name, self.op_args, self.op_kwargs)
        else:
            module = __import__(self.serializer)
            try:
                data = module.dumps((list(self.op_args), dict(self.op_kwargs)))
            except Exception as exc:
                raise AirflowException(
                    f"the arguments of {name}() cannot be serialised with {self.serializer}: {exc}"
                ) from None
            call["payload"] = base64.b64encode(data).decode("ascii")
        return (
            FileForTasks(RUNNER_FILE, _runner_script()),
            FileForTasks(CALL_FILE, json.dumps(call).encode("utf-8")),
        )

    # -- the return value ---------------------------------------------------------------------------------
    def outcome(self, result: RunResult) -> Any:
        if result.failure is not None:
            self.fail_with(self._with_remote_error(result, result.failure))
        if result.skipped is not None:
            return super().outcome(result)
        return self._value(result.xcom["return_value"])

    def asset_results(self, result: RunResult) -> dict[str, Any] | None:
        """The function's return value (as the node wrote it: JSON, or a pickle left out of the event)."""
        sent = result.xcom.get("return_value")
        if isinstance(sent, dict) and "value" in sent:
            return {TASK_ID: sent["value"]}
        return None

    def _value(self, sent: Any) -> Any:
        if isinstance(sent, dict) and "value" in sent:
            return sent["value"]
        if isinstance(sent, dict) and "pickle" in sent and self.serializer != "json":
            return __import__(self.serializer).loads(base64.b64decode(sent["pickle"]))
        raise AirflowException(f"The result of {self.python_callable.__name__}() is not what the node writes: {sent!r}")

    def _with_remote_error(self, result: RunResult, report: str) -> str:
        """The report headed by what the function raised, read from the node: ``ValueError: bad input (in
        fit(), fit.py line 12: raise ValueError(...))``. The last line of the stderr tail says the same (Python's
        traceback ends with it): it is dropped there, so that no line of the report repeats another."""
        step = read_results(
            result.job_id,
            {TASK_ID: RESULT_FILE},
            max_bytes=config.get_int("max_result_bytes"),
            log_location=result.log_location,
        )
        try:
            written = run_sync(step, self.hook)[TASK_ID]
        except Exception:
            return report  # it did not get to write one (the node failed it first): the report says what happened
        error = written.get("error") if isinstance(written, dict) else None
        if not isinstance(error, dict):
            return report
        raised = f"{error.get('type')}: {error.get('message')}"
        header = raised
        frame = error.get("frame")
        if isinstance(frame, dict):
            # The file's name only: its directory is the task's working directory on a node.
            where = str(frame.get("file") or "").rsplit("/", 1)[-1]
            header += f" (in {frame.get('function')}(), {where} line {frame.get('line')}"
            header += f": {frame['code']})" if frame.get("code") else ")"
        return header + "\n" + _without_last_stderr_line(report, raised)


def _without_last_stderr_line(report: str, line: str) -> str:
    """The report without ``line`` where it ends the (first quoted) stderr tail, the count of lines adjusted."""
    lines = report.split("\n")
    heading = next((i for i, text in enumerate(lines) if _STDERR_HEADING.search(text)), None)
    end = heading + 1 if heading is not None else 0
    while end < len(lines) and lines[end].startswith("    "):
        end += 1
    if heading is None or lines[end - 1] != f"    {line}":
        return report
    del lines[end - 1]
    count = end - 1 - (heading + 1)
    lines[heading] = _STDERR_HEADING.sub(f". Last {count} lines of its stderr:" if count else ".", lines[heading])
    return "\n".join(lines)


def azure_batch_task(
    python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None, **kwargs: Any
) -> TaskDecorator:
    """``@task.azure_batch``: run the function on Azure Batch (see :mod:`airflow_provider_azbatch.decorators`).

    Takes :class:`~airflow_provider_azbatch.operators.job.AzureBatchJobOperator`'s parameters (but ``command``,
    ``tasks`` and fan-out: the function is the task), plus ``python`` (the interpreter on the node or in the
    image, default ``python3``), ``serializer`` (``json``, the default, or ``pickle``/``cloudpickle``) and
    ``multiple_outputs``.
    """
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_AzureBatchDecoratedOperator,
        **kwargs,
    )
