"""Container images for tasks, and private registry credentials taken from an Airflow connection.

The registry connection: host = registry server (``myregistry.azurecr.io``), login + password, or
instead of a password ``extra.identity_reference`` = the resource id of a user-assigned managed
identity with pull rights. The password goes to the Batch service inside the task (and pool)
definition only; it is registered with the secret masker and never logged, pushed to XCom or put in
trigger kwargs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from azure.batch import models as batch_models

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import ConnectionFields

WORKING_DIRECTORIES = {
    "task": batch_models.ContainerWorkingDirectory.TASK_WORKING_DIRECTORY,
    "image": batch_models.ContainerWorkingDirectory.CONTAINER_IMAGE_DEFAULT,
}


class RegistryConfigError(ValueError):
    """The connection of a container registry (``registry_conn_id``) lacks what a pull needs."""


@dataclass(frozen=True)
class RegistryCredentials:
    server: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    identity_reference: str | None = None

    @classmethod
    def from_connection(cls, conn: ConnectionFields) -> RegistryCredentials:
        conn_id = conn.conn_id
        host = conn.host or ""
        server = (urlsplit(host).netloc or urlsplit(host).path or "").strip("/") if "://" in host else host.strip("/")
        if not server:
            raise RegistryConfigError(
                f"Connection '{conn_id}': host (the registry server, e.g. myregistry.azurecr.io) is missing"
            )
        identity = (conn.extra_dejson or {}).get("identity_reference") or None
        if identity is None and not (conn.login and conn.password):
            raise RegistryConfigError(
                f"Connection '{conn_id}': give login and password, or extra identity_reference (the resource id of "
                "a managed identity allowed to pull from the registry)"
            )
        credentials = cls(server, conn.login or None, conn.password or None, identity)
        if credentials.password:
            from airflow_provider_azbatch.compat import mask_secret

            mask_secret(credentials.password)
        return credentials

    def to_pool_json(self) -> dict[str, Any]:
        """The pool's ``containerRegistries`` entry (REST): lets nodes pre-fetch private images."""
        if self.identity_reference:
            return {"registryServer": self.server, "identityReference": {"resourceId": self.identity_reference}}
        return {"registryServer": self.server, "username": self.username, "password": self.password}

    def to_sdk(self) -> batch_models.ContainerRegistryReference:
        return batch_models.ContainerRegistryReference(
            registry_server=self.server,
            username=None if self.identity_reference else self.username,
            password=None if self.identity_reference else self.password,
            identity_reference=(
                batch_models.BatchNodeIdentityReference(resource_id=self.identity_reference)
                if self.identity_reference
                else None
            ),
        )


def container_settings(
    image: str,
    registry: RegistryCredentials | None,
    run_options: str | None,
    working_directory: str,
) -> batch_models.BatchTaskContainerSettings:
    if working_directory not in WORKING_DIRECTORIES:
        raise ValueError(f"container_working_directory must be 'task' or 'image', got {working_directory!r}")
    return batch_models.BatchTaskContainerSettings(
        image_name=image,
        container_run_options=run_options,
        registry=registry.to_sdk() if registry is not None else None,
        working_directory=WORKING_DIRECTORIES[working_directory],
    )
