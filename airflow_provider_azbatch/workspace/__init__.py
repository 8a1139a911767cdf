"""Workspaces: a local directory of code packed once, staged in Blob, unpacked next to every task."""

from airflow_provider_azbatch.specs.workspace import Workspace
from airflow_provider_azbatch.workspace.packing import PackedWorkspace, pack

__all__ = ["PackedWorkspace", "Workspace", "pack"]
