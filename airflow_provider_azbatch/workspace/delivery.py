"""How a staged workspace reaches a task: a resource file plus a few shell lines before the command.

On a single-node task the archive is downloaded into the task's working directory and unpacked into
``workspace/`` there. On a multi-node task it is a common resource file, downloaded to the task's shared
directory on every node and unpacked there by the coordination command (which runs on every node); the
primary's working directory gets ``workspace`` as a link to it. Either way ``$AZBATCH_WORKSPACE`` holds the
absolute path (also inside containers, where the task's directories are mapped at the same paths).
"""

from __future__ import annotations

from dataclasses import dataclass

from azure.batch import models as batch_models

from airflow_provider_azbatch.specs.workspace import MOUNT

STAGING_DIR = ".azbatch"
WORKING_DIR = '"$AZ_BATCH_TASK_WORKING_DIR"'
SHARED_DIR = '"$AZ_BATCH_TASK_SHARED_DIR"'
# tar is on every Linux image Batch offers; a slim container image may lack it but has Python. The archive is
# kept: a retry that finds the same directory unpacks it again.
_EXTRACT = (
    'tar -xzf "$A" -C "$W" 2>/dev/null || python3 -c '
    '"import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$A" "$W"'
)


def _unpacking(archive: str, into: str) -> list[str]:
    return [f"A={archive}; W={into}", 'mkdir -p "$W"', _EXTRACT, 'export AZBATCH_WORKSPACE="$W"']


@dataclass(frozen=True)
class StagedWorkspace:
    sha256: str
    archive: str  # the archive's file name
    url: str  # the blob with a read-only SAS: goes into the task definition, nowhere else
    # Where it is staged (lineage names it).
    container: str = ""
    blob: str = ""

    def resource_file(self, *, shared: bool) -> batch_models.ResourceFile:
        """Into the working directory's .azbatch/ (single node), or the shared directory (every node)."""
        return batch_models.ResourceFile(
            http_url=self.url, file_path=self.archive if shared else f"{STAGING_DIR}/{self.archive}"
        )

    def prelude(self) -> str:
        """What runs before a single-node task's command."""
        archive = f"{WORKING_DIR}/{STAGING_DIR}/{self.archive}"
        return "\n".join(["set -e", *_unpacking(archive, f"{WORKING_DIR}/{MOUNT}"), "set +e"])

    def coordination_prelude(self) -> str:
        """What every node of a multi-node task runs before the coordination command."""
        return "\n".join(["set -e", *_unpacking(f"{SHARED_DIR}/{self.archive}", f"{SHARED_DIR}/{MOUNT}"), "set +e"])

    def primary_prelude(self) -> str:
        """What runs before a multi-node task's command, on the primary (unpacked there by the coordination)."""
        return "\n".join(
            [
                f"ln -sfn {SHARED_DIR}/{MOUNT} {WORKING_DIR}/{MOUNT}",
                f"export AZBATCH_WORKSPACE={SHARED_DIR}/{MOUNT}",
            ]
        )
