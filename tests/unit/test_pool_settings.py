"""Pools the provider creates: what their body is built from, what is refused, and how an existing one compares."""

from __future__ import annotations

import pytest

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.pools import (
    BatchPool,
    BlobMount,
    CifsMount,
    DataDisk,
    FileShareMount,
    NfsMount,
    PoolImage,
    PoolNetwork,
    PoolStrategyError,
    PoolUser,
    RunAs,
    StartTask,
)
from airflow_provider_azbatch.pools.comparison import SPEC_METADATA_KEY, spec_differences, spec_hash
from airflow_provider_azbatch.pools.mounts import LoginCredentials, StorageCredentials
from airflow_provider_azbatch.pools.strategy import PoolSecrets

SUBNET = "/subscriptions/s1/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/corp/subnets/batch"
OTHER_SUBNET = SUBNET.replace("/batch", "/batch-2")
PUBLIC_IP = "/subscriptions/s1/resourceGroups/net/providers/Microsoft.Network/publicIPAddresses/ip1"
GALLERY = (
    "/subscriptions/s1/resourceGroups/images/providers/Microsoft.Compute/galleries/corp/images/ubuntu/versions/1.0.0"
)


def _refused(make) -> str:
    with pytest.raises(PoolStrategyError) as info:
        make()
    return str(info.value)


def test_a_vnet_pool_from_a_gallery_image_with_mounts_users_disks_and_an_elevated_start_task():
    pool = BatchPool.shared(
        "corp",
        {"cpus": 2},
        vm_size="standard_d4s_v5",
        image=PoolImage.gallery(GALLERY, node_agent_sku_id="batch.node.ubuntu 24.04"),
        network=PoolNetwork(subnet_id=SUBNET, public_ips="none", accelerated_networking=True),
        mounts=[
            FileShareMount("https://corpdata.file.core.windows.net/refs", "refs", options="-o vers=3.0"),
            BlobMount("datasets", "data", conn_id="data_storage", options="-o attr_timeout=240"),
            NfsMount("10.1.0.4:/exports/scratch", "scratch"),
            CifsMount("//files.corp/share", "share", conn_id="smb"),
        ],
        users=[PoolUser("builder", admin=True, uid=1100, gid=1100)],
        data_disks=[DataDisk(0, 256, caching="readonly", storage="premium_lrs")],
        start_task="mkdir -p /mnt/data && mount /dev/disk/azure/scsi1/lun0 /mnt/data",
        fill="pack",
        job_order="creationtime",
        metadata={"team": "ml"},
        pool_overrides={
            "resizeTimeout": "PT30M",
            "virtualMachineConfiguration": {"securityProfile": {"encryptionAtHost": True}},
        },
    )
    secrets = PoolSecrets(
        mounts=[
            StorageCredentials("corpdata", key="filekey=="),
            StorageCredentials("corpblobs", sas="?sv=2025&sig=x"),
            None,
            LoginCredentials("svc", "smbpass"),
        ],
        passwords={"builder": "userpass"},
    )
    body = pool.pool_body(containers=False, multi_node=1, secrets=secrets)
    assert body["vmSize"] == "standard_d4s_v5"
    assert body["virtualMachineConfiguration"] == {
        "imageReference": {"virtualMachineImageId": GALLERY},
        "nodeAgentSKUId": "batch.node.ubuntu 24.04",
        "dataDisks": [
            {"lun": 0, "diskSizeGB": 256, "caching": "readonly", "managedDisk": {"storageAccountType": "premium_lrs"}}
        ],
        "securityProfile": {"encryptionAtHost": True},
    }
    assert body["networkConfiguration"] == {
        "subnetId": SUBNET,
        "publicIPAddressConfiguration": {"provision": "nopublicipaddresses"},
        "enableAcceleratedNetworking": True,
    }
    assert body["mountConfiguration"] == [
        {
            "azureFileShareConfiguration": {
                "accountName": "corpdata",
                "azureFileUrl": "https://corpdata.file.core.windows.net/refs",
                "accountKey": "filekey==",
                "relativeMountPath": "refs",
                "mountOptions": "-o vers=3.0",
            }
        },
        {
            "azureBlobFileSystemConfiguration": {
                "accountName": "corpblobs",
                "containerName": "datasets",
                "relativeMountPath": "data",
                "sasKey": "sv=2025&sig=x",
                "blobfuseOptions": "-o attr_timeout=240",
            }
        },
        {"nfsMountConfiguration": {"source": "10.1.0.4:/exports/scratch", "relativeMountPath": "scratch"}},
        {
            "cifsMountConfiguration": {
                "username": "svc",
                "password": "smbpass",
                "source": "//files.corp/share",
                "relativeMountPath": "share",
            }
        },
    ]
    assert body["userAccounts"] == [
        {
            "name": "builder",
            "password": "userpass",
            "elevationLevel": "admin",
            "linuxUserConfiguration": {"uid": 1100, "gid": 1100},
        }
    ]
    assert body["startTask"] == {
        "commandLine": "/bin/sh -c 'mkdir -p /mnt/data && mount /dev/disk/azure/scsi1/lun0 /mnt/data'",
        "userIdentity": {"autoUser": {"scope": "pool", "elevationLevel": "admin"}},
        "waitForSuccess": True,
        "maxTaskRetryCount": 1,
    }
    assert body["taskSchedulingPolicy"] == {"nodeFillType": "pack", "jobDefaultOrder": "creationtime"}
    assert body["resizeTimeout"] == "PT30M"
    assert body["metadata"] == [{"name": "team", "value": "ml"}, {"name": SPEC_METADATA_KEY, "value": spec_hash(body)}]


def test_the_start_task_can_run_without_elevation_or_as_a_pool_user():
    plain = StartTask("echo hi", run_as="nonadmin", environment={"X": "1"}, max_retries=3, wait_for_success=False)
    assert plain.to_rest() == {
        "commandLine": "/bin/sh -c 'echo hi'",
        "userIdentity": {"autoUser": {"scope": "pool", "elevationLevel": "nonadmin"}},
        "waitForSuccess": False,
        "maxTaskRetryCount": 3,
        "environmentSettings": [{"name": "X", "value": "1"}],
    }
    pool = BatchPool.auto({"cpus": 1}, start_task=StartTask("id", run_as=RunAs(user="ops")), users=[PoolUser("ops")])
    assert pool.pool_body(containers=False, multi_node=1)["startTask"]["userIdentity"] == {"username": "ops"}
    assert _refused(lambda: BatchPool.auto({"cpus": 1}, start_task=StartTask("id", run_as=RunAs(user="ops")))) == (
        "start_task.run_as names the user 'ops', which is not one of the pool's users: add PoolUser('ops') to users"
    )


def test_a_user_without_a_password_connection_gets_a_random_one_each_time():
    pool = BatchPool.auto({"cpus": 1}, users=[PoolUser("ops")])
    first = pool.pool_body(containers=False, multi_node=1)
    second = pool.pool_body(containers=False, multi_node=1)
    assert first["userAccounts"][0]["password"] != second["userAccounts"][0]["password"]
    # Passwords stay out of the specification hash: the same pool either way.
    assert spec_hash(first) == spec_hash(second)


def test_metadata_is_sent_and_its_reserved_name_refused():
    body = BatchPool.auto({"cpus": 1}, metadata={"owner": "data-eng"}).pool_body(containers=False, multi_node=1)
    assert body["metadata"][0] == {"name": "owner", "value": "data-eng"}
    assert _refused(lambda: BatchPool.auto({"cpus": 1}, metadata={SPEC_METADATA_KEY: "x"})) == (
        "metadata['azbatch-pool-spec'] is set by the provider itself: use another name"
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: PoolNetwork(public_ips="none"),
            "network: nodes without public IP addresses need a virtual network (the "
            "Batch docs: create the pool in an Azure virtual network): give subnet_id",
        ),
        (
            lambda: PoolNetwork(public_ips=[PUBLIC_IP]),
            "network: public IP addresses of your own need a virtual network",
        ),
        (lambda: PoolNetwork(subnet_id="corp/batch"), "network.subnet_id 'corp/batch' is not a subnet id"),
        (
            lambda: PoolNetwork(subnet_id=SUBNET, public_ips="some"),
            "network.public_ips must be 'batch', 'none' or a list",
        ),
        (
            lambda: BatchPool.shared(
                "p", {"cpus": 1}, max_nodes=150, network=PoolNetwork(SUBNET, public_ips=[PUBLIC_IP])
            ),
            "network.public_ips lists 1 public IP(s), enough for 100 nodes, but the pool may grow to max_nodes=150: "
            "give at "
            "least 2",
        ),
        (
            lambda: BatchPool.shared(
                "p",
                {"cpus": 1},
                image=PoolImage.marketplace(
                    "microsoftwindowsserver",
                    "windowsserver",
                    "2022-datacenter",
                    node_agent_sku_id="batch.node.windows amd64",
                ),
            ),
            "image microsoftwindowsserver:windowsserver:2022-datacenter:latest (batch.node.windows amd64): "
            "Windows pools "
            "are not supported: this provider hands every command",
        ),
        (
            lambda: BatchPool.shared("p", {"cpus": 1}, vm_size="Standard D4s v5"),
            "vm_size must be an Azure VM size name",
        ),
        (
            lambda: BatchPool.shared("p", {"cpus": 8}, vm_size="standard_d2s_v3"),
            "vm_size standard_d2s_v3 (2 vCPU, 8 GiB, 0 GPU) does not fit a task with cpus=8",
        ),
        (
            lambda: BatchPool.shared("p", {"cpus": 1}, mounts=[NfsMount("h:/a", "x"), NfsMount("h:/b", "x/")]),
            "mounts[1].path 'x' is also mounts[0].path: each mount needs its own",
        ),
        (lambda: BlobMount("Data", "d"), "mounts: BlobMount.container 'Data' is not a Blob container name"),
        (lambda: NfsMount("h:/a", "../up"), "mounts: NfsMount.path '../up' must be relative"),
        (
            lambda: FileShareMount("http://a.file.core.windows.net/s", "s"),
            "mounts: FileShareMount.url 'http://a.file.core.windows.net/s' is not a share URL",
        ),
        (
            lambda: BatchPool.shared("p", {"cpus": 1}, data_disks=[DataDisk(0, 10), DataDisk(0, 20)]),
            "data_disks[1].lun 0 is also data_disks[0].lun",
        ),
        (lambda: BatchPool.shared("p", {"cpus": 1}, fill="tight"), "fill must be 'spread' or 'pack', got 'tight'"),
        (
            lambda: BatchPool.shared("p", {"cpus": 1}, pool_overrides={"networkConfiguration": {"subnetId": SUBNET}}),
            "pool_overrides.networkConfiguration.subnetId is set by the provider (the subnet): use "
            "network=PoolNetwork(subnet_id=)",
        ),
        (
            lambda: BatchPool.shared("p", {"cpus": 1}, pool_overrides={"startTask": {"userIdentity": {}}}),
            "pool_overrides.startTask.userIdentity is set by the provider (who runs the start task): use "
            "StartTask(run_as=)",
        ),
        (
            lambda: BatchPool.shared("p", {"cpus": 1}, pool_overrides={"resizeTimout": "PT1H"}),
            "pool_overrides.resizeTimout is not a field of BatchPoolCreateOptions: did you mean 'resizeTimeout'?",
        ),
        (
            lambda: BatchPool.auto({"cpus": 1}, pool_overrides={"autoScaleFormula": "$TargetDedicatedNodes = 1;"}),
            "pool_overrides.autoScaleFormula needs autoscale=True",
        ),
        (
            lambda: BatchPool.shared(
                "p",
                {"cpus": 1},
                pool_overrides={
                    "virtualMachineConfiguration": {
                        "diskEncryptionConfiguration": {
                            "customerManagedKey": {"identityReference": {"resourceId": "/x"}}
                        }
                    }
                },
            ),
            "pool_overrides.virtualMachineConfiguration.diskEncryptionConfiguration.customerManagedKey."
            "identityReference "
            "cannot work on a pool this provider creates",
        ),
    ],
)
def test_what_cannot_work_is_refused_when_the_dag_is_parsed(make, message):
    assert _refused(make).startswith(message)


def test_a_size_the_catalog_does_not_know_is_taken_as_named():
    body = BatchPool.shared("p", vm_size="standard_hb176rs_v4", autoscale=False).pool_body(
        containers=False, multi_node=1
    )
    assert (body["vmSize"], body["taskSlotsPerNode"]) == ("standard_hb176rs_v4", 1)


def test_a_container_task_needs_an_image_with_a_container_runtime():
    image = PoolImage.gallery(GALLERY, node_agent_sku_id="batch.node.ubuntu 24.04")
    pool = BatchPool.shared("p", {"cpus": 1}, image=image)
    assert _refused(lambda: pool.pool_body(containers=True, multi_node=1)).startswith(
        "the tasks run in containers, but image"
    )


def test_run_as_forms():
    assert RunAs.parse("admin", "run_as").to_rest() == {"autoUser": {"scope": "pool", "elevationLevel": "admin"}}
    assert RunAs.parse({"elevation": "admin", "scope": "task"}, "tasks[0].run_as").to_rest() == {
        "autoUser": {"scope": "task", "elevationLevel": "admin"}
    }
    assert RunAs.parse({"user": "ops"}, "run_as").to_rest() == {"username": "ops"}
    with pytest.raises(AzureBatchValidationError) as info:
        RunAs.parse("root", "tasks[1].run_as")
    assert str(info.value) == (
        "tasks[1].run_as must be 'admin', 'nonadmin', RunAs(elevation, scope) or RunAs(user=<pool user>), got 'root'"
    )
    with pytest.raises(AzureBatchValidationError) as info:
        RunAs.parse({"elevation": "admin", "scope": "job"}, "tasks[1].run_as")
    assert str(info.value) == "tasks[1].run_as.scope must be 'pool' or 'task', got 'job'"


# -- comparing with an existing pool --------------------------------------------------------------------
def _as_the_service_returns(body: dict) -> dict:
    """What GET returns for a pool created from ``body``: no secrets, some defaults filled in."""
    import copy

    from airflow_provider_azbatch.pools.mounts import SECRET_KEYS

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in SECRET_KEYS}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    out = strip(copy.deepcopy(body))
    out["id"] = "p"
    out["resizeTimeout"] = "PT15M"
    out.setdefault("taskSchedulingPolicy", {"nodeFillType": "Spread"})
    if "networkConfiguration" in out:
        out["networkConfiguration"]["dynamicVNetAssignmentScope"] = "none"
    return out


def _pool(**kwargs) -> BatchPool:
    return BatchPool.shared("p", {"cpus": 1}, autoscale=False, **kwargs)


def _body(pool: BatchPool) -> dict:
    return pool.pool_body(containers=False, multi_node=1, secrets=PoolSecrets(mounts=[StorageCredentials("acct", "k")]))


def test_the_same_pool_as_the_service_returns_it_is_not_different():
    pool = _pool(network=PoolNetwork(SUBNET), mounts=[BlobMount("data", "data")], start_task="true")
    assert spec_differences(_as_the_service_returns(_body(pool)), _body(pool)) == []


def test_a_pool_with_another_subnet_is_different():
    existing = _as_the_service_returns(_body(_pool(network=PoolNetwork(SUBNET))))
    assert spec_differences(existing, _body(_pool(network=PoolNetwork(OTHER_SUBNET)))) == [
        f"networkConfiguration.subnetId is {SUBNET!r}, this task wants {OTHER_SUBNET!r}"
    ]


def test_a_pool_with_another_image_version_is_different():
    old = PoolImage.marketplace(
        "canonical", "ubuntu-24_04-lts", "server", version="24.04.1", node_agent_sku_id="batch.node.ubuntu 24.04"
    )
    new = PoolImage.marketplace(
        "canonical", "ubuntu-24_04-lts", "server", version="24.04.2", node_agent_sku_id="batch.node.ubuntu 24.04"
    )
    existing = _as_the_service_returns(_body(_pool(image=old)))
    assert spec_differences(existing, _body(_pool(image=new))) == [
        "virtualMachineConfiguration.imageReference.version is '24.04.1', this task wants '24.04.2'"
    ]


def test_a_pool_with_another_mount_or_none_is_different():
    existing = _as_the_service_returns(_body(_pool(mounts=[BlobMount("data", "data")])))
    assert spec_differences(existing, _body(_pool(mounts=[BlobMount("models", "data")]))) == [
        "mountConfiguration is [{'azureBlobFileSystemConfiguration': {'accountName': 'acct', 'containerName': 'data', "
        "'relativeMountPath': 'data'}}], this task wants [{'azureBlobFileSystemConfiguration': {'accountName': 'acct', "
        "'containerName': 'models', 'relativeMountPath': 'data'}}]"
    ]
    assert spec_differences(existing, _body(_pool())) == [
        "mountConfiguration: the pool has mounts, this task wants none"
    ]


def test_a_difference_the_service_cannot_show_is_found_by_the_specification_hash():
    existing = _as_the_service_returns(_body(_pool(pool_overrides={"displayName": "GPU pool"})))
    existing.pop("displayName")  # say the service did not return it
    message = spec_differences(existing, _body(_pool()))
    assert len(message) == 1
    assert message[0].startswith("it was created with another specification (azbatch-pool-spec sha256:")


def test_a_rotated_key_is_the_same_pool():
    pool = _pool(mounts=[BlobMount("data", "data")])
    old = pool.pool_body(
        containers=False, multi_node=1, secrets=PoolSecrets(mounts=[StorageCredentials("acct", "old")])
    )
    new = pool.pool_body(
        containers=False, multi_node=1, secrets=PoolSecrets(mounts=[StorageCredentials("acct", "new")])
    )
    assert spec_differences(_as_the_service_returns(old), new) == []
