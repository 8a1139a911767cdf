"""``AzureBatchScheduler``: the ``azure_batch`` TorchX scheduler (registered by
``torchx_plugins/schedulers/azure_batch.py``; docs/howto/torchx.md).

A face over the provider: ``_submit_dryrun`` maps the AppDef to the operator's job request
(:mod:`.mapping`), ``schedule`` prepares and submits it with the run life cycle's own steps
(:class:`~airflow_provider_azbatch.runs.JobRun`: pool, storage, workspace staging, idempotent submission), and
``describe``/``list``/``log_iter``/``cancel``/``delete`` read and act on the job through the hook.

The provider (and Airflow) is imported only once an account is known (:mod:`.account`), so ``torchx runopts``
and torchx's plugin scan stay light.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream
from torchx.specs import AppDef, AppDryRunInfo, AppState, CfgVal, ReplicaStatus, Role, RoleStatus, runopts
from torchx.workspace.api import WorkspaceMixin

from airflow_provider_azbatch.torchx.account import Account, split_app_id
from airflow_provider_azbatch.torchx.names import APP_METADATA_KEY, JOB_ID_PREFIX, roles_of
from airflow_provider_azbatch.torchx.options import AzureBatchOpts
from airflow_provider_azbatch.torchx.states import CANCEL_REASON, CANCEL_REASONS, app_state, replica_state

if TYPE_CHECKING:
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook
    from airflow_provider_azbatch.submission.request import JobRequest

SCHEDULER = "azure_batch"
log = logging.getLogger(__name__)
# stderr lines of the failed task quoted in a FAILED app's message.
FAILURE_TAIL_LINES = 20
TASK_SELECT = ["id", "state", "executionInfo", "nodeInfo", "containerSettings"]


def note(message: str) -> None:
    """A line for the person at the terminal (stderr: stdout carries the handle)."""
    print(f"azure_batch: {message}", file=sys.stderr)


@dataclass
class AzureBatchJob:
    """What ``torchx run`` sends: the Batch job request, on which account, and how it reads as REST JSON."""

    account: Account
    app_id: str
    request: JobRequest
    preview: dict[str, Any]

    def render(self) -> str:
        return json.dumps({"account": self.account.describe(), "app_id": self.app_id, **self.preview}, indent=2)


class AzureBatchScheduler(WorkspaceMixin[None], Scheduler[AzureBatchOpts]):
    """Runs TorchX apps as Azure Batch jobs: each role a task, several replicas a multi-instance task."""

    def __init__(self, session_name: str) -> None:
        super().__init__(SCHEDULER, session_name)
        self._hooks: dict[str, AzureBatchHook] = {}

    def _run_opts(self) -> runopts:
        return AzureBatchOpts.as_runopts()

    # -- workspaces: shipped as files through the provider's staging (nothing is built, no Docker) -----------
    def caching_build_workspace_and_update_role(
        self, role: Role, cfg: Mapping[str, CfgVal], build_cache: dict[object, object]
    ) -> None:
        """Nothing to build: the role keeps its workspace, which its job stages in Blob when it is submitted."""

    # -- accounts ------------------------------------------------------------------------------------------
    def _hook(self, account: Account) -> AzureBatchHook:
        hook = self._hooks.get(account.ref)
        if hook is None:
            hook = self._hooks[account.ref] = account.hook()
        return hook

    def _defaults(self) -> AzureBatchOpts:
        """The run options of ``.torchxconfig [azure_batch]``: how to reach an account named by an app id."""
        from torchx.runner import config

        cfg: dict[str, CfgVal] = {}
        config.apply(scheduler=SCHEDULER, cfg=cfg)
        return self._resolve_cfg(cfg)

    def _job(self, app_id: str) -> tuple[AzureBatchHook, str]:
        account, job_id = split_app_id(app_id, self._defaults())
        return self._hook(account), job_id

    # -- run -----------------------------------------------------------------------------------------------
    def _submit_dryrun(self, app: AppDef, cfg: AzureBatchOpts) -> AppDryRunInfo[AzureBatchJob, AzureBatchOpts]:
        account = Account.of(cfg)
        hook = self._hook(account)  # imports Airflow, with its log lines kept off stdout
        from airflow_provider_azbatch.torchx.mapping import job_request, new_job_id
        from airflow_provider_azbatch.torchx.preview import preview

        job_id = new_job_id(app.name)
        app_id = account.app_id(job_id)
        request = job_request(
            app,
            cfg,
            job_id=job_id,
            app_id=app_id,
            has_storage=bool(hook.settings.storage_account_url),
            note=note,
        )
        job = AzureBatchJob(account, app_id, request, preview(request))
        return AppDryRunInfo(job, AzureBatchJob.render)

    def schedule(self, dryrun_info: AppDryRunInfo[AzureBatchJob, AzureBatchOpts]) -> str:
        from airflow_provider_azbatch.runs import JobRun, RunSettings
        from airflow_provider_azbatch.submission.reattach import submit

        job = dryrun_info.request
        hook = self._hook(job.account)
        run = JobRun(hook, RunSettings.from_parameters(azbatch_conn_id=hook.azbatch_conn_id, operator="torchx"), log)
        submission = run.prepare(job.request, None)
        submit(hook, submission)
        return job.app_id

    # -- read ----------------------------------------------------------------------------------------------
    def describe(self, app_id: str) -> DescribeAppResponse | None:
        from airflow_provider_azbatch.enums import enum_value
        from airflow_provider_azbatch.torchx.account import portal_url

        hook, job_id = self._job(app_id)
        job = hook.get_job(job_id, select=["id", "state", "executionInfo", "metadata"])
        if job is None:
            return None
        metadata = {item.name: item.value for item in job.metadata or [] if item.name}
        reason = getattr(job.execution_info, "termination_reason", None)
        counts = hook.get_task_counts(job_id)
        state = app_state(enum_value(job.state), reason, counts)
        cancelled = reason in CANCEL_REASONS
        statuses, roles = [], []
        for name, task_id, replicas, entrypoint in roles_of(metadata):
            task = hook.get_task(job_id, task_id, select=TASK_SELECT)
            image = getattr(getattr(task, "container_settings", None), "image_name", None) or ""
            roles.append(Role(name=name, image=image, entrypoint=entrypoint, num_replicas=replicas))
            statuses.append(RoleStatus(name, self._replicas(hook, job_id, name, task, replicas, cancelled)))
        msg = ""
        if state == AppState.FAILED:
            msg = self._failure(hook, job_id, reason, job.metadata)
        elif state == AppState.CANCELLED:
            msg = f"Batch job {job_id} was terminated ({reason})"
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            msg=msg,
            ui_url=portal_url(hook, job_id),
            metadata={key: value for key, value in metadata.items() if key != APP_METADATA_KEY},
            roles_statuses=statuses,
            roles=roles,
        )

    def _replicas(
        self, hook: AzureBatchHook, job_id: str, role: str, task: Any, replicas: int, cancelled: bool
    ) -> list[ReplicaStatus]:
        from airflow_provider_azbatch.enums import enum_value

        def status(index: int, item: Any, state: str | None, info: Any) -> ReplicaStatus:
            result = enum_value(info.result) if info is not None and info.result is not None else None
            node = getattr(item, "node_info", None)
            replica = ReplicaStatus(
                index,
                replica_state(state, result, cancelled=cancelled),
                role,
                hostname=getattr(node, "node_id", None) or "",
            )
            exit_code = getattr(info, "exit_code", None)
            failure = getattr(info, "failure_info", None)
            if state == "completed":
                end = getattr(info, "end_time", None)
                message = (
                    f"{failure.code}: {failure.message}" if failure is not None else f"exited with code {exit_code}"
                )
                replica.structured_error_msg = json.dumps(
                    {
                        "message": message,
                        # torchx shows no exit code 0 (it is falsy).
                        "errorCode": None if exit_code is None else str(exit_code),
                        "timestamp": int(end.timestamp()) if isinstance(end, datetime) else None,
                    }
                )
            return replica

        if task is None:
            return [ReplicaStatus(index, AppState.UNKNOWN, role, "") for index in range(replicas)]
        info = task.execution_info
        found = [status(0, task, enum_value(task.state), info)]
        if replicas > 1:
            for subtask in sorted(hook.list_subtasks(job_id, task.id), key=lambda s: s.id or 0):
                if subtask.id:
                    found.append(status(subtask.id, subtask, enum_value(subtask.state), subtask))
            known = {replica.id for replica in found}
            found += [
                ReplicaStatus(index, AppState.CANCELLED if cancelled else AppState.PENDING, role, "")
                for index in range(replicas)
                if index not in known
            ]
        return found

    def _failure(self, hook: AzureBatchHook, job_id: str, reason: str | None, metadata: Any) -> str:
        """The failure report the operator raises: which task failed, its exit code, the end of its stderr."""
        from airflow_provider_azbatch.hooks.storage import LogLocation
        from airflow_provider_azbatch.results.failure_report import failure_report
        from airflow_provider_azbatch.results.outcomes import JobOutcomes
        from airflow_provider_azbatch.watching.drivers import run_sync

        outcomes = JobOutcomes.collect(hook.list_task_outcomes(job_id))
        location = LogLocation.from_metadata(metadata)
        return run_sync(
            failure_report(
                job_id,
                outcomes,
                tail_lines=FAILURE_TAIL_LINES,
                terminate_reason=reason,
                log_location=location.to_json() if location else None,
            ),
            hook,
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """This scheduler's apps on the account the options name (the service filters on the job id prefix)."""
        from airflow_provider_azbatch.enums import enum_value

        account = Account.of(self._resolve_cfg(cfg or {}))
        hook = self._hook(account)
        jobs = hook.list_jobs(
            filter=f"startswith(id,'{JOB_ID_PREFIX}')", select=["id", "state", "executionInfo", "metadata"]
        )
        apps = []
        for job in jobs:
            metadata = {item.name: item.value for item in job.metadata or [] if item.name}
            counts = hook.get_task_counts(job.id)
            reason = getattr(job.execution_info, "termination_reason", None)
            apps.append(
                ListAppResponse(
                    app_id=account.app_id(job.id),
                    state=app_state(enum_value(job.state), reason, counts),
                    name=metadata.get(APP_METADATA_KEY, ""),
                )
            )
        return apps

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        from airflow_provider_azbatch.torchx.logs import replica_lines

        hook, job_id = self._job(app_id)
        job = hook.get_job(job_id, select=["id", "metadata"])
        metadata = {item.name: item.value for item in (job.metadata if job is not None else None) or [] if item.name}
        roles = {name: (task_id, replicas) for name, task_id, replicas, _ in roles_of(metadata)}
        if role_name not in roles:
            raise ValueError(f"app {app_id} has no role '{role_name}' (its roles: {', '.join(roles) or 'none'})")
        task_id, replicas = roles[role_name]
        if not 0 <= k < replicas:
            raise ValueError(f"role '{role_name}' of app {app_id} has replicas 0 to {replicas - 1}, not {k}")
        stream = streams.value if isinstance(streams, Stream) and streams != Stream.COMBINED else None
        return replica_lines(hook, job_id, task_id, k, streams=stream, regex=regex, should_tail=should_tail)

    # -- act -----------------------------------------------------------------------------------------------
    def _cancel_existing(self, app_id: str) -> None:
        hook, job_id = self._job(app_id)
        hook.terminate_job(job_id, reason=CANCEL_REASON)

    def _delete_existing(self, app_id: str) -> None:
        hook, job_id = self._job(app_id)
        hook.delete_job(job_id)

    def close(self) -> None:
        for hook in self._hooks.values():
            if "client" in hook.__dict__:
                hook.client.close()
        self._hooks.clear()
