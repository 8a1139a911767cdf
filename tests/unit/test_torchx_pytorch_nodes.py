"""PyTorch-ready nodes and Azure named resources of the ``azure_batch`` TorchX scheduler (pure: no service)."""

from __future__ import annotations

import pytest

pytest.importorskip("torchx.specs", reason="the [torchx] extra is not installed")

from torchx.components.dist import ddp
from torchx.specs import AppDef, Resource, Role, resource

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.specs.options import ContainerOptions
from airflow_provider_azbatch.torchx.mapping import job_request
from airflow_provider_azbatch.torchx.options import AzureBatchOpts, TorchXOptionError
from airflow_provider_azbatch.torchx.preview import preview

# dist.ddp, as the command writes it, warns that it is deprecated.
pytestmark = pytest.mark.filterwarnings("ignore:.*dist.ddp is deprecated:UserWarning")
INFINIBAND = "--device=/dev/infiniband --ulimit memlock=-1 --cap-add=IPC_LOCK --network=host"


def role(name: str = "train", **kwargs) -> Role:
    values = {"name": name, "image": "img:1", "entrypoint": "python", "resource": Resource(cpu=1, gpu=0, memMB=1024)}
    return Role(**{**values, **kwargs})


def request(app: AppDef, **opts):
    return job_request(
        app,
        AzureBatchOpts(**opts),
        job_id="torchx-x-1",
        app_id="azbatch_default:torchx-x-1",
        has_storage=False,
        note=lambda _: None,
    )


def test_named_resources_cover_the_catalog_and_name_their_size():
    a100 = resource(h="azure_nc24ads_a100_v4")
    assert (a100.cpu, a100.gpu, a100.memMB) == (24, 1, 220 * 1024)
    assert a100.capabilities == {"vm_size": "standard_nc24ads_a100_v4"}
    # The sizes with InfiniBand ask for it: their roles get NCCL's set-up.
    assert resource(h="azure_nd96asr_v4").capabilities == {"vm_size": "standard_nd96asr_v4", "infiniband": True}


def test_dist_ddp_with_a_named_resource_dry_runs_to_that_size_with_its_shared_memory():
    app = ddp(script="train.py", j="2x1", h="azure_nc24ads_a100_v4", image="img:1")
    result = request(app)
    assert result.pool.vm_size == "standard_nc24ads_a100_v4"
    shown = preview(result)
    assert shown["pool"]["vmSize"] == "standard_nc24ads_a100_v4"
    assert shown["pool"]["enableInterNodeCommunication"] is True
    (task,) = shown["tasks"]
    # Half the node's 220 GiB: what Linux gives /dev/shm on the node itself; no InfiniBand on an NC size.
    assert task["containerSettings"]["containerRunOptions"] == "--shm-size=110g"
    assert "NCCL_IB_DISABLE" not in {item["name"] for item in task.get("environmentSettings", [])}


def test_an_infiniband_size_gets_the_devices_limits_and_nccl_variable_nccl_needs():
    app = ddp(script="train.py", j="2x8", h="azure_nd96asr_v4", image="img:1")
    shown = preview(request(app))
    assert shown["pool"]["vmSize"] == "standard_nd96asr_v4"
    assert shown["pool"]["enableInterNodeCommunication"] is True
    # GPU sizes get ubuntu-hpc, whose image has the InfiniBand drivers.
    assert shown["pool"]["virtualMachineConfiguration"]["imageReference"]["offer"] == "ubuntu-hpc"
    (task,) = shown["tasks"]
    assert task["containerSettings"]["containerRunOptions"] == f"--shm-size=450g {INFINIBAND}"
    assert {"name": "NCCL_IB_DISABLE", "value": "0"} in task["environmentSettings"]


def test_infiniband_on_a_size_without_it_is_refused_with_the_fix():
    with pytest.raises(TorchXOptionError) as caught:
        request(AppDef("x", roles=[role(resource=resource(h="azure_nc24ads_a100_v4"))]), infiniband=True)
    assert str(caught.value) == (
        "azure_batch run option `infiniband` asks for InfiniBand, but VM size standard_nc24ads_a100_v4 has none: use "
        "a size with InfiniBand (the ND sizes, e.g. standard_nd96asr_v4 or standard_nd96isr_h100_v5), or leave "
        "InfiniBand off (NCCL then uses TCP) (-cfg vm_size=, or a resource such as -h azure_nd96asr_v4)"
    )
    asks = Resource(cpu=1, gpu=0, memMB=1024, capabilities={"infiniband": True})
    with pytest.raises(AzureBatchValidationError, match=r"role 'train' resource.capabilities.infiniband asks for "):
        request(AppDef("x", roles=[role(resource=asks)]))
    # The run option on an InfiniBand size: every role gets it.
    result = request(AppDef("x", roles=[role()]), infiniband=True, vm_size="standard_nd96isr_h100_v5")
    assert INFINIBAND in result.tasks[0]["container_run_options"]


@pytest.mark.parametrize(
    ("opts", "metadata", "expected"),
    [
        ({"shm_size": "16g"}, {}, "--shm-size=16g"),
        ({"shm_size": "host"}, {}, "--ipc=host"),
        ({"shm_size": "none"}, {}, None),
        ({"shm_size": "16g"}, {"azure_batch/shm_size": "512m"}, "--shm-size=512m"),
        # The user's own options say it: no default beside them.
        ({"container_run_options": "--ipc=host"}, {}, "--ipc=host"),
        ({}, {"azure_batch/container_run_options": "--shm-size 1g --ulimit nofile=65536"}, None),
        ({"container_run_options": "--ulimit nofile=65536"}, {}, "--shm-size=2g --ulimit nofile=65536"),
        # An existing pool of an unknown size: the role's memory says, else the node's /dev/shm.
        ({"pool_id": "p"}, {}, "--shm-size=512m"),
    ],
)
def test_shared_memory_and_run_options_per_app_and_per_role(opts, metadata, expected):
    result = request(AppDef("x", roles=[role(metadata=metadata)]), **opts)
    own = metadata.get("azure_batch/container_run_options")
    assert result.tasks[0].get("container_run_options") == (expected if own is None else own)


def test_each_role_has_its_own_container_options():
    roles = [role("a", metadata={"azure_batch/container_run_options": "--ulimit nofile=1"}), role("b")]
    tasks = request(AppDef("x", roles=roles), shm_size="8g").tasks
    assert [task["container_run_options"] for task in tasks] == ["--shm-size=8g --ulimit nofile=1", "--shm-size=8g"]


def test_a_bad_shared_memory_size_is_refused_naming_the_field():
    with pytest.raises(TorchXOptionError) as caught:
        request(AppDef("x", roles=[role()]), shm_size="16 GB")
    assert str(caught.value) == (
        "azure_batch run option `shm_size` is '16 gb': give a size with its unit (e.g. 16g or 512m), or 'host' to "
        "share the node's /dev/shm (--ipc=host); or auto (half the node's memory), or none (Docker's 64 MB)"
    )
    with pytest.raises(AzureBatchValidationError, match=r"role 'train' metadata\['azure_batch/shm_size'\] is 'lots'"):
        request(AppDef("x", roles=[role(metadata={"azure_batch/shm_size": "lots"})]))


def test_max_nodes_must_hold_every_role_at_once():
    roles = [role("trainer", num_replicas=2), role("evaluator", num_replicas=1)]
    with pytest.raises(TorchXOptionError) as caught:
        request(AppDef("x", roles=roles), max_nodes=2)
    assert str(caught.value) == (
        "azure_batch run option `max_nodes` is 2, but the app's roles run at once, one node per replica: "
        "2 (trainer) + 1 (evaluator) = 3 nodes; raise it to 3 or more"
    )
    assert request(AppDef("x", roles=roles), max_nodes=3).pool.max_nodes == 3


def test_the_operators_container_options_give_shared_memory_and_infiniband():
    options = ContainerOptions(image="img:1", shm_size="32g", infiniband=True, run_options="--ulimit nofile=1")
    options.check()
    assert options.all_run_options() == f"--shm-size=32g {INFINIBAND} --ulimit nofile=1"
    assert options.environment() == {"NCCL_IB_DISABLE": "0"}
    with pytest.raises(AzureBatchValidationError, match=r"^containers.shm_size is 'big': give a size with its unit"):
        ContainerOptions(shm_size="big").check()


def test_the_operator_refuses_infiniband_on_a_pool_size_without_it():
    from airflow_provider_azbatch.pools.strategy import BatchPool
    from airflow_provider_azbatch.submission.request import JobRequest

    def job(vm_size: str) -> JobRequest:
        return JobRequest(
            pool=BatchPool.auto({"gpus": 1}, max_nodes=2, vm_size=vm_size),
            command="torchrun train.py",
            containers=ContainerOptions(image="img:1", infiniband=True),
        )

    with pytest.raises(AzureBatchValidationError) as caught:
        job("standard_nc24ads_a100_v4").check(rendered=True)
    assert str(caught.value).startswith(
        "containers.infiniband asks for InfiniBand, but VM size standard_nc24ads_a100_v4 has none: use a size with "
        "InfiniBand (the ND sizes"
    )
    job("standard_nd96asr_v4").check(rendered=True)


def test_roles_of_different_vm_sizes_get_a_job_and_a_pool_each():
    from airflow_provider_azbatch.torchx.mapping import job_requests

    roles = [
        role("trainer", num_replicas=2, resource=resource(h="azure_nc24ads_a100_v4")),
        role("evaluator", resource=resource(h="azure_d4s_v5")),
        role("reporter"),  # names no size: the cheapest of the app's sizes that fits it
    ]
    first, other = job_requests(
        AppDef("x", roles=roles),
        AzureBatchOpts(),
        job_id="torchx-x-1",
        app_id="azbatch_default:torchx-x-1",
        has_storage=False,
        note=lambda _: None,
    )
    assert (first.job_id, other.job_id) == ("torchx-x-1", "torchx-x-1-p2")
    assert (first.pool.vm_size, other.pool.vm_size) == ("standard_nc24ads_a100_v4", "standard_d4s_v5")
    assert [task["id"] for task in first.tasks] == ["trainer"]
    assert [task["id"] for task in other.tasks] == ["evaluator", "reporter"]
    # Each pool holds its own roles at once.
    assert (first.pool.max_nodes, other.pool.max_nodes) == (2, 2)
    roles_json = (
        '[["trainer", "trainer", 2, "python", "torchx-x-1"], ["evaluator", "evaluator", 1, "python", '
        '"torchx-x-1-p2"], ["reporter", "reporter", 1, "python", "torchx-x-1-p2"]]'
    )
    assert first.metadata["torchx-roles"] == other.metadata["torchx-roles"] == roles_json
    assert first.metadata["torchx-jobs"] == '["torchx-x-1-p2"]'
    assert other.metadata["torchx-part-of"] == "torchx-x-1"
    # One pool by name cannot be of two sizes.
    with pytest.raises(AzureBatchValidationError, match="shared_pool is one pool, of one size; leave it out"):
        job_requests(
            AppDef("x", roles=roles[:2]),
            AzureBatchOpts(shared_pool="p"),
            job_id="torchx-x-1",
            app_id="azbatch_default:torchx-x-1",
            has_storage=False,
            note=lambda _: None,
        )


def test_one_job_of_roles_of_different_sizes_is_refused_saying_why():
    # What AzureBatchTorchXOperator maps an app to: one job, on one pool.
    roles = [
        role("trainer", resource=resource(h="azure_nc24ads_a100_v4")),
        role("eval", resource=resource(h="azure_d4s_v5")),
    ]
    with pytest.raises(AzureBatchValidationError) as caught:
        request(AppDef("x", roles=roles))
    assert str(caught.value) == (
        "resource.capabilities.vm_size differs between roles (standard_d4s_v5, standard_nc24ads_a100_v4): one job "
        "runs on one pool, of one size: run the app with the torchx command (a job per size)"
    )
