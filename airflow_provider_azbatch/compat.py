"""What differs between the Airflow 3 lines the provider supports (3.0, 3.1, 3.2, 3.3): the one module
that knows.

Every other module imports from here the Airflow names whose home moved between lines, and asks here
whether a feature exists. Features are detected (an attribute, an import that may fail), not inferred
from version numbers; the ``AIRFLOW_V_*`` flags are for messages and tests. Only public Airflow modules
are imported (never ``airflow.*._*``). docs/reference/airflow-lines.md lists what each line lacks and what
the provider does instead; ``tests/lines`` checks each of those statements on the line it runs on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from airflow_provider_azbatch import airflowless

T = TypeVar("T")

if TYPE_CHECKING or not airflowless.active():
    from airflow import __version__ as AIRFLOW_VERSION
else:
    # A torchx command line that keeps Airflow out (airflowless.py): no line, no feature.
    AIRFLOW_VERSION = "0.0 (not imported)"

# (major, minor) of the running Airflow: "3.1.8", "3.2.0rc1" and "3.3.0.dev0" are (3, 1), (3, 2), (3, 3).
_LINE = tuple(int(part) for part in re.match(r"(\d+)\.(\d+)", AIRFLOW_VERSION).groups())  # type: ignore[union-attr]
AIRFLOW_V_3_1_PLUS = _LINE >= (3, 1)
AIRFLOW_V_3_2_PLUS = _LINE >= (3, 2)
AIRFLOW_V_3_3_PLUS = _LINE >= (3, 3)

if TYPE_CHECKING:
    from airflow.sdk import BaseHook, conf
    from airflow.sdk.exceptions import (
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSkipException,
        AirflowTaskTimeout,
        TaskDeferralError,
        TaskDeferralTimeout,
    )
    from airflow.sdk.types import TaskInstanceKey
elif airflowless.active():
    from airflow_provider_azbatch.airflowless import (
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSkipException,
        AirflowTaskTimeout,
        BaseHook,
        TaskDeferralError,
        TaskDeferralTimeout,
        conf,
    )
else:
    # airflow.sdk.exceptions holds AirflowException from 3.1 and the rest from 3.2; before that they live in
    # airflow.exceptions, and are the very classes the task runner raises (3.2+ re-exports them there).
    try:
        from airflow.sdk.exceptions import (
            AirflowException,
            AirflowFailException,
            AirflowNotFoundException,
            AirflowSkipException,
            AirflowTaskTimeout,
            TaskDeferralError,
            TaskDeferralTimeout,
        )
    except ImportError:
        from airflow.exceptions import (
            AirflowException,
            AirflowFailException,
            AirflowNotFoundException,
            AirflowSkipException,
            AirflowTaskTimeout,
            TaskDeferralError,
            TaskDeferralTimeout,
        )
    try:  # 3.1+
        from airflow.sdk import BaseHook
    except ImportError:
        from airflow.hooks.base import BaseHook
    try:  # 3.2+
        from airflow.sdk import conf
    except ImportError:
        from airflow.configuration import conf

# -- features ------------------------------------------------------------------------------------------


def _base_trigger() -> type:
    from airflow.triggers.base import BaseTrigger

    return BaseTrigger


# 3.3+: the triggerer calls ``BaseTrigger.on_kill`` when a user kills a deferred task (marks it failed or
# success, clears it). Before, the trigger is only cancelled, exactly as when a triggerer shuts down or hands
# it to another triggerer: there the trigger asks, once cancelled, what became of its task instance
# (``atask_state``, ``aget_xcom_to_reply``) and tells a kill from a restart by that.
TRIGGER_ON_KILL: bool = not airflowless.active() and callable(getattr(_base_trigger(), "on_kill", None))


def _context_keys() -> frozenset[str]:
    from airflow.sdk import Context

    return frozenset(getattr(Context, "__annotations__", {}))


# 3.3+: ``context["task_state_store"]``, where a try remembers the job it submitted (ResumableJobMixin's
# convention). Before, a retry finds the job by its deterministic id alone (a few more reads, same result).
TASK_STATE_STORE: bool = not airflowless.active() and "task_state_store" in _context_keys()


# The next two have no public marker to detect: the flag is the first line whose providers manager reads them.
# 3.2+: the connection form is built from the provider info's ``conn-fields`` and ``ui-field-behaviour``.
# Before, only from hook classmethods that need flask_appbuilder/wtforms, which Airflow 3 does not install:
# the form then shows Airflow's generic fields, and the provider's settings go in Extra (JSON).
CONNECTION_FORM_FIELDS: bool = AIRFLOW_V_3_2_PLUS

# 3.2+: ``airflow <group>`` commands from the provider info's ``cli`` entry (``airflow azbatch``).
PROVIDER_CLI: bool = AIRFLOW_V_3_2_PLUS


# -- logs ----------------------------------------------------------------------------------------------


class ConnectionFields(Protocol):
    """What the provider reads of a connection: Airflow's ``Connection``, or the one a torchx command line builds
    without Airflow (``torchx/account.py``)."""

    @property
    def conn_id(self) -> str: ...
    @property
    def host(self) -> str | None: ...
    @property
    def login(self) -> str | None: ...
    @property
    def password(self) -> str | None: ...
    @property
    def extra_dejson(self) -> dict[str, Any]: ...


class Log(Protocol):
    """Where the provider's helpers write: a task's or trigger's ``self.log`` (structlog on Airflow 3), a
    ``logging.Logger`` (the CLI, the tests). Both take a %-format message and its arguments."""

    def debug(self, msg: str, /, *args: Any) -> object: ...
    def info(self, msg: str, /, *args: Any) -> object: ...
    def warning(self, msg: str, /, *args: Any) -> object: ...
    def error(self, msg: str, /, *args: Any) -> object: ...
    def exception(self, msg: str, /, *args: Any) -> object: ...


def named_logger(name: str) -> Any:
    """A structlog logger whose lines carry ``name`` as their source (the log view's "Sources" filter).

    Airflow 3.1+ takes a line's ``logger`` from the logger's name or a bound ``logger_name``; 3.0 only from
    ``logger_name`` (without it the triggerer's lines have no source).
    """
    import structlog

    return structlog.get_logger(name, logger_name=name)


def redact(text: str) -> str:
    """``text`` with the secrets this process's masker knows replaced, as Airflow masks log lines (for text
    that leaves the log: a trigger event's output lines, stored in the metadata database)."""
    try:  # 3.1+ (the execution_time module is deprecated there)
        # Airflow re-exports it there without __all__ (mypy --strict: not exported)
        from airflow.sdk.log import redact as airflow_redact  # type: ignore[attr-defined, unused-ignore]
    except ImportError:  # 3.0
        from airflow.sdk.execution_time.secrets_masker import redact as airflow_redact  # type: ignore[no-redef]

    return str(airflow_redact(text))


def mask_secret(secret: str) -> None:
    """Register ``secret`` with Airflow's secret masker (nothing to mask without Airflow: a torchx command line
    writes no Airflow log)."""
    if airflowless.active():
        return
    from airflow.sdk.log import mask_secret as airflow_mask_secret

    airflow_mask_secret(secret)


# -- metrics -------------------------------------------------------------------------------------------


def _stats() -> Any:
    try:  # 3.2+ (the task SDK's metrics; airflow.stats is deprecated there)
        from airflow.sdk.observability.stats import Stats
    except ImportError:  # 3.0, 3.1
        from airflow.stats import Stats
    return Stats


def incr_metric(name: str, tags: dict[str, str] | None = None) -> None:
    """Count ``name`` once through Airflow's configured metrics backend (StatsD, Datadog, OpenTelemetry)."""
    if airflowless.active():
        return
    _stats().incr(name, tags=tags or {})


# -- triggers: connections and XCom from the triggerer ---------------------------------------------------

# 3.2+: a trigger may call the task SDK's synchronous API (mask_secret, Connection.extra_dejson) on the event
# loop: the triggerer bridges the call. 3.0 and 3.1 refuse it on the loop's thread ("You cannot use
# AsyncToSync in the same thread as an async event loop"), so there such calls run in a worker thread.
SYNC_SDK_CALLS_ON_TRIGGER_LOOP: bool = AIRFLOW_V_3_2_PLUS


async def off_trigger_loop(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` from a trigger, where it makes synchronous task SDK calls (masking secrets)."""
    if SYNC_SDK_CALLS_ON_TRIGGER_LOOP:
        return function(*args)
    from asgiref.sync import sync_to_async

    return await sync_to_async(function)(*args)


async def aget_connection(conn_id: str) -> Any:
    """The connection, read without blocking the triggerer's event loop."""
    if hasattr(BaseHook, "aget_connection"):  # 3.1+
        return await BaseHook.aget_connection(conn_id)
    from asgiref.sync import sync_to_async

    return await sync_to_async(BaseHook.get_connection)(conn_id)


# 3.2+: XCom from a trigger (the watch's checkpoints). 3.3 has async XCom calls; on 3.2 the provider makes the
# same requests on the event loop (``_loop_comms``). The 3.0 and 3.1 triggerers read each reply on the request's
# own path: a request cancelled before its reply (a trigger ending while it writes) leaves the reply to the
# next request, and the triggerer process dies ("Response read out of order"). There a trigger keeps no
# checkpoint: after a triggerer restart its output since the task deferred is shown again, none is lost.
TRIGGER_XCOM: bool = AIRFLOW_V_3_2_PLUS


class TriggerXComUnavailable(RuntimeError):
    """This Airflow line's triggerer cannot give a trigger XCom safely (see ``TRIGGER_XCOM``)."""

    def __init__(self) -> None:
        super().__init__(f"Airflow {AIRFLOW_VERSION} gives triggers no XCom (3.2+ does)")


async def aget_xcom(key: str, *, dag_id: str, task_id: str, run_id: str, map_index: int) -> Any:
    """An XCom value of a task instance, from a trigger (None when there is none)."""
    from airflow.sdk.bases.xcom import BaseXCom

    if hasattr(BaseXCom, "aget_one"):  # 3.3+
        return await BaseXCom.aget_one(key=key, dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index)
    if not TRIGGER_XCOM:
        raise TriggerXComUnavailable()
    if (comms := _loop_comms()) is not None:
        from airflow.sdk.execution_time.comms import GetXCom

        reply = await comms.asend(GetXCom(key=key, dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index))
        return BaseXCom.deserialize_value(reply) if getattr(reply, "value", None) is not None else None
    from asgiref.sync import sync_to_async

    return await sync_to_async(BaseXCom.get_one)(
        key=key, dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index
    )


async def aset_xcom(key: str, value: Any, *, dag_id: str, task_id: str, run_id: str, map_index: int) -> None:
    """Store an XCom value of a task instance, from a trigger."""
    from airflow.sdk.bases.xcom import BaseXCom

    if hasattr(BaseXCom, "aset"):  # 3.3+
        await BaseXCom.aset(key, value, dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index)
        return
    if not TRIGGER_XCOM:
        raise TriggerXComUnavailable()
    if (comms := _loop_comms()) is not None:
        from airflow.sdk.execution_time.comms import SetXCom

        value = BaseXCom.serialize_value(
            value=value, key=key, task_id=task_id, dag_id=dag_id, run_id=run_id, map_index=map_index
        )
        await comms.asend(
            SetXCom(key=key, value=value, dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index)
        )
        return
    from asgiref.sync import sync_to_async

    await sync_to_async(BaseXCom.set)(key, value, dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index)


def _loop_comms() -> Any:
    """3.2+'s triggerer channel to its supervisor, to ask on the event loop as 3.3's async calls do (None elsewhere:
    3.0 and 3.1, see ``to_reply``; a worker). 3.2's synchronous calls share asgiref's one worker thread: one whose
    reply a stopping triggerer never reads holds the later ones (a last checkpoint) and the process's exit."""
    from airflow.sdk.execution_time import task_runner

    comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    return comms if TRIGGER_XCOM and type(comms).__name__ == "TriggerCommsDecoder" else None


# Requests a trigger made through ``to_reply`` whose caller went away (the loop keeps weak references only).
_unanswered: set[asyncio.Future[Any]] = set()


async def to_reply(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)``, a synchronous task SDK call that asks the triggerer's supervisor (a task
    instance's state, an XCom), made from a trigger and run to its reply whatever becomes of the caller.

    The 3.0 and 3.1 triggerers read a reply on its request's own path (see ``TRIGGER_XCOM``): a request whose
    caller is cancelled before the reply leaves that reply to the next request, and the triggerer process dies.
    A trigger that asks once it is cancelled (see ``TRIGGER_ON_KILL``) is cancelled again about every second
    until it ends, so the request runs in a task of its own that a cancellation of the caller does not reach, in
    a worker thread (through which the call finds the event loop). 3.2+ triggerers need none of this."""
    from asgiref.sync import sync_to_async

    work = asyncio.ensure_future(sync_to_async(function, thread_sensitive=False)(*args, **kwargs))
    _unanswered.add(work)
    work.add_done_callback(_unanswered.discard)
    return await asyncio.shield(work)


async def atask_state(*, dag_id: str, task_id: str, run_id: str, map_index: int) -> str:
    """A task instance's state now, from a trigger (``"none"``: it has none, it was cleared)."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    if (comms := _loop_comms()) is not None:
        from airflow.sdk.execution_time.comms import GetTaskStates

        asked = GetTaskStates(dag_id=dag_id, task_ids=[task_id], run_ids=[run_id], map_index=map_index)
        states = (await comms.asend(asked)).task_states
    else:
        get_states = RuntimeTaskInstance.get_task_states
        states = await to_reply(get_states, dag_id=dag_id, task_ids=[task_id], run_ids=[run_id], map_index=map_index)
    # A mapped task instance's state is keyed by "<task_id>_<map_index>".
    key = task_id if map_index < 0 else f"{task_id}_{map_index}"
    value = states[run_id][key]
    return "none" if value is None else str(getattr(value, "value", value))


async def aget_xcom_to_reply(key: str, *, dag_id: str, task_id: str, run_id: str, map_index: int) -> Any:
    """An XCom value of a task instance, from a trigger, on every line (see ``to_reply``); None when there is
    none. Unlike ``aget_xcom``, for the one read a trigger makes when it is cancelled: 3.0 and 3.1 triggerers
    survive requests made this way, not a stream of checkpoints cut off by each cancellation."""
    from airflow.sdk.bases.xcom import BaseXCom

    if _loop_comms() is not None:
        return await aget_xcom(key, dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index)
    return await to_reply(BaseXCom.get_one, key=key, dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index)


def triggers_run_inline() -> bool:
    """Whether triggers run in the task's own process (``airflow dags test``, ``dag.test()``), not in a triggerer.

    ``dag.test()`` runs a deferred task's trigger in-line under an in-process supervisor
    (``InProcessTestSupervisor.run_trigger_in_process``), whose comms it installs as the task runner's
    ``SUPERVISOR_COMMS`` for as long as the trigger runs; a triggerer's runner has its own comms there.
    """
    try:
        from airflow.sdk.execution_time import task_runner
    except ImportError:
        return False
    comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    return type(comms).__name__ == "InProcessSupervisorComms"


# -- lineage -------------------------------------------------------------------------------------------
# What differs, and how the provider does the same on every line (docs/reference/airflow-lines.md):
# - the hook lineage collector lives in airflow.lineage.hook on 3.0 and 3.1, airflow.sdk.lineage on 3.2+;
# - 3.0 drops an asset URI's user part (3.1+ only a password): the provider's asset URIs carry the container in
#   their path on every line, not as ``container@`` (hooks/dataset_names.py);
# - the OpenLineage provider each line's dependency set takes (2.6 on 3.0) may lack the root's namespace macro:
#   the root is then in the task's namespace (lineage/parent.py);
# - 3.0's ``dag.test()`` leaves a DAG's assets inactive until the DAG processor has parsed the file, and a task
#   with assets among its outlets fails there (AirflowInactiveAssetInInletOrOutletException); a deployment, and
#   3.1+, activate them.


def hook_lineage_collector() -> Any:
    """Airflow's hook lineage collector of this process (a no-op one unless a hook lineage reader, such as the
    OpenLineage provider's, is registered)."""
    try:  # 3.2+
        from airflow.sdk.lineage import get_hook_lineage_collector
    except ImportError:  # 3.0, 3.1
        from airflow.lineage.hook import get_hook_lineage_collector  # type: ignore[no-redef,import-not-found]
    return get_hook_lineage_collector()


def openlineage_enabled() -> bool:
    """Whether the OpenLineage provider is installed and enabled (a transport configured, not disabled). Nothing of
    it is imported when it is not installed."""
    if airflowless.active():
        return False
    import importlib.util

    try:
        if importlib.util.find_spec("airflow.providers.openlineage") is None:
            return False
    except (ImportError, ValueError):
        return False
    try:
        from airflow.providers.openlineage import conf as openlineage_conf
    except ImportError:  # installed but broken (a missing dependency): as if absent
        return False
    return not openlineage_conf.is_disabled()


# -- the command line ----------------------------------------------------------------------------------


def redirect_stdout_log_handlers_to_stderr() -> None:
    """Log lines to stderr, so that a command's stdout holds its output alone."""
    if airflowless.active():
        return
    try:  # 3.3+
        from airflow.cli.utils import redirect_stdout_log_handlers_to_stderr as redirect
    except ImportError:  # what 3.3 does, for the lines before it
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
                # 3.0's RedirectStdHandler writes to whatever sys.stdout is at the time: its stream is fixed.
                with contextlib.suppress(AttributeError):
                    handler.setStream(sys.stderr)
        return
    redirect()


def dags_in_file(path: str, *, safe_mode: bool = False) -> tuple[dict[str, Any], dict[str, str]]:
    """The DAGs a file (or a folder) defines, by id, and its import errors (file -> error), as the DAG processor
    reads them; ``safe_mode`` skips files that name neither "dag" nor "airflow" (``[core]
    dag_discovery_safe_mode``, which the DAG processor applies to its folder)."""
    import inspect

    try:  # 3.2+
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # 3.0, 3.1
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef,attr-defined,unused-ignore]
    kwargs: dict[str, Any] = {"safe_mode": safe_mode}
    if "include_examples" in inspect.signature(DagBag).parameters:  # 3.0 to 3.2: else [core] load_examples decides
        kwargs["include_examples"] = False
    bag = DagBag(dag_folder=path, **kwargs)
    return dict(bag.dags), {str(file): str(error) for file, error in bag.import_errors.items()}


__all__ = [
    "AIRFLOW_VERSION",
    "AIRFLOW_V_3_1_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "CONNECTION_FORM_FIELDS",
    "PROVIDER_CLI",
    "SYNC_SDK_CALLS_ON_TRIGGER_LOOP",
    "TASK_STATE_STORE",
    "TRIGGER_ON_KILL",
    "TRIGGER_XCOM",
    "AirflowException",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowSkipException",
    "AirflowTaskTimeout",
    "BaseHook",
    "ConnectionFields",
    "Log",
    "TaskDeferralError",
    "TaskDeferralTimeout",
    "TaskInstanceKey",
    "TriggerXComUnavailable",
    "aget_connection",
    "aget_xcom",
    "aget_xcom_to_reply",
    "aset_xcom",
    "atask_state",
    "conf",
    "dags_in_file",
    "hook_lineage_collector",
    "incr_metric",
    "mask_secret",
    "named_logger",
    "off_trigger_loop",
    "openlineage_enabled",
    "redirect_stdout_log_handlers_to_stderr",
    "to_reply",
    "triggers_run_inline",
]
