"""Task inputs (resource files) and outputs (output files) in Blob storage, as a DAG author writes them.

Inputs: ``{"container": "data", "prefix": "train/", "path": "data"}`` downloads every blob under the
prefix into ``wd/data/``; ``{"url": "https://...", "path": "model.bin"}`` downloads one URL.
Outputs: ``{"pattern": "out/**/*.csv", "container": "results", "path": "run-1", "upload": "success"}``
uploads matching files (relative to the task's working directory) under ``results/run-1/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from azure.batch import models as batch_models

from airflow_provider_azbatch.utils.job_spec import TaskSpecError

UPLOAD_CONDITIONS = {
    "success": batch_models.OutputFileUploadCondition.TASK_SUCCESS,
    "failure": batch_models.OutputFileUploadCondition.TASK_FAILURE,
    "completion": batch_models.OutputFileUploadCondition.TASK_COMPLETION,
}
_INPUT_FIELDS = ("container", "prefix", "url", "path", "file_mode")
_OUTPUT_FIELDS = ("pattern", "container", "path", "upload")


def _text(value: Any, where: str, *, required: bool = False) -> str | None:
    if value is None:
        if required:
            raise TaskSpecError(f"{where} is missing")
        return None
    if not isinstance(value, str) or not value.strip():
        raise TaskSpecError(f"{where} must be a non-empty string, got {value!r}")
    return value


@dataclass(frozen=True)
class InputSpec:
    container: str | None = None
    prefix: str | None = None
    url: str | None = None
    path: str | None = None
    file_mode: str | None = None

    @classmethod
    def parse(cls, value: Any, where: str) -> InputSpec:
        if isinstance(value, InputSpec):
            return value
        if not isinstance(value, Mapping):
            raise TaskSpecError(f"{where} must be a mapping with container (and prefix) or url, got {value!r}")
        unknown = sorted(set(value) - set(_INPUT_FIELDS))
        if unknown:
            raise TaskSpecError(f"{where} has unknown field(s) {', '.join(unknown)}; known: {', '.join(_INPUT_FIELDS)}")
        spec = cls(
            container=_text(value.get("container"), f"{where}.container"),
            prefix=_text(value.get("prefix"), f"{where}.prefix"),
            url=_text(value.get("url"), f"{where}.url"),
            path=_text(value.get("path"), f"{where}.path"),
            file_mode=_text(value.get("file_mode"), f"{where}.file_mode"),
        )
        if (spec.container is None) == (spec.url is None):
            raise TaskSpecError(f"{where} needs either container (a Blob container to download from) or url, not both")
        if spec.url is not None and spec.path is None:
            raise TaskSpecError(f"{where}.path is missing: name the file the url is saved as")
        if spec.url is not None and spec.prefix is not None:
            raise TaskSpecError(f"{where}.prefix only applies to a container")
        return spec

    def to_sdk(self, container_url: str | None) -> batch_models.ResourceFile:
        if self.url is not None:
            return batch_models.ResourceFile(http_url=self.url, file_path=self.path, file_mode=self.file_mode)
        return batch_models.ResourceFile(
            storage_container_url=container_url, blob_prefix=self.prefix, file_path=self.path, file_mode=self.file_mode
        )


@dataclass(frozen=True)
class OutputSpec:
    pattern: str
    container: str | None = None
    path: str | None = None
    upload: str = "success"

    @classmethod
    def parse(cls, value: Any, where: str) -> OutputSpec:
        if isinstance(value, OutputSpec):
            return value
        if not isinstance(value, Mapping):
            raise TaskSpecError(f"{where} must be a mapping with at least pattern, got {value!r}")
        unknown = sorted(set(value) - set(_OUTPUT_FIELDS))
        if unknown:
            raise TaskSpecError(
                f"{where} has unknown field(s) {', '.join(unknown)}; known: {', '.join(_OUTPUT_FIELDS)}"
            )
        upload = value.get("upload", "success")
        if upload not in UPLOAD_CONDITIONS:
            raise TaskSpecError(f"{where}.upload must be success, failure or completion, got {upload!r}")
        return cls(
            pattern=_text(value.get("pattern"), f"{where}.pattern", required=True) or "",
            container=_text(value.get("container"), f"{where}.container"),
            path=_text(value.get("path"), f"{where}.path"),
            upload=upload,
        )

    def to_sdk(self, container_url: str | None, identity_reference: str | None = None) -> batch_models.OutputFile:
        destination = batch_models.OutputFileBlobContainerDestination(
            container_url=container_url,
            path=self.path,
            identity_reference=(
                batch_models.BatchNodeIdentityReference(resource_id=identity_reference) if identity_reference else None
            ),
        )
        return batch_models.OutputFile(
            file_pattern=self.pattern,
            destination=batch_models.OutputFileDestination(container=destination),
            upload_options=batch_models.OutputFileUploadConfiguration(upload_condition=UPLOAD_CONDITIONS[self.upload]),
        )


def parse_inputs(values: Any, where: str) -> tuple[InputSpec, ...]:
    if values is None:
        return ()
    if isinstance(values, (str, bytes, Mapping)):
        raise TaskSpecError(f"{where} must be a list of inputs, got {type(values).__name__}")
    return tuple(InputSpec.parse(item, f"{where}[{index}]") for index, item in enumerate(values))


def parse_outputs(values: Any, where: str) -> tuple[OutputSpec, ...]:
    if values is None:
        return ()
    if isinstance(values, (str, bytes, Mapping)):
        raise TaskSpecError(f"{where} must be a list of outputs, got {type(values).__name__}")
    return tuple(OutputSpec.parse(item, f"{where}[{index}]") for index, item in enumerate(values))
