"""What every ``airflow azbatch`` command shares: its hook, and errors as one line on stderr.

Exit codes: 0 done; 1 the command could not do it (unknown job, task or pool; a connection that is
missing, malformed or refused; the Batch service failing); 2 wrong arguments; 130 interrupted (Ctrl-C).
A user error never shows a traceback; an unexpected one (a bug) does.
"""

from __future__ import annotations

import os
import sys
from argparse import Namespace
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """The command cannot do what it was asked: said in one line on stderr, exit code 1."""

    exit_code = EXIT_ERROR


class UsageError(CliError):
    """The arguments are wrong (a bad regular expression, a time that is not one): exit code 2."""

    exit_code = EXIT_USAGE


def note(message: str) -> None:
    """A remark for the user that is not output (stderr, so that stdout stays clean for pipes)."""
    print(message, file=sys.stderr, flush=True)


def confirm(question: str) -> bool:
    """The user's yes to ``question`` at the terminal (no terminal to ask on: no)."""
    from airflow.utils.helpers import ask_yesno

    try:
        return ask_yesno(f"{question} [y/N]", default=False, output_fn=note)
    except (EOFError, OSError):  # nothing to read an answer from
        return False


def fail(message: str, exit_code: int = EXIT_ERROR) -> NoReturn:
    note(message)
    raise SystemExit(exit_code)


def conn_id_of(args: Namespace) -> str:
    from airflow_provider_azbatch import config

    return getattr(args, "conn_id", None) or config.get_str("default_conn_id")


def run(args: Namespace, body: Callable[[AzureBatchHook, Namespace], None]) -> None:
    """Run ``body`` with a hook on the command's connection, turning every known failure into a message."""
    from airflow_provider_azbatch.compat import redirect_stdout_log_handlers_to_stderr

    # stdout is the command's output (a table, JSON, task output for a pipe): log lines go to stderr.
    redirect_stdout_log_handlers_to_stderr()
    conn_id = conn_id_of(args)
    hook: AzureBatchHook | None = None
    try:
        from airflow_provider_azbatch.hooks.batch import AzureBatchHook

        hook = AzureBatchHook.for_command_line(conn_id)
        body(hook, args)
        sys.stdout.flush()
    except KeyboardInterrupt:
        fail("Interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, without Python's own complaint at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None
    except CliError as exc:
        fail(str(exc), exc.exit_code)
    except Exception as exc:
        message = explain(exc, conn_id, hook)
        if message is None:
            raise
        fail(message)


def explain(exc: BaseException, conn_id: str, hook: AzureBatchHook | None) -> str | None:
    """What went wrong, in one line, for the errors a user can fix; None for anything else (a bug)."""
    from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

    from airflow_provider_azbatch.compat import AirflowNotFoundException
    from airflow_provider_azbatch.exceptions import AzureBatchValidationError
    from airflow_provider_azbatch.hooks.errors import describe_error, is_auth_failure, root_cause

    if isinstance(exc, AirflowNotFoundException):
        return (
            f"Connection '{conn_id}' is not defined: create it (airflow connections add, the UI, or "
            f"AIRFLOW_CONN_{conn_id.upper()}) or name another with --conn-id"
        )
    if isinstance(exc, AzureBatchValidationError):  # a missing or malformed connection field
        return str(exc)
    settings = hook.settings if hook is not None else None
    if is_auth_failure(exc):
        hint = f": {settings.credentials_hint()}" if settings is not None else ""
        return f"Connection '{conn_id}' was refused by the Batch account ({describe_error(exc)}){hint}"
    if isinstance(exc, (ServiceRequestError, ServiceResponseError)):
        where = settings.account_url if settings is not None else "the Batch account"
        return f"Cannot reach {where} (connection '{conn_id}'): {root_cause(exc)}"
    if isinstance(exc, HttpResponseError):
        request = getattr(getattr(exc, "response", None), "request", None)
        url = str(getattr(request, "url", "") or "")
        storage = settings.storage_account_url if settings is not None else None
        service = "Blob storage" if storage and url.startswith(storage.rstrip("/")) else "The Batch service"
        return f"{service} answered {exc.status_code}: {describe_error(exc)}"
    return None
