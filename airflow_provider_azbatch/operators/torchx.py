"""``AzureBatchTorchXOperator``: a TorchX app (an AppDef, or a component name and its arguments) as one
Azure Batch job, with everything :class:`~airflow_provider_azbatch.operators.job.AzureBatchJobOperator` gives a
job: deferral, live output in the task log, reattach on retry, failure reports, results and cost in XCom.

The app is materialized when the task runs (so ``component_args`` may hold templates) and mapped to the job
request the ``azure_batch`` TorchX scheduler sends (``airflow_provider_azbatch.torchx.mapping``); the rest is
the job operator's. The job's id is the operator's (from DAG, task, run and map index), so a retry finds it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_provider_azbatch.model.records import STREAMS
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools.strategy import BatchPool
from airflow_provider_azbatch.runs import RunResult
from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.specs.operator_options import what_runs
from airflow_provider_azbatch.specs.options import ContainerOptions
from airflow_provider_azbatch.specs.workspace import Workspace
from airflow_provider_azbatch.submission.job_ids import default_job_id
from airflow_provider_azbatch.submission.request import JobRequest, holds_template
from airflow_provider_azbatch.watching.core import output_prefix

if TYPE_CHECKING:
    from airflow.sdk import Context
    from torchx.specs import AppDef

# What the operator derives from the app itself.
_FROM_APP = (*what_runs(), "num_nodes", "coordination_command")
# Stands in for the job id while the DAG is parsed (the real one needs the run).
_PARSE_JOB_ID = "torchx-parse"


class AzureBatchTorchXOperator(AzureBatchJobOperator):
    """Run a TorchX app on Azure Batch: each role a task, several replicas a multi-instance task.

    :param app: the :class:`torchx.specs.AppDef` to run; or
    :param component: a TorchX component (``dist.torchrun``, ``utils.sh``, ``my/components.py:train``), with
    :param component_args: its arguments as on the ``torchx run`` command line (templated), e.g.
        ``["-j", "2x1", "--script", "train.py", "--", "--epochs", "{{ params.epochs }}"]``.
    :param app_options: run options of the ``azure_batch`` scheduler (``torchx runopts azure_batch``): the
        pool (``pool_id``, ``shared_pool``, ``max_nodes``, ``vm_size``, ``low_priority``), ``priority``,
        ``containers``, ``registry_conn_id``, ``log_container``, ``max_wall_clock``. The account is the
        operator's ``azbatch_conn_id``.

    Without ``pool_id`` or ``batch_pool`` the job gets a pool from the roles' resources (the largest role
    decides the VM size; roles naming different VM sizes are refused: one job runs on one pool), or the one
    ``app_options`` names. Each role's container gets what ``torchx run`` gives it (``/dev/shm``, InfiniBand,
    ``container_run_options``). Every other parameter is the job operator's;
    ``workspace`` is shipped to every role and each role runs in it.
    """

    template_fields: Sequence[str] = (*AzureBatchJobOperator.template_fields, "component_args", "app_options")

    def __init__(
        self,
        *,
        app: AppDef | None = None,
        component: str | None = None,
        component_args: Sequence[str] = (),
        app_options: Mapping[str, Any] | None = None,
        pool_id: str | None = None,
        batch_pool: BatchPool | None = None,
        **kwargs: Any,
    ) -> None:
        for name in _FROM_APP:
            if kwargs.get(name) not in (None, 1):
                raise validation.fail(name, "is the app's to say: the roles of the TorchX app are what runs")
        if (app is None) == (component is None):
            raise validation.fail("app", "or component must be given, not both: an AppDef, or a component name")
        self._pool_from_app = pool_id is None and batch_pool is None
        self._fail_fast_given = kwargs.get("fail_fast") is not None
        # Stands in until the app is mapped: the pool comes from the roles' resources.
        placeholder = BatchPool.auto({}) if self._pool_from_app else batch_pool
        super().__init__(pool_id=pool_id, batch_pool=placeholder, **kwargs)
        self.app = app
        self.component = validation.text(component, "component")
        if isinstance(component_args, str) or not isinstance(component_args, Sequence):
            raise validation.fail("component_args", f"must be a list of arguments, got {component_args!r}")
        self.component_args = list(component_args)
        self.app_options = dict(app_options or {})
        self._context: Context | None = None
        self._mapped: JobRequest | None = None
        self.job_request().check(rendered=False)

    # -- the app as a job request -------------------------------------------------------------------------
    def _options(self) -> Any:
        from airflow_provider_azbatch.torchx.options import AzureBatchOpts

        unknown = sorted(set(self.app_options) - {name for name, _ in AzureBatchOpts.as_runopts()})
        if unknown:
            raise validation.fail(
                "app_options", f"has unknown option(s) {', '.join(unknown)}: see `torchx runopts azure_batch`"
            )
        resolved = AzureBatchOpts.as_runopts().resolve(self.app_options)
        return AzureBatchOpts.from_cfg(resolved)

    def materialize(self) -> AppDef:
        """The app this task runs (its component called with the rendered arguments)."""
        if self.app is not None:
            return self.app
        from airflow_provider_azbatch.torchx.components import materialize

        return materialize(str(self.component), self.component_args)

    def _map(self, job_id: str, *, has_storage: bool) -> JobRequest:
        import copy

        from airflow_provider_azbatch.torchx.mapping import job_request

        app = copy.deepcopy(self.materialize())
        app_id = f"{self.azbatch_conn_id}:{job_id}"
        for role in app.roles:
            role.env.setdefault("TORCHX_JOB_ID", "azure_batch://torchx/${app_id}")
        workspace = Workspace.parse(self.workspace, "workspace")
        return job_request(
            app,
            self._options(),
            job_id=job_id,
            app_id=app_id,
            has_storage=has_storage,
            note=lambda message: self.log.info("%s", message),
            workspace=workspace,
        )

    def job_request(self, *, running: bool = False) -> JobRequest:
        if not hasattr(self, "component_args"):
            # Asked by the job operator's own check, before this operator's parameters are set.
            return dataclasses.replace(super().job_request(running=running), command="true")
        base = super().job_request(running=running)
        mapped = self._mapped
        if running:
            assert self._context is not None, "execute() sets the context"
            context = self._context
            ti = context["ti"]
            map_index = getattr(ti, "map_index", None)
            job_id = self.job_id or default_job_id(
                context["dag"].dag_id, self.task_id, context["run_id"], -1 if map_index is None else map_index
            )
            mapped = self._mapped = self._map(str(job_id), has_storage=bool(self.hook.settings.storage_account_url))
        elif mapped is None:
            if holds_template([self.component, self.component_args, self.app_options, self.workspace]):
                return dataclasses.replace(base, command="true")
            # The DAG file is refused for what the app can never do (a role no VM size has, a bad option).
            mapped = self._map(_PARSE_JOB_ID, has_storage=True)
        return dataclasses.replace(
            base,
            pool=mapped.pool if self._pool_from_app else base.pool,
            tasks=mapped.tasks,
            job_id=mapped.job_id if running else base.job_id,
            workspace=None,
            display_name=base.display_name or mapped.display_name,
            metadata={**mapped.metadata, **(base.metadata or {})},
            priority=base.priority if base.priority is not None else mapped.priority,
            job_max_wall_clock=base.job_max_wall_clock or mapped.job_max_wall_clock,
            blob=base.blob if base.blob.output_container else mapped.blob,
            containers=_containers(base.containers, mapped.containers),
            # The app fails fast as the scheduler's does, unless the operator was told otherwise.
            fail_fast=base.fail_fast if self._fail_fast_given else mapped.fail_fast,
            job_preparation=_side_task("job_preparation", base.job_preparation, mapped.job_preparation),
            job_release=_side_task("job_release", base.job_release, mapped.job_release),
        )

    # -- execution -----------------------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        self._context = context
        return super().execute(context)

    def execute_after_quota_wait(
        self, context: Context, event: dict[str, Any] | None = None, quota_since: float | None = None
    ) -> Any:
        self._context = context
        return super().execute_after_quota_wait(context, event, quota_since)

    def outcome(self, result: RunResult) -> Any:
        """The other replicas' output (their nodes' files: the watch follows each role's primary), then the
        job operator's outcome, with the app's handle in the XCom result."""
        self._show_other_replicas(result.job_id)
        result.xcom["torchx_app_handle"] = f"azure_batch://torchx/{self.azbatch_conn_id}:{result.job_id}"
        return super().outcome(result)

    def _show_other_replicas(self, job_id: str) -> None:
        from airflow_provider_azbatch.hooks.errors import describe_error

        for task in self.hook.list_tasks(job_id, select=["id", "multiInstanceSettings"]):
            settings = getattr(task, "multi_instance_settings", None)
            if settings is None or (settings.number_of_instances or 1) < 2:
                continue
            for stream in STREAMS:
                try:
                    outputs = self.hook.subtask_outputs(job_id, task.id, stream)
                except Exception as exc:  # their output must never fail the task
                    self.log.warning(
                        "Could not read the output of task %s's other nodes: %s", task.id, describe_error(exc)
                    )
                    return
                for subtask_id in sorted(outputs):
                    prefix = output_prefix(f"{task.id}/{subtask_id}", stream)
                    for line in outputs[subtask_id].decode("utf-8", errors="replace").splitlines():
                        self.log.info("%s %s", prefix, line)


def _containers(own: ContainerOptions, app: ContainerOptions) -> ContainerOptions:
    """The operator's container options with the app's: its roles' mounts (run options) and ``registry_conn_id``
    of ``app_options``; the operator's own image, run options and working directory stay."""
    if own.registry_conn_id and app.registry_conn_id and own.registry_conn_id != app.registry_conn_id:
        raise validation.fail(
            "registry_conn_id",
            f"is '{own.registry_conn_id}', and app_options registry_conn_id is '{app.registry_conn_id}': give one",
        )
    run_options = " ".join(options for options in (app.run_options, own.run_options) if options)
    return dataclasses.replace(
        own, registry_conn_id=own.registry_conn_id or app.registry_conn_id, run_options=run_options or None
    )


# A job preparation or release task, as the operator or the app gives it.
SideTask = TypeVar("SideTask")


def _side_task(name: str, own: SideTask | None, app: SideTask | None) -> SideTask | None:
    """The app's job preparation or release task (which keeps the replicas' output), or the operator's: not both."""
    if own is not None and app is not None:
        raise validation.fail(
            name,
            "cannot be given to a TorchX app whose replicas' output is kept: the app's job uses it to upload the "
            "output of its replicas other than 0 (give the app no log_container, or drop this parameter)",
        )
    return app if app is not None else own
