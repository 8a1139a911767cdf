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

import contextlib
import json
import logging
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream
from torchx.specs import AppDef, AppDryRunInfo, AppState, CfgVal, ReplicaStatus, Role, RoleStatus, runopts
from torchx.workspace.api import WorkspaceMixin

from airflow_provider_azbatch.torchx.account import Account, split_app_id
from airflow_provider_azbatch.torchx.names import (
    ALL_USERS,
    APP_METADATA_KEY,
    JOB_ID_PREFIX,
    PART_OF_METADATA_KEY,
    USER_METADATA_KEY,
    current_user,
    other_jobs_of,
)
from airflow_provider_azbatch.torchx.options import AzureBatchOpts
from airflow_provider_azbatch.torchx.states import CANCEL_REASON, FAIL_FAST_REASON, app_state

if TYPE_CHECKING:
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook
    from airflow_provider_azbatch.submission.request import JobRequest
    from airflow_provider_azbatch.torchx.app import App, Replica
    from airflow_provider_azbatch.torchx.logs import AppFollower
    from airflow_provider_azbatch.torchx.replicas import AppReader

SCHEDULER = "azure_batch"
log = logging.getLogger(__name__)
# stderr lines of the failed replica quoted in a FAILED app's message.
FAILURE_TAIL_LINES = 20
STDERR_FILE = "stderr.txt"


def note(message: str) -> None:
    """A line for the person at the terminal (stderr: stdout carries the handle)."""
    print(f"azure_batch: {message}", file=sys.stderr)


@dataclass
class AzureBatchJob:
    """What ``torchx run`` sends: the Batch job request, on which account, and how it reads as REST JSON; read
    back from Batch (``describe_native``), the job and tasks as Batch holds them, without a request."""

    account: Account
    app_id: str
    request: JobRequest | None
    preview: dict[str, Any]
    # The app's other jobs, when its roles run on pools of different VM sizes (a job per pool).
    others: list[JobRequest] = field(default_factory=list)

    def render(self) -> str:
        return json.dumps({"account": self.account.describe(), "app_id": self.app_id, **self.preview}, indent=2)


class AzureBatchScheduler(WorkspaceMixin[None], Scheduler[AzureBatchOpts]):  # type: ignore[misc]  # torchx is untyped
    """Runs TorchX apps as Azure Batch jobs: each role a task, several replicas a multi-instance task."""

    def __init__(self, session_name: str) -> None:
        super().__init__(SCHEDULER, session_name)
        self._hooks: dict[str, AzureBatchHook] = {}
        # TorchX reads logs in a thread per replica, each asking for the app first.
        self._lock = threading.RLock()
        self._describing: dict[str, threading.Lock] = {}
        # app id -> (when its last describe ended, its answer)
        self._described: dict[str, tuple[float, DescribeAppResponse | None]] = {}
        self._followers: dict[str, AppFollower] = {}

    def _run_opts(self) -> runopts:
        return AzureBatchOpts.as_runopts()

    # -- workspaces: shipped as files through the provider's staging (nothing is built, no Docker) -----------
    def caching_build_workspace_and_update_role(
        self, role: Role, cfg: Mapping[str, CfgVal], build_cache: dict[object, object]
    ) -> None:
        """Nothing to build: the role keeps its workspace, which its job stages in Blob when it is submitted."""

    # -- accounts ------------------------------------------------------------------------------------------
    def _hook(self, account: Account) -> AzureBatchHook:
        with self._lock:
            hook = self._hooks.get(account.ref)
            if hook is None:
                hook = self._hooks[account.ref] = account.hook()
            return hook

    def _defaults(self) -> AzureBatchOpts:
        """The run options of ``.torchxconfig [azure_batch]``: how to reach an account named by an app id."""
        from torchx.runner import config

        cfg: dict[str, CfgVal] = {}
        config.apply(scheduler=SCHEDULER, cfg=cfg)
        opts: AzureBatchOpts = self._resolve_cfg(cfg)  # torchx's Scheduler is untyped
        return opts

    def _job(self, app_id: str) -> tuple[AzureBatchHook, str]:
        account, job_id = split_app_id(app_id, self._defaults())
        return self._hook(account), job_id

    # -- run -----------------------------------------------------------------------------------------------
    def _submit_dryrun(self, app: AppDef, cfg: AzureBatchOpts) -> AppDryRunInfo[AzureBatchJob, AzureBatchOpts]:
        account = Account.of(cfg)
        hook = self._hook(account)  # imports Airflow, with its log lines kept off stdout
        from airflow_provider_azbatch.torchx.mapping import job_requests, new_job_id
        from airflow_provider_azbatch.torchx.preview import preview

        job_id = new_job_id(app.name)
        app_id = account.app_id(job_id)
        request, *others = job_requests(
            app,
            cfg,
            job_id=job_id,
            app_id=app_id,
            has_storage=bool(hook.settings.storage_account_url),
            note=note,
        )
        shown = preview(request)
        if others:
            shown["other_jobs"] = [preview(other) for other in others]
        job = AzureBatchJob(account, app_id, request, shown, others)
        return AppDryRunInfo(job, AzureBatchJob.render)

    def schedule(self, dryrun_info: AppDryRunInfo[AzureBatchJob, AzureBatchOpts]) -> str:
        from airflow_provider_azbatch.exceptions import AzureBatchValidationError
        from airflow_provider_azbatch.hooks.errors import describe_error, is_auth_failure
        from airflow_provider_azbatch.runs.pre_submit import build_submission
        from airflow_provider_azbatch.submission.reattach import submit

        job: AzureBatchJob = dryrun_info.request  # torchx's AppDryRunInfo is untyped
        if job.request is None:
            raise ValueError(f"app {job.app_id} was read back from Batch (describe_native): it cannot be run again")
        hook = self._hook(job.account)
        submitted: list[str] = []
        try:
            # The app's other jobs first: its own job, which describe reads the app from, comes last.
            for request in [*job.others, job.request]:
                submission = build_submission(hook, request, None, log)
                submit(hook, submission)
                submitted.append(submission.job_id)
        except Exception as exc:
            for job_id in submitted:  # no half of an app left running
                hook.delete_job(job_id)
            if not is_auth_failure(exc):
                raise
            # As the operator's run says it (runs/lifecycle.py): which account refused, and what to check.
            raise AzureBatchValidationError(
                job.account.describe(),
                f"was refused by the Batch account ({describe_error(exc)}): {hook.settings.credentials_hint()}",
            ) from None
        return job.app_id

    # -- read ----------------------------------------------------------------------------------------------
    def _reader(self, app_id: str) -> AppReader:
        hook, job_id = self._job(app_id)  # first: Airflow is imported there with its log lines off stdout
        from airflow_provider_azbatch.torchx.replicas import AppReader

        return AppReader(hook, job_id, has_storage=bool(hook.settings.storage_account_url))

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """The app, each replica's own state, exit code and restarts; a replica that failed while the others run
        ends the app (fail fast). Callers asking while a describe of the app is under way share its answer:
        ``torchx log`` asks once per replica, in threads, at its start."""
        arrived = time.monotonic()
        with self._lock:
            lock = self._describing.setdefault(app_id, threading.Lock())
        with lock:
            shared = self._described.get(app_id)
            if shared is not None and shared[0] > arrived:
                return shared[1]
            described = self._describe(app_id)
            self._described[app_id] = (time.monotonic(), described)
            return described

    def _describe(self, app_id: str) -> DescribeAppResponse | None:
        from airflow_provider_azbatch.torchx.account import portal_url

        reader = self._reader(app_id)
        app = reader.read(records=True)
        if app is None:
            return None
        stopped = self._fail_fast(reader, app)
        statuses = [
            RoleStatus(role.name, [_replica_status(replica, app, stopped) for replica in role.replicas])
            for role in app.roles
        ]
        roles = [
            Role(name=role.name, image=role.image, entrypoint=role.entrypoint, num_replicas=role.num_replicas)
            for role in app.roles
        ]
        msg = ""
        if app.state == AppState.FAILED:
            msg = self._failure(reader, app, stopped)
        elif app.state == AppState.CANCELLED:
            msg = f"Batch job {app.job_id} was terminated ({app.terminate_reason})"
        return DescribeAppResponse(
            app_id=app_id,
            state=app.state,
            num_restarts=max((replica.restarts for replica in app.replicas()), default=0),
            msg=msg,
            ui_url=portal_url(reader.hook, app.job_id),
            metadata={key: value for key, value in app.metadata.items() if key != APP_METADATA_KEY},
            roles_statuses=statuses,
            roles=roles,
        )

    def _fail_fast(self, reader: AppReader, app: App) -> Replica | None:
        """The replica whose failure ended the app, when one did; ends the job if it still runs.

        Batch ends the job itself when a task fails (replica 0 of a role: the provider's ``fail_fast``); a
        replica on another node of a multi-instance task fails in the background of its task, which only its
        record tells."""
        failed = _first_failed(app)
        if failed is None:
            return None
        if not app.ended and not app.cancelled:
            # Batch ends the job of a role whose task failed; the app's other jobs, and the job of a replica
            # that failed in the background of its task, are ended here.
            running = [
                job.job_id
                for job in (app.jobs.values() or [])
                if not job.ended and (failed.index > 0 or job.job_id != (failed.job_id or app.job_id))
            ]
            if not app.jobs and failed.index > 0:
                running = [app.job_id]
            reason = f"{FAIL_FAST_REASON}:{failed.role_index}/{failed.index}:{failed.exit_code}"
            for job_id in running:
                if reader.hook.terminate_job(job_id, reason=reason):
                    log.info("Role %r replica %d failed: app %s stopped (fail fast)", failed.role, failed.index, job_id)
            if running:
                app.terminate_reason = reason
        return failed

    def _failure(self, reader: AppReader, app: App, failed: Replica | None) -> str:
        """Which role and replica failed first, with what exit code, and the end of its stderr; Batch's own
        failure report when no replica says (a node, an image, the wall clock)."""
        from airflow_provider_azbatch.torchx.files import last_lines

        if failed is None or failed.exit_code is None:
            return self._report(reader.hook, app)
        headline = f"Role '{failed.role}' replica {failed.index} failed with exit code {failed.exit_code}"
        if failed.restarts:
            headline += f" after {failed.restarts} restart{'s' if failed.restarts > 1 else ''}"
        others = [
            replica for replica in app.replicas() if replica is not failed and replica.state != AppState.SUCCEEDED
        ]
        if others and app.terminate_reason not in (None, "AllTasksComplete"):
            headline += "; the app was stopped (fail fast)"
        tail = []
        for files in (failed.files, failed.kept):
            tail = last_lines(files, STDERR_FILE, FAILURE_TAIL_LINES)
            if tail:
                break
        if not tail:
            return headline + "."
        return f"{headline}. Last {len(tail)} lines of its stderr:\n" + "\n".join(f"    {line}" for line in tail)

    def _report(self, hook: AzureBatchHook, app: App) -> str:
        """The failure report the operator raises: which task failed, its exit code, the end of its stderr."""
        from airflow_provider_azbatch.model.outcomes import JobOutcomes
        from airflow_provider_azbatch.results.failure_report import failure_report
        from airflow_provider_azbatch.watching.drivers import run_sync

        outcomes = JobOutcomes.collect(hook.list_task_outcomes(app.job_id))
        return run_sync(
            failure_report(
                app.job_id,
                outcomes,
                tail_lines=FAILURE_TAIL_LINES,
                terminate_reason=app.terminate_reason,
                log_location=app.location.to_json() if app.location else None,
            ),
            hook,
        )

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """This scheduler's apps on the account the options name, submitted by the ``user`` option's user (default:
        this process's login name; ``*``: every user's). The service filters on the job id prefix; the user is
        in each job's metadata."""
        from airflow_provider_azbatch.enums import enum_value

        opts = self._resolve_cfg(cfg or {})
        account = Account.of(opts)
        user = opts.user or current_user()
        hook = self._hook(account)
        jobs = hook.list_jobs(
            filter=f"startswith(id,'{JOB_ID_PREFIX}')", select=["id", "state", "executionInfo", "metadata"]
        )
        apps = []
        for job in jobs:
            metadata = {item.name: item.value for item in job.metadata or [] if item.name}
            if PART_OF_METADATA_KEY in metadata:
                continue  # one of an app's other jobs: the app is its first job
            if user != ALL_USERS and metadata.get(USER_METADATA_KEY) != user:
                continue
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

    def describe_native(self, app_id: str) -> AppDryRunInfo[AzureBatchJob, AzureBatchOpts] | None:
        """The app as Batch holds it: its job and tasks, as REST JSON (what ``describe`` reads them into, with
        every field Batch has); None once the job is gone."""
        from azure.core.exceptions import ResourceNotFoundError

        account, job_id = split_app_id(app_id, self._defaults())
        hook = self._hook(account)
        job = hook.get_job(job_id)
        if job is None:
            return None
        try:
            tasks = list(hook.client.list_tasks(job_id))
        except ResourceNotFoundError:  # deleted since
            return None
        native: dict[str, Any] = {"job": job.as_dict(), "tasks": [task.as_dict() for task in tasks]}
        metadata = {item.name: item.value for item in job.metadata or [] if item.name}
        others = []
        for other_id in other_jobs_of(metadata):
            other = hook.get_job(other_id)
            if other is None:
                continue
            with contextlib.suppress(ResourceNotFoundError):
                listed = [task.as_dict() for task in hook.client.list_tasks(other_id)]
                others.append({"job": other.as_dict(), "tasks": listed})
        if others:
            native["other_jobs"] = others
        return AppDryRunInfo(AzureBatchJob(account, app_id, None, native), AzureBatchJob.render)

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
        """A replica's lines (:mod:`.logs`); the replicas of one app read it together, once per poll."""
        with self._lock:
            follower = self._followers.get(app_id)
            if follower is None:
                reader = self._reader(app_id)
                from airflow_provider_azbatch.torchx.logs import AppFollower

                follower = self._followers[app_id] = AppFollower(reader)
        from airflow_provider_azbatch.torchx.logs import replica_lines

        app = follower.app()
        if app is None:
            raise ValueError(f"app {app_id} does not exist (its Batch job is gone)")
        roles = {role.name: role.num_replicas for role in app.roles}
        if role_name not in roles:
            raise ValueError(f"app {app_id} has no role '{role_name}' (its roles: {', '.join(roles) or 'none'})")
        replicas = roles[role_name]
        if not 0 <= k < replicas:
            raise ValueError(f"role '{role_name}' of app {app_id} has replicas 0 to {replicas - 1}, not {k}")
        stream = streams.value if isinstance(streams, Stream) and streams != Stream.COMBINED else None
        return replica_lines(
            follower, role_name, k, streams=stream, regex=regex, since=since, until=until, should_tail=should_tail
        )

    # -- act -----------------------------------------------------------------------------------------------
    def _cancel_existing(self, app_id: str) -> None:
        hook, job_id = self._job(app_id)
        for each in [*_other_jobs(hook, job_id), job_id]:
            hook.terminate_job(each, reason=CANCEL_REASON)

    def _delete_existing(self, app_id: str) -> None:
        hook, job_id = self._job(app_id)
        for each in [*_other_jobs(hook, job_id), job_id]:
            hook.delete_job(each)

    def close(self) -> None:
        for hook in self._hooks.values():
            if "client" in hook.__dict__:
                hook.client.close()
        self._hooks.clear()


def _other_jobs(hook: AzureBatchHook, job_id: str) -> list[str]:
    """The app's other jobs (its roles on pools of other VM sizes), from its job's metadata."""
    job = hook.get_job(job_id, select=["id", "metadata"])
    if job is None:
        return []
    return other_jobs_of({item.name: item.value for item in job.metadata or [] if item.name})


def _first_failed(app: App) -> Replica | None:
    """The replica that failed first (by its end; replica 0 of a role before another at the same time)."""
    failed = [replica for replica in app.replicas() if replica.state == AppState.FAILED]
    if not failed:
        return None
    far = datetime.max.replace(tzinfo=timezone.utc)
    return min(failed, key=lambda replica: (replica.ended or far, replica.index, replica.role_index))


def _replica_status(replica: Replica, app: App, failed: Replica | None) -> ReplicaStatus:
    """A replica as TorchX shows it; its exit code, restarts and what happened in its structured message."""
    status = ReplicaStatus(replica.index, replica.state, replica.role, replica.node_id, hostaddr=replica.host or None)
    status.structured_error_msg = json.dumps(
        {
            "message": _replica_message(replica, app, failed),
            # torchx shows no exit code 0 (it is falsy): a string is shown.
            "errorCode": None if replica.exit_code is None else str(replica.exit_code),
            "timestamp": int(replica.ended.timestamp()) if replica.ended is not None else None,
            "restarts": replica.restarts,
        }
    )
    return status


def _replica_message(replica: Replica, app: App, failed: Replica | None) -> str:
    restarts = f" (restarts: {replica.restarts})" if replica.restarts else ""
    state = replica.state
    if state in (AppState.SUCCEEDED, AppState.FAILED) and replica.exit_code is not None:
        return f"exited with code {replica.exit_code}{restarts}"
    if state == AppState.FAILED:
        return f"Batch failed it: {replica.failure or 'no exit code'}{restarts}"
    if state == AppState.RUNNING:
        return f"running on node {replica.node_id}{restarts}" if replica.node_id else f"running{restarts}"
    if state == AppState.PENDING:
        return "waiting for its node"
    if state == AppState.CANCELLED:
        if app.cancelled:
            why = f"the app was cancelled ({app.terminate_reason})"
        elif failed is not None:
            why = f"role '{failed.role}' replica {failed.index} failed (fail fast)"
        elif replica.index > 0:
            why = "replica 0 ended first (Batch ends a multi-instance task's other nodes with it)"
        else:
            why = f"its job ended ({app.terminate_reason})"
        return f"stopped: {why}"
    return replica.why_gone or "its own record was not kept"
