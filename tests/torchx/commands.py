"""The ``torchx`` command lines docs/howto/torchx.md shows, each with the test that runs it.

The tests run these very strings (``<handle>`` is the handle of the app the test started), so the page cannot
show a command no test runs; tests/docs/test_docs.py maps each to its test. No TorchX import here: the docs
tests read this module where the [torchx] extra is not installed too.
"""

from __future__ import annotations

import shlex

# The acceptance test of the TorchX pull request this provider grew out of (pytorch/torchx#688), verbatim.
FIRST_APP = (
    "python -m torchx.cli.main run --scheduler azure_batch --scheduler_args image_repo=ghcr.io/pytorch/torchx "
    "utils.echo --image alpine:latest --msg hello"
)
STATUS = "torchx status <handle>"
LOG = "torchx log <handle>"
LOG_TAIL = "torchx log --tail --streams stdout <handle>"
DESCRIBE = "torchx describe <handle>"
LIST = "torchx list -s azure_batch"
CANCEL = "torchx cancel <handle>"
DELETE = "torchx delete <handle>"
DRYRUN = "torchx run --dryrun -s azure_batch utils.echo"
OTHER_ACCOUNT = "torchx run -s azure_batch -cfg conn_id=research utils.echo --msg hi"
# Run with what the local machine needs on top (tests/torchx/test_torchx_rendezvous.py says what and why).
TORCHRUN = "torchx run -s azure_batch -cfg shared_pool=training,max_nodes=2 dist.torchrun -j 2x1 --script train.py"
# A role on an Azure VM size by its named resource (torchx_plugins/named_resources/azure.py).
NAMED_RESOURCE = "torchx run --dryrun -s azure_batch dist.ddp -j 2x1 -h azure_nc24ads_a100_v4 --script train.py"

_CLI = "tests/torchx/test_torchx_cli.py::"
RUN_BY = {
    FIRST_APP: f"{_CLI}test_the_688_command_prints_a_handle_then_status_log_list_and_describe_work",
    STATUS: f"{_CLI}test_the_688_command_prints_a_handle_then_status_log_list_and_describe_work",
    LOG: f"{_CLI}test_the_688_command_prints_a_handle_then_status_log_list_and_describe_work",
    DESCRIBE: f"{_CLI}test_the_688_command_prints_a_handle_then_status_log_list_and_describe_work",
    LIST: f"{_CLI}test_the_688_command_prints_a_handle_then_status_log_list_and_describe_work",
    DRYRUN: f"{_CLI}test_the_688_command_prints_a_handle_then_status_log_list_and_describe_work",
    DELETE: f"{_CLI}test_the_688_command_prints_a_handle_then_status_log_list_and_describe_work",
    LOG_TAIL: f"{_CLI}test_a_failing_app_a_cancelled_app_a_followed_log_and_the_workspace",
    CANCEL: f"{_CLI}test_a_failing_app_a_cancelled_app_a_followed_log_and_the_workspace",
    NAMED_RESOURCE: f"{_CLI}test_a_named_resource_dry_runs_to_its_vm_size_with_its_shared_memory",
    OTHER_ACCOUNT: "tests/torchx/test_torchx_accounts.py::"
    "test_two_accounts_side_by_side_by_one_option_one_of_them_without_airflow",
    TORCHRUN: "tests/torchx/test_torchx_rendezvous.py::test_torchrun_on_two_replicas_through_torchx_run",
}


def argv(command: str, handle: str = "") -> list[str]:
    """The arguments after ``torchx`` (or ``python -m torchx.cli.main``), ``<handle>`` replaced by ``handle``."""
    words = shlex.split(command)
    program = 3 if words[:3] == ["python", "-m", "torchx.cli.main"] else 1
    assert words[0] in ("torchx", "python"), command
    if "<handle>" in words:
        assert handle, f"{command!r} needs the handle of an app"
    return [handle if word == "<handle>" else word for word in words[program:]]
