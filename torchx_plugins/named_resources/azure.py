"""Registers an Azure named resource for every VM size of the provider's catalog (torchx-nightly's
namespace-package plugin channel): ``azure_nc24ads_a100_v4`` is ``standard_nc24ads_a100_v4``'s vCPUs, memory and
GPUs, and names the size, so that ``-h azure_nc24ads_a100_v4`` (or ``resource=``) runs the role on that size.

torchx collects the module's decorated factories (their ``__module__`` must be this module's), made here from
the catalog when torchx first looks a named resource up.
"""

from __future__ import annotations

from collections.abc import Callable

from torchx.plugins import register
from torchx.specs import Resource

from airflow_provider_azbatch.compute.catalog import VmSize, load_catalog

PREFIX = "azure_"


def resource_name(vm_size: str) -> str:
    """``standard_nc24ads_a100_v4`` -> ``azure_nc24ads_a100_v4``."""
    return PREFIX + vm_size.lower().removeprefix("standard_")


def vm_resource(vm: VmSize) -> Resource:
    """A whole node of the size: the scheduler picks the size from the vm_size capability."""
    capabilities: dict[str, object] = {"vm_size": vm.name}
    if vm.infiniband:
        # NCCL across nodes goes over InfiniBand on the sizes that have it (the scheduler sets the container up).
        capabilities["infiniband"] = True
    return Resource(cpu=vm.vcpus, gpu=vm.gpus, memMB=int(vm.memory_gib * 1024), capabilities=capabilities)


def _factory(vm: VmSize) -> Callable[[], Resource]:
    def factory() -> Resource:
        return vm_resource(vm)

    factory.__module__ = __name__
    factory.__qualname__ = resource_name(vm.name)
    return factory


# The decorator sets each registered factory as this module's attribute of the resource's name (the name differs
# from the function's), where torchx's scan finds it.
for _vm in load_catalog():
    register.named_resource(name=resource_name(_vm.name))(_factory(_vm))
