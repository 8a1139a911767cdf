"""Request models the emulator tests build with the unmodified azure-batch SDK."""

from __future__ import annotations

from azure.batch import models as m

UBUNTU = m.VirtualMachineConfiguration(
    image_reference=m.BatchVmImageReference(
        publisher="canonical", offer="0001-com-ubuntu-server-jammy", sku="22_04-lts"
    ),
    node_agent_sku_id="batch.node.ubuntu 22.04",
)


def pool(pool_id: str, nodes: int = 1, slots: int = 1, **extra) -> m.BatchPoolCreateOptions:
    return m.BatchPoolCreateOptions(
        id=pool_id,
        vm_size="standard_d2s_v3",
        virtual_machine_configuration=UBUNTU,
        target_dedicated_nodes=nodes,
        task_slots_per_node=slots,
        **extra,
    )


def auto_pool_info(nodes: int = 1, slots: int = 1, prefix: str | None = None) -> m.BatchPoolInfo:
    return m.BatchPoolInfo(
        auto_pool_specification=m.BatchAutoPoolSpecification(
            auto_pool_id_prefix=prefix,
            pool_lifetime_option=m.BatchPoolLifetimeOption.JOB,
            pool=m.BatchPoolSpecification(
                vm_size="standard_d2s_v3",
                virtual_machine_configuration=UBUNTU,
                target_dedicated_nodes=nodes,
                task_slots_per_node=slots,
            ),
        )
    )
