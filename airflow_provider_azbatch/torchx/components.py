"""An AppDef from a TorchX component name and its command-line arguments, as ``torchx run`` makes it."""

from __future__ import annotations

from collections.abc import Sequence

from torchx.specs import AppDef
from torchx.specs.builders import materialize_appdef
from torchx.specs.finder import ComponentNotFoundException, ComponentValidationException, get_component

from airflow_provider_azbatch.exceptions import AzureBatchValidationError


def materialize(component: str, args: Sequence[str]) -> AppDef:
    """``component`` (``dist.torchrun``, ``utils.sh``, ``path/to/file.py:fn``) called with ``args`` as the
    CLI would (``["--script", "train.py", "-j", "2x1"]``)."""
    try:
        found = get_component(component)
    except (ComponentNotFoundException, ComponentValidationException) as exc:
        raise AzureBatchValidationError("component", f"{component!r} cannot be used: {exc}") from None
    try:
        return materialize_appdef(found.fn, [str(arg) for arg in args])
    except SystemExit:
        # argparse exits on bad arguments (after printing why to stderr).
        raise AzureBatchValidationError(
            "component_args", f"{list(args)!r} are not arguments of {component} (its usage is in the log above)"
        ) from None
    except ValueError as exc:  # a value of the wrong form (a dict argument's "k=v,k=v", a number)
        raise AzureBatchValidationError("component_args", f"cannot be given to {component}: {exc}") from None
