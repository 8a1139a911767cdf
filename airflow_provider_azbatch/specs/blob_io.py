"""Task inputs (resource files) and outputs (output files) in Blob storage, as a DAG author writes them.

Inputs: ``{"container": "data", "prefix": "train/", "path": "data"}`` downloads every blob under the
prefix into ``wd/data/``; ``{"url": "https://...", "path": "model.bin"}`` downloads one URL.
Outputs: ``{"pattern": "out/**/*.csv", "container": "results", "path": "run-1", "upload": "success"}``
uploads matching files (relative to the task's working directory) under ``results/run-1/``; with ``"asset":
Asset("...")`` (or an asset's name) a successful run also records an asset event of what it wrote there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from azure.batch import models as batch_models

from airflow_provider_azbatch.specs import validation

UPLOAD_CONDITIONS = {
    "success": batch_models.OutputFileUploadCondition.TASK_SUCCESS,
    "failure": batch_models.OutputFileUploadCondition.TASK_FAILURE,
    "completion": batch_models.OutputFileUploadCondition.TASK_COMPLETION,
}
_INPUT_FIELDS = ("container", "prefix", "url", "path", "file_mode")
_OUTPUT_FIELDS = ("pattern", "container", "path", "upload", "asset")


def _known_fields(value: Any, where: str, known: tuple[str, ...], shape: str) -> Mapping[str, Any]:
    return validation.known_mapping(value, where, known, must_be=f"a mapping with {shape}", quote_value=True)


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
        fields = _known_fields(value, where, _INPUT_FIELDS, "container (and prefix) or url")
        spec = cls(
            container=validation.container_name(fields.get("container"), f"{where}.container"),
            prefix=validation.text(fields.get("prefix"), f"{where}.prefix"),
            url=validation.text(fields.get("url"), f"{where}.url"),
            path=validation.relative_path(fields.get("path"), f"{where}.path"),
            file_mode=validation.text(fields.get("file_mode"), f"{where}.file_mode"),
        )
        if (spec.container is None) == (spec.url is None):
            raise validation.fail(where, "needs either container (a Blob container to download from) or url, not both")
        if spec.url is not None:
            if not spec.url.startswith(("https://", "http://")):
                raise validation.fail(f"{where}.url", f"must be an http(s) URL, got {spec.url!r}")
            if spec.path is None:
                raise validation.fail(f"{where}.path", "is missing: name the file the url is saved as")
            if spec.prefix is not None:
                raise validation.fail(f"{where}.prefix", "only applies to a container")
        if spec.file_mode is not None and not (len(spec.file_mode) in (3, 4) and spec.file_mode.isdigit()):
            raise validation.fail(f"{where}.file_mode", f"must be an octal mode like '0755', got {spec.file_mode!r}")
        return spec

    def to_sdk(self, container_url: str | None) -> batch_models.ResourceFile:
        if self.url is not None:
            return batch_models.ResourceFile(http_url=self.url, file_path=self.path, file_mode=self.file_mode)
        return batch_models.ResourceFile(
            storage_container_url=container_url, blob_prefix=self.prefix, file_path=self.path, file_mode=self.file_mode
        )


def check_asset(value: Any, where: str) -> Any:
    """An output's ``asset``: an Airflow ``Asset``, or the name of one (not templated: Airflow needs it when the DAG
    is parsed, to schedule the DAGs that wait for it)."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip() or "{{" in value or "{%" in value:
            raise validation.fail(
                where,
                f"must be an Asset or an asset's name, not templated ({value!r}): Airflow reads it when the DAG is "
                "parsed, to schedule the DAGs that wait for it",
            )
        return value
    if not (hasattr(value, "uri") and hasattr(value, "name") and hasattr(value, "extra")):
        raise validation.fail(where, f"must be an Asset or an asset's name, got {type(value).__name__} {value!r}")
    return value


@dataclass(frozen=True)
class OutputSpec:
    pattern: str
    container: str | None = None
    path: str | None = None
    upload: str = "success"
    # An Airflow Asset (or an asset's name) whose event a successful run records, with what it wrote here.
    asset: Any = None

    @classmethod
    def parse(cls, value: Any, where: str) -> OutputSpec:
        if isinstance(value, OutputSpec):
            return value
        fields = _known_fields(value, where, _OUTPUT_FIELDS, "at least pattern")
        upload = fields.get("upload", "success")
        if upload not in UPLOAD_CONDITIONS:
            raise validation.fail(f"{where}.upload", f"must be success, failure or completion, got {upload!r}")
        pattern = validation.text(fields.get("pattern"), f"{where}.pattern", required=True)
        assert pattern is not None
        return cls(
            pattern=pattern,
            container=validation.container_name(fields.get("container"), f"{where}.container"),
            path=validation.relative_path(fields.get("path"), f"{where}.path"),
            upload=upload,
            asset=check_asset(fields.get("asset"), f"{where}.asset"),
        )

    def to_sdk(self, container_url: str | None, identity_reference: str | None = None) -> batch_models.OutputFile:
        destination = batch_models.OutputFileBlobContainerDestination(
            container_url=container_url or "",
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


def _items(values: Any, where: str, what: str) -> list[Any]:
    if values is None:
        return []
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, (list, tuple)):
        raise validation.fail(where, f"must be a list of {what}, got {type(values).__name__} {values!r}")
    return list(values)


def parse_inputs(values: Any, where: str) -> tuple[InputSpec, ...]:
    return tuple(
        InputSpec.parse(item, f"{where}[{index}]") for index, item in enumerate(_items(values, where, "inputs"))
    )


def parse_outputs(values: Any, where: str) -> tuple[OutputSpec, ...]:
    items = _items(values, where, "outputs")
    return tuple(OutputSpec.parse(item, f"{where}[{index}]") for index, item in enumerate(items))
