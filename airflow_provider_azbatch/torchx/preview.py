"""What a dry run shows: the Batch job (with its tasks) and the pool a job request would send, as REST JSON.

No I/O: a workspace is staged, a shared pool created and an existing pool checked only when the job is
submitted, so the preview names them instead of showing their SAS URLs and set-up lines.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_azbatch.pools.ready import task_images
from airflow_provider_azbatch.specs.sdk_fields import as_rest
from airflow_provider_azbatch.submission.job import JobSubmission
from airflow_provider_azbatch.submission.request import JobRequest


def preview(request: JobRequest) -> dict[str, Any]:
    checked = request.check(rendered=True)
    specs = checked.specs
    strategy = request.pool
    pool: dict[str, Any]
    body = None
    if strategy.kind == "existing":
        pool = {"kind": "existing", "id": strategy.pool_id}
    else:
        body = strategy.pool_body(
            containers=bool(task_images(specs, None)),
            multi_node=max(spec.num_nodes for spec in specs),
            task_images=task_images(specs, None),
        )
        pool = {"kind": strategy.kind, **({"id": strategy.pool_id} if strategy.pool_id else {}), **body}
    submission = JobSubmission(
        job_id=str(request.job_id),
        pool_id=strategy.pool_id if strategy.kind != "auto" else None,
        tasks=specs,
        metadata=checked.metadata,
        display_name=checked.display_name,
        job_max_wall_clock=request.job_max_wall_clock,
        auto_pool=body if strategy.kind == "auto" else None,
        auto_pool_prefix=strategy.auto_pool_prefix,
        priority=checked.priority,
    )
    job = as_rest(submission.job_options())
    job.pop("poolInfo", None)
    staged = [spec.id for spec in specs if spec.workspace is not None]
    result: dict[str, Any] = {
        "job": job,
        "pool": pool,
        "tasks": [as_rest(task) for task in submission.task_options()],
    }
    if staged:
        result["workspace"] = f"staged in Blob when submitted, unpacked before tasks {', '.join(staged)} run"
    if request.blob.output_container:
        result["logs"] = f"kept in Blob container {request.blob.output_container}"
    return result
