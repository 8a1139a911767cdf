"""Pool, job and task settings an enterprise pool has: accepted, checked as the REST reference says, returned on GET.

Networks, mounts, user accounts, data disks, gallery images, identities, scheduling policy and job priority, sent
by the unmodified SDK and read back with it (secrets never returned).
"""

from __future__ import annotations

import uuid

import pytest
from azure.batch import models as m
from azure.core.exceptions import HttpResponseError

from local_azure_batch.account import DEV_SUBSCRIPTION_ID
from tests import sdk_models

SUBNET = (
    f"/subscriptions/{DEV_SUBSCRIPTION_ID}/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/corp/"
    "subnets/batch"
)
PUBLIC_IP = f"/subscriptions/{DEV_SUBSCRIPTION_ID}/resourceGroups/net/providers/Microsoft.Network/publicIPAddresses/ip1"
GALLERY = (
    f"/subscriptions/{DEV_SUBSCRIPTION_ID}/resourceGroups/images/providers/Microsoft.Compute/galleries/corp/images/"
    "ubuntu/versions/1.2.0"
)


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _pool_body(pool_id: str, **fields) -> dict:
    body = {
        "id": pool_id,
        "vmSize": "standard_d2s_v3",
        "virtualMachineConfiguration": {
            "imageReference": {"publisher": "canonical", "offer": "ubuntu-24_04-lts", "sku": "server"},
            "nodeAgentSKUId": "batch.node.ubuntu 24.04",
        },
        "targetDedicatedNodes": 0,
    }
    for name, value in fields.items():
        if name in ("imageReference", "dataDisks"):
            body["virtualMachineConfiguration"][name] = value
        else:
            body[name] = value
    return body


def _refused(client, body: dict) -> dict[str, str]:
    with pytest.raises(HttpResponseError) as caught:
        client.create_pool(m.BatchPoolCreateOptions(body))
    assert caught.value.status_code == 400
    values = {item.key: item.value for item in caught.value.model.error_values or []}
    values["code"] = caught.value.error.code
    return values


def test_an_enterprise_pool_is_returned_as_sent_with_the_services_defaults_and_no_secrets(batch_client):
    pool_id = _id("corp")
    body = _pool_body(
        pool_id,
        imageReference={"virtualMachineImageId": GALLERY},
        dataDisks=[{"lun": 0, "diskSizeGB": 128}],
        networkConfiguration={
            "subnetId": SUBNET,
            "publicIPAddressConfiguration": {"provision": "nopublicipaddresses"},
            "enableAcceleratedNetworking": True,
        },
        mountConfiguration=[
            {
                "azureBlobFileSystemConfiguration": {
                    "accountName": "corpblobs",
                    "containerName": "datasets",
                    "accountKey": "secret-key==",
                    "relativeMountPath": "data",
                }
            },
            {
                "azureFileShareConfiguration": {
                    "accountName": "corpfiles",
                    "azureFileUrl": "https://corpfiles.file.core.windows.net/refs",
                    "accountKey": "file-key==",
                    "relativeMountPath": "refs",
                    "mountOptions": "-o vers=3.0",
                }
            },
            {"nfsMountConfiguration": {"source": "10.1.0.4:/exports", "relativeMountPath": "nfs"}},
        ],
        userAccounts=[
            {
                "name": "builder",
                "password": "pw-1",
                "elevationLevel": "admin",
                "linuxUserConfiguration": {"uid": 1100, "gid": 1100},
            },
            {"name": "reader", "password": "pw-2"},
        ],
        startTask={"commandLine": "/bin/sh -c true", "userIdentity": {"autoUser": {"elevationLevel": "admin"}}},
        taskSchedulingPolicy={"nodeFillType": "pack", "jobDefaultOrder": "creationtime"},
    )
    batch_client.create_pool(m.BatchPoolCreateOptions(body))
    pool = batch_client.get_pool(pool_id).as_dict()
    assert pool["virtualMachineConfiguration"]["imageReference"] == {"virtualMachineImageId": GALLERY}
    assert pool["virtualMachineConfiguration"]["dataDisks"] == [
        {"lun": 0, "diskSizeGB": 128, "caching": "none", "managedDisk": {"storageAccountType": "standard_lrs"}}
    ]
    assert pool["networkConfiguration"] == {
        "subnetId": SUBNET,
        "publicIPAddressConfiguration": {"provision": "nopublicipaddresses"},
        "enableAcceleratedNetworking": True,
        "dynamicVNetAssignmentScope": "none",
    }
    assert pool["mountConfiguration"] == [
        {
            "azureBlobFileSystemConfiguration": {
                "accountName": "corpblobs",
                "containerName": "datasets",
                "relativeMountPath": "data",
            }
        },
        {
            "azureFileShareConfiguration": {
                "accountName": "corpfiles",
                "azureFileUrl": "https://corpfiles.file.core.windows.net/refs",
                "relativeMountPath": "refs",
                "mountOptions": "-o vers=3.0",
            }
        },
        {"nfsMountConfiguration": {"source": "10.1.0.4:/exports", "relativeMountPath": "nfs"}},
    ]
    assert pool["userAccounts"] == [
        {"name": "builder", "elevationLevel": "admin", "linuxUserConfiguration": {"uid": 1100, "gid": 1100}},
        {"name": "reader", "elevationLevel": "nonadmin"},
    ]
    assert pool["startTask"]["userIdentity"] == {"autoUser": {"scope": "pool", "elevationLevel": "admin"}}
    assert pool["taskSchedulingPolicy"] == {"nodeFillType": "Pack", "jobDefaultOrder": "creationtime"}
    batch_client.begin_delete_pool(pool_id, polling_interval=1).result()


@pytest.mark.parametrize(
    "image",
    [
        {"sharedGalleryImageId": "/SharedGalleries/corp-1/Images/ubuntu/Versions/latest"},
        {"communityGalleryImageId": "/CommunityGalleries/pub-2/Images/ubuntu/Versions/1.0.0"},
        {"virtualMachineImageId": GALLERY.rsplit("/versions/", 1)[0]},
        {"publisher": "canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "24.04.202611010"},
    ],
)
def test_gallery_and_pinned_images_are_accepted(batch_client, image):
    pool_id = _id("img")
    batch_client.create_pool(m.BatchPoolCreateOptions(_pool_body(pool_id, imageReference=image)))
    assert batch_client.get_pool(pool_id).as_dict()["virtualMachineConfiguration"]["imageReference"] == image
    batch_client.begin_delete_pool(pool_id, polling_interval=1).result()


@pytest.mark.parametrize(
    ("fields", "name", "reason"),
    [
        (
            {
                "networkConfiguration": {
                    "subnetId": SUBNET.replace(DEV_SUBSCRIPTION_ID, "00000000-0000-0000-0000-000000000000")
                }
            },
            "subnetId",
            "The specified subnetId is in a different subscription and cannot be used with the current Batch account "
            f"in subscription {DEV_SUBSCRIPTION_ID}",
        ),
        ({"networkConfiguration": {"subnetId": "corp/batch"}}, "subnetId", "The subnet id must be of the form"),
        (
            {"networkConfiguration": {"publicIPAddressConfiguration": {"provision": "nopublicipaddresses"}}},
            "networkConfiguration.publicIPAddressConfiguration.provision",
            "A pool without Batch managed public IP addresses must be in a virtual network: specify subnetId.",
        ),
        (
            {
                "networkConfiguration": {
                    "subnetId": SUBNET,
                    "publicIPAddressConfiguration": {"provision": "usermanaged"},
                }
            },
            "networkConfiguration.publicIPAddressConfiguration.ipAddressIds",
            None,
        ),
        (
            {
                "networkConfiguration": {
                    "subnetId": SUBNET,
                    "publicIPAddressConfiguration": {"ipAddressIds": [PUBLIC_IP]},
                }
            },
            "networkConfiguration.publicIPAddressConfiguration.ipAddressIds",
            "ipAddressIds can only be given when provision is usermanaged.",
        ),
        (
            {
                "networkConfiguration": {
                    "endpointConfiguration": {
                        "inboundNATPools": [
                            {
                                "name": "ssh",
                                "protocol": "tcp",
                                "backendPort": 22,
                                "frontendPortRangeStart": 15000,
                                "frontendPortRangeEnd": 15010,
                            }
                        ]
                    }
                }
            },
            "networkConfiguration.endpointConfiguration.inboundNATPools[0].frontendPortRangeEnd",
            "Each range must contain at least 40 ports.",
        ),
        (
            {"imageReference": {"virtualMachineImageId": GALLERY.replace("galleries", "gallery")}},
            "virtualMachineImageId",
            "The specified resource id must be of the format /subscriptions/{subscriptionId}/resourceGroups/",
        ),
        (
            {"imageReference": {"virtualMachineImageId": GALLERY, "publisher": "canonical"}},
            "virtualMachineConfiguration.imageReference.virtualMachineImageId",
            "Specify either publisher, offer, sku and version, or one of virtualMachineImageId",
        ),
        (
            {
                "mountConfiguration": [
                    {
                        "azureBlobFileSystemConfiguration": {
                            "accountName": "a",
                            "containerName": "c",
                            "relativeMountPath": "m",
                            "accountKey": "k",
                            "sasKey": "s",
                        }
                    }
                ]
            },
            "mountConfiguration[0].azureBlobFileSystemConfiguration",
            "accountKey, sasKey and identityReference are mutually exclusive and one of them must be given.",
        ),
        (
            {
                "mountConfiguration": [
                    {"nfsMountConfiguration": {"source": "h:/a", "relativeMountPath": "m"}},
                    {"nfsMountConfiguration": {"source": "h:/b", "relativeMountPath": "m"}},
                ]
            },
            "mountConfiguration[1].nfsMountConfiguration.relativeMountPath",
            "Each mount needs a relativeMountPath of its own.",
        ),
        (
            {"userAccounts": [{"name": "a", "password": "p"}, {"name": "A", "password": "q"}]},
            "userAccounts[1].name",
            "User account names within a pool must be unique.",
        ),
        (
            {"userAccounts": [{"name": "a", "password": "p", "linuxUserConfiguration": {"uid": 5}}]},
            "userAccounts[0].linuxUserConfiguration",
            "The uid and gid properties must be specified together.",
        ),
        (
            {"dataDisks": [{"lun": 64, "diskSizeGB": 1}]},
            "virtualMachineConfiguration.dataDisks[0].lun",
            "The value must be at most 63.",
        ),
        (
            {"startTask": {"commandLine": "true", "userIdentity": {"username": "ghost"}}},
            "startTask.userIdentity.username",
            "The user is not one of the pool's userAccounts.",
        ),
        (
            {"startTask": {"commandLine": "true", "userIdentity": {"username": "a", "autoUser": {}}}},
            "startTask.userIdentity",
            "The userName and autoUser properties are mutually exclusive; you must specify one but not both.",
        ),
        (
            {"startTask": {"commandLine": "true", "userIdentity": {"autoUser": {"elevationLevel": "root"}}}},
            "startTask.userIdentity.autoUser.elevationLevel",
            "The value must be one of: nonadmin, admin.",
        ),
        (
            {"taskSchedulingPolicy": {"nodeFillType": "tight"}},
            "taskSchedulingPolicy.nodeFillType",
            "The value must be one of: Spread, Pack.",
        ),
    ],
)
def test_what_the_rest_reference_forbids_is_refused_naming_the_property(batch_client, fields, name, reason):
    values = _refused(batch_client, _pool_body(_id("bad"), **fields))
    assert values["PropertyName"] == name
    if reason is None:
        assert values["code"] == "MissingRequiredProperty"
    else:
        assert values["code"] == "InvalidPropertyValue"
        assert values["Reason"].startswith(reason)


def test_job_priority_and_network_and_task_identities_are_returned(batch_client):
    job_id = _id("prio")
    batch_client.create_job(
        m.BatchJobCreateOptions(
            id=job_id,
            pool_info=m.BatchPoolInfo(pool_id="nowhere"),
            priority=900,
            network_configuration=m.BatchJobNetworkConfiguration(subnet_id=SUBNET, skip_withdraw_from_vnet=True),
        )
    )
    job = batch_client.get_job(job_id)
    assert job.priority == 900
    assert job.network_configuration.subnet_id == SUBNET
    batch_client.create_task(
        job_id,
        m.BatchTaskCreateOptions(
            id="t",
            command_line="true",
            user_identity=m.UserIdentity(auto_user=m.AutoUserSpecification(scope="task", elevation_level="admin")),
        ),
    )
    batch_client.create_task(job_id, m.BatchTaskCreateOptions(id="u", command_line="true"))
    identities = {task.id: task.as_dict()["userIdentity"] for task in batch_client.list_tasks(job_id)}
    assert identities == {
        "t": {"autoUser": {"scope": "task", "elevationLevel": "admin"}},
        "u": {"autoUser": {"scope": "pool", "elevationLevel": "nonadmin"}},
    }
    with pytest.raises(HttpResponseError) as caught:
        batch_client.create_job(
            m.BatchJobCreateOptions(id=_id("p"), pool_info=m.BatchPoolInfo(pool_id="x"), priority=1001)
        )
    assert caught.value.status_code == 400
    assert {item.key: item.value for item in caught.value.model.error_values}["PropertyName"] == "priority"
    batch_client.begin_delete_job(job_id, polling_interval=1).result()


def test_an_auto_pool_is_checked_like_a_pool(batch_client):
    pool_info = sdk_models.auto_pool_info()
    spec = pool_info.auto_pool_specification.pool.as_dict()
    spec["networkConfiguration"] = {"publicIPAddressConfiguration": {"provision": "nopublicipaddresses"}}
    with pytest.raises(HttpResponseError) as caught:
        batch_client.create_job(
            m.BatchJobCreateOptions(
                {
                    "id": _id("auto"),
                    "poolInfo": {"autoPoolSpecification": {"poolLifetimeOption": "job", "pool": spec}},
                }
            )
        )
    values = {item.key: item.value for item in caught.value.model.error_values}
    assert (
        values["PropertyName"]
        == "poolInfo.autoPoolSpecification.pool.networkConfiguration.publicIPAddressConfiguration.provision"
    )
