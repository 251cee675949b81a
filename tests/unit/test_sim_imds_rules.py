"""The per-VM metadata services' rules as pure functions: addressing, IMDSv2 tokens, listings,
termination notices, each cloud's required headers."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from wmsim import metadata
from wmsim.aws import imds as imds_ec2
from wmsim.azure import imds as imds_azure
from wmsim.gcp import imds as imds_gce

EC2_VIEW = imds_ec2.Ec2VmView(
    instance_id="i-0123456789abcdef0",
    region="us-east-1",
    availability_zone="us-east-1a",
    image_id="ami-0abcdef1234567890",
    instance_type="m5.large",
    launch_index=2,
    private_ip="10.0.0.5",
    private_hostname="ip-10-0-0-5.ec2.internal",
    public_ip=None,
    public_hostname=None,
    spot=False,
    user_data=b'{"rootUrl": "https://tc.example.test"}',
    document='{"instanceId": "i-0123456789abcdef0"}',
    signature="c2lnbmF0dXJl",
    interruption_at=None,
)
GCE_VIEW = imds_gce.GceVmView(
    instance_id="4300000000000000001",
    name="w-1",
    project="wm-test",
    project_number=42,
    zone="us-central1-a",
    machine_type="e2-small",
    image="projects/debian-cloud/global/images/debian-12",
    network_ip="10.128.0.2",
    external_ip=None,
    attributes={"taskcluster": "{}", "Odd-Key": "x"},
    service_account=None,
    scopes=(),
    preempted=False,
)
AZURE_VIEW = imds_azure.AzureVmView(
    name="vm-w-1",
    resource_id="/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-w-1",
    subscription_id="s",
    resource_group="rg",
    location="eastus",
    vm_id="5c0ffee0-0000-0000-0000-000000000001",
    vm_size="Standard_D2s_v5",
    priority="Spot",
    tags={"root-url": "https://tc.example.test"},
    user_data="",
    os_profile={"adminUsername": "worker", "computerName": "vm-w-1"},
    addresses=(("10.0.0.4", ""),),
    eviction_at=None,
)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/_vm/i-123/latest/user-data", ("i-123", "/latest/user-data")),
        ("/_vm/vm%2Dw/metadata/instance", ("vm-w", "/metadata/instance")),
        ("/_vm/4300/", ("4300", "/")),
        ("/_sim/instances", None),
        ("/latest/user-data", None),
    ],
)
def test_a_vm_is_addressed_by_its_path_prefix(path: str, expected: object):
    assert metadata.vm_path(path) == expected


def test_a_base_url_escapes_the_vm_key():
    assert metadata.base_url("http://127.0.0.1:9/", "a/b") == "http://127.0.0.1:9/_vm/a%2Fb"


def test_a_pre_emption_is_announced_only_within_the_clouds_notice():
    now = time.monotonic()
    assert metadata.announced(None, 120) is None
    assert metadata.announced(now + 500, 120) is None
    soon = metadata.announced(now + 60, 120)
    assert soon is not None and 50 < (soon - datetime.now(UTC)).total_seconds() <= 60


def ec2(method: str, path: str, token: str | None, tokens: imds_ec2.Ec2Tokens) -> int:
    headers = {imds_ec2.TOKEN_HEADER: token} if token else {}
    return imds_ec2.answer(EC2_VIEW, tokens, method, path, headers).status


def test_ec2_statuses_follow_imdsv2():
    tokens = imds_ec2.Ec2Tokens()
    token = tokens.issue(EC2_VIEW.instance_id, 60)
    foreign = tokens.issue("i-someone-else", 60)
    table = [
        ("GET", "/latest/meta-data/instance-id", None, 401),
        ("GET", "/latest/meta-data/instance-id", foreign, 401),
        ("GET", "/latest/meta-data/instance-id", token, 200),
        ("POST", "/latest/meta-data/instance-id", token, 405),
        ("GET", "/latest/meta-data/public-ipv4", token, 404),  # no public address
        ("GET", "/latest/meta-data/spot/termination-time", token, 404),
        ("GET", "/latest/user-data", token, 200),
        ("GET", "/latest/dynamic/instance-identity/document", token, 200),
        ("GET", "/latest/nothing", token, 404),
    ]
    assert [ec2(m, p, t, tokens) for m, p, t, _ in table] == [want for *_, want in table]
    put = imds_ec2.answer(EC2_VIEW, tokens, "PUT", "/latest/api/token", {})
    assert put.status == 400  # no TTL header


def test_ec2_listings_and_the_spot_notice():
    tree = imds_ec2.meta_data(EC2_VIEW)
    listing = metadata.tree_answer(tree, "/")
    assert listing is not None and "placement/" in listing.body.decode().splitlines()
    placement = metadata.tree_answer(tree, "placement/")
    assert placement is not None
    assert placement.body.decode().splitlines() == ["availability-zone", "region"]
    when = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)
    noticed = imds_ec2.meta_data(
        imds_ec2.Ec2VmView(**{**EC2_VIEW.__dict__, "interruption_at": when})
    )
    assert noticed["spot/termination-time"] == "2026-12-04T12:00:00Z"
    assert json.loads(noticed["spot/instance-action"])["action"] == "terminate"


def gce(path: str, view: imds_gce.GceVmView = GCE_VIEW, **args: str) -> metadata.MetaAnswer:
    return imds_gce.answer(view, "GET", path, args, {"metadata-flavor": "Google"})


def test_gce_rules():
    assert imds_gce.answer(GCE_VIEW, "GET", "/computeMetadata/v1/instance/id", {}, {}).status == 403
    assert gce("/computeMetadata/v1/instance/id").body == b"4300000000000000001"
    assert gce("/computeMetadata/v1/instance/zone").body == b"projects/42/zones/us-central1-a"
    assert gce("/computeMetadata/v1/instance/attributes/", recursive="true").body == (
        json.dumps({"taskcluster": "{}", "Odd-Key": "x"}).encode()
    )
    no_ip = "/computeMetadata/v1/instance/network-interfaces/0/access-configs/0/external-ip"
    assert gce(no_ip).status == 404
    identity = "/computeMetadata/v1/instance/service-accounts/default/identity"
    assert gce(identity, audience="x").status == 404  # no service account
    preempted = imds_gce.GceVmView(**{**GCE_VIEW.__dict__, "preempted": True})
    assert gce("/computeMetadata/v1/instance/preempted", preempted).body == b"TRUE"
    assert all(("Metadata-Flavor", "Google") in gce(p).headers for p in (identity, no_ip))


def azure(path: str, view: imds_azure.AzureVmView = AZURE_VIEW, **args: str) -> metadata.MetaAnswer:
    return imds_azure.answer(view, "GET", path, args, {"metadata": "true"})


def test_azure_rules():
    version = {"api-version": "2025-04-07"}
    assert imds_azure.answer(AZURE_VIEW, "GET", "/metadata/instance", version, {}).status == 400
    assert azure("/metadata/instance").status == 400  # no api-version
    compute = json.loads(azure("/metadata/instance", **version).body)["compute"]
    assert compute["tagsList"] == [{"name": "root-url", "value": "https://tc.example.test"}]
    assert compute["priority"] == "Spot"
    name = azure("/metadata/instance/compute/name", format="text", **version)
    assert (name.status, name.body) == (200, b"vm-w-1")
    assert azure("/metadata/instance/compute/nothing", **version).status == 404
    quiet = json.loads(azure("/metadata/scheduledevents", **version).body)
    assert quiet["Events"] == []
    evicting = imds_azure.AzureVmView(
        **{**AZURE_VIEW.__dict__, "eviction_at": datetime(2026, 12, 4, tzinfo=UTC)}
    )
    (event,) = json.loads(azure("/metadata/scheduledevents", evicting, **version).body)["Events"]
    assert (event["EventType"], event["Resources"]) == ("Preempt", ["vm-w-1"])
