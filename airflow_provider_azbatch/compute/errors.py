"""Exceptions of the compute layer.

Every one is a ``ValueError`` so code validating user input (DAG arguments, operator parameters) can
catch a single type; the subclasses let tests and callers tell the causes apart.
"""

from __future__ import annotations


class ComputeSpecError(ValueError):
    """Base class: a resource requirement, catalog or pool setting cannot be honoured."""


class InvalidRequirementsError(ComputeSpecError):
    """A ``ResourceRequirements`` field has a value that can never be satisfied."""


class CatalogError(ComputeSpecError):
    """The VM size catalog file is malformed."""


class UnknownVmSizeError(ComputeSpecError):
    """A VM size name is not in the catalog."""


class NoFittingVmSizeError(ComputeSpecError):
    """No VM size in the catalog satisfies the requirements."""


class VmSizeTooSmallError(ComputeSpecError):
    """A given (existing pool's) VM size does not satisfy the requirements."""


class UnknownImageFamilyError(ComputeSpecError):
    """The image family is not one this layer knows how to map to a Batch image."""


class RetiredImageFamilyError(UnknownImageFamilyError):
    """The image family existed but Azure Batch no longer supports it."""


class InvalidAutoscaleError(ComputeSpecError):
    """An autoscale setting is outside what the Batch service accepts."""


class InvalidPoolSpecError(ComputeSpecError):
    """A pool setting is outside what the Batch service accepts."""
