"""Each simulated cloud serves every VM's metadata at `<endpoint>/_vm/<key>/...`, with the
paths, headers and status codes worker-runner meets on the real cloud, and serves exactly what
the VM was created with (user data, metadata items, tags). Requests are plain HTTP, as
worker-runner makes them."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import boto3
import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from tests.fixtures.sim_ec2 import EC2_REGION
from tests.fixtures.sim_gce import GCE_PROJECT, GCE_ZONE
from tests.support.sim_vms import SERVICE_ACCOUNT, azure_vm, gce_insert
from wmsim.aws.ec2 import SimEc2
from wmsim.azure.arm import SimArm
from wmsim.control import metadata_base_url
from wmsim.gcp.gce import SimGce
from wmsim.gcp.identity import service_account_id

ROOT_URL = "https://tc.example.test"
BOOT_DATA = {
    "rootUrl": ROOT_URL,
    "workerPoolId": "proj/ci",
    "providerId": "aws-main",
    "workerGroup": EC2_REGION,
    "launchConfigId": "lc-1",
    "workerConfig": {"genericWorker": {"config": {}}},
}
GCE_BOOT_DATA = {**BOOT_DATA, "workerGroup": GCE_ZONE}


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: Mapping[str, str]

    @property
    def text(self) -> str:
        return self.body.decode()

    def json(self) -> object:
        return json.loads(self.body)


def http(
    url: str,
    headers: Mapping[str, str] | None = None,
    method: str = "GET",
    ca_bundle: str | None = None,
) -> Reply:
    request = urllib.request.Request(url, method=method, headers=dict(headers or {}))
    context = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else None
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return Reply(answer.status, answer.read(), dict(answer.headers))
    except urllib.error.HTTPError as error:
        return Reply(error.code, error.read(), dict(error.headers))


# -- EC2 -------------------------------------------------------------------------------------


@pytest.fixture
def ec2_vms(sim_ec2: SimEc2) -> Iterator[tuple[str, list[str]]]:
    """Two instances of one RunInstances call with worker-manager's user data, booted."""
    sim_ec2.faults.behaviour.update(boot_s=0)
    client = boto3.client(
        "ec2",
        endpoint_url=sim_ec2.endpoint,
        region_name=EC2_REGION,
        aws_access_key_id="sim",
        aws_secret_access_key="sim",
    )
    reply = client.run_instances(
        ImageId="ami-0abcdef1234567890",
        InstanceType="m5.large",
        MinCount=2,
        MaxCount=2,
        UserData=json.dumps(BOOT_DATA),
    )
    ids = [i["InstanceId"] for i in reply["Instances"]]
    yield metadata_base_url("aws", sim_ec2.endpoint, ids[1]), ids
    client.close()


def imds_token(base: str, ttl: str = "21600") -> Reply:
    return http(
        base + "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": ttl}, method="PUT"
    )


def test_ec2_imdsv2_requires_a_session_token_of_the_same_instance(
    sim_ec2: SimEc2, ec2_vms: tuple[str, list[str]]
):
    base, ids = ec2_vms
    other = metadata_base_url("aws", sim_ec2.endpoint, ids[0])
    token = imds_token(base)
    assert token.status == 200 and token.text

    assert http(base + "/latest/meta-data/instance-id").status == 401
    assert imds_token(base, ttl="0").status == 400
    assert imds_token(base, ttl="21601").status == 400
    assert http(base + "/latest/api/token").status == 405
    stolen = http(other + "/latest/meta-data/instance-id", {"X-aws-ec2-metadata-token": token.text})
    assert stolen.status == 401
    mine = http(base + "/latest/meta-data/instance-id", {"X-aws-ec2-metadata-token": token.text})
    assert (mine.status, mine.text) == (200, ids[1])


def test_ec2_serves_the_user_data_identity_document_and_meta_data_the_instance_launched_with(
    sim_ec2: SimEc2, ec2_vms: tuple[str, list[str]]
):
    base, ids = ec2_vms
    auth = {"X-aws-ec2-metadata-token": imds_token(base).text}

    def get(path: str) -> Reply:
        return http(base + "/latest" + path, auth)

    assert json.loads(get("/user-data").body) == BOOT_DATA
    document = get("/dynamic/instance-identity/document").text
    signature = get("/dynamic/instance-identity/signature").text
    identity = json.loads(document)
    assert identity["instanceId"] == ids[1] and identity["region"] == EC2_REGION
    certificate = x509.load_pem_x509_certificate(sim_ec2.identity_trust_path.read_bytes())
    certificate.public_key().verify(  # type: ignore[union-attr, call-arg]
        base64.b64decode(signature),
        document.encode(),
        padding.PKCS1v15(),  # type: ignore[arg-type]
        hashes.SHA256(),  # type: ignore[arg-type]
    )
    meta = {
        name: get(f"/meta-data/{name}")
        for name in (
            "instance-id",
            "ami-id",
            "ami-launch-index",
            "instance-type",
            "placement/availability-zone",
            "placement/region",
            "local-ipv4",
            "public-hostname",
            "public-ipv4",
            "instance-life-cycle",
        )
    }
    assert all(reply.status == 200 for reply in meta.values()), meta
    assert meta["instance-id"].text == ids[1]
    assert meta["ami-id"].text == "ami-0abcdef1234567890"
    assert meta["ami-launch-index"].text == "1"
    assert meta["instance-type"].text == "m5.large"
    assert meta["placement/region"].text == EC2_REGION
    assert meta["local-ipv4"].text == identity["privateIp"]
    assert meta["instance-life-cycle"].text == "on-demand"
    assert get("/meta-data/spot/termination-time").status == 404  # nothing announced
    listing = get("/meta-data/").text.splitlines()
    assert "instance-id" in listing and "placement/" in listing


def test_ec2_announces_a_spot_interruption_before_it_happens(sim_ec2: SimEc2):
    # Every spot instance is pre-empted within 110 s of its boot: within EC2's 2-minute notice.
    sim_ec2.faults.behaviour.update(boot_s=0, preempt_share=1.0, preempt_within_s=110)
    client = boto3.client(
        "ec2",
        endpoint_url=sim_ec2.endpoint,
        region_name=EC2_REGION,
        aws_access_key_id="sim",
        aws_secret_access_key="sim",
    )
    reply = client.run_instances(
        ImageId="ami-0abcdef1234567890",
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        InstanceMarketOptions={"MarketType": "spot"},
    )
    base = metadata_base_url("aws", sim_ec2.endpoint, reply["Instances"][0]["InstanceId"])
    auth = {"X-aws-ec2-metadata-token": imds_token(base).text}

    notice = http(base + "/latest/meta-data/spot/termination-time", auth)
    action = http(base + "/latest/meta-data/spot/instance-action", auth)

    assert notice.status == 200 and notice.text.endswith("Z")
    assert json.loads(action.body) == {"action": "terminate", "time": notice.text}
    assert http(base + "/latest/meta-data/instance-life-cycle", auth).text == "spot"
    assert http(base + "/latest/user-data", auth).status == 404  # launched without any


def test_an_unknown_instance_has_no_metadata_service(sim_ec2: SimEc2):
    base = metadata_base_url("aws", sim_ec2.endpoint, "i-0000000000000dead")
    assert imds_token(base).status == 404


# -- GCE -------------------------------------------------------------------------------------


def gce_get(base: str, path: str, flavor: bool = True) -> Reply:
    headers = {"Metadata-Flavor": "Google"} if flavor else {}
    return http(base + "/computeMetadata/v1" + path, headers)


def test_gce_serves_the_metadata_items_and_facts_worker_runner_reads(sim_gce: SimGce):
    vm_id = gce_insert(sim_gce, "worker-1", GCE_BOOT_DATA)
    base = metadata_base_url("gcp", sim_gce.endpoint, vm_id)

    attribute = gce_get(base, "/instance/attributes/taskcluster")
    assert attribute.headers["Metadata-Flavor"] == "Google"
    assert json.loads(attribute.body) == {**BOOT_DATA, "workerGroup": GCE_ZONE}
    assert gce_get(base, "/instance/attributes/?recursive=true").json() == {
        "taskcluster": attribute.text,
        "wm-pool": "proj/ci",
    }
    assert gce_get(base, "/instance/attributes/nothing-here").status == 404
    assert gce_get(base, "/instance/id").text == vm_id
    assert gce_get(base, "/instance/zone").text.endswith(f"/zones/{GCE_ZONE}")
    assert gce_get(base, "/instance/machine-type").text.endswith("/machineTypes/e2-small")
    assert gce_get(base, "/instance/image").text == (
        "projects/debian-cloud/global/images/family/debian-12"
    )
    assert gce_get(base, "/instance/hostname").text.startswith("worker-1.")
    nic = "/instance/network-interfaces/0"
    assert gce_get(base, f"{nic}/ip").status == 200
    assert gce_get(base, f"{nic}/access-configs/0/external-ip").status == 200
    assert gce_get(base, "/project/project-id").text == GCE_PROJECT
    assert gce_get(base, "/instance/preempted").text == "FALSE"
    assert gce_get(base, "/instance/id", flavor=False).status == 403


def test_gce_identity_token_is_for_the_audience_and_the_instances_service_account(
    sim_gce: SimGce,
):
    vm_id = gce_insert(sim_gce, "worker-2", GCE_BOOT_DATA)
    base = metadata_base_url("gcp", sim_gce.endpoint, vm_id)

    reply = gce_get(
        base, f"/instance/service-accounts/default/identity?audience={ROOT_URL}&format=full"
    )

    assert reply.status == 200
    keys = json.loads(sim_gce.identity_trust_path.read_text())["keys"]
    key = jwt.PyJWK(keys[0]).key
    claims = jwt.decode(reply.text, key, algorithms=["RS256"], audience=ROOT_URL)
    assert claims["sub"] == service_account_id(SERVICE_ACCOUNT)
    assert claims["email"] == SERVICE_ACCOUNT
    engine = claims["google"]["compute_engine"]
    assert (engine["instance_id"], engine["project_id"]) == (vm_id, GCE_PROJECT)
    identity = "/instance/service-accounts/default/identity"
    assert gce_get(base, identity).status == 400  # no audience


def test_gce_an_instance_without_a_service_account_has_no_identity_to_prove(sim_gce: SimGce):
    vm_id = gce_insert(sim_gce, "worker-3", GCE_BOOT_DATA, service_account=False)
    base = metadata_base_url("gcp", sim_gce.endpoint, vm_id)
    path = f"/instance/service-accounts/default/identity?audience={ROOT_URL}"
    assert gce_get(base, path).status == 404


def test_gce_wait_for_change_answers_the_unchanged_value_after_its_timeout(sim_gce: SimGce):
    vm_id = gce_insert(sim_gce, "worker-4", GCE_BOOT_DATA)
    base = metadata_base_url("gcp", sim_gce.endpoint, vm_id)
    reply = gce_get(base, "/instance/preempted?wait_for_change=true&timeout_sec=1")
    assert (reply.status, reply.text) == (200, "FALSE") and reply.headers["ETag"]


# -- Azure -----------------------------------------------------------------------------------


AZURE_TAGS = {
    "worker-pool-id": "proj/ci",
    "provider-id": "azure-main",
    "worker-group": "eastus",
    "root-url": ROOT_URL,
    "wm-deployment": "test-deploy",
}


def imds(sim: SimArm, base: str, path: str, **headers: str) -> Reply:
    return http(base + path, headers or {"Metadata": "true"}, ca_bundle=str(sim.cert_path))


def test_azure_instance_metadata_carries_the_tags_the_vm_was_created_with(sim_arm: SimArm):
    rid = azure_vm(sim_arm, "vm-worker-1", AZURE_TAGS)
    base = metadata_base_url("azure", sim_arm.endpoint, rid)

    reply = imds(sim_arm, base, "/metadata/instance?api-version=2025-04-07")

    assert reply.status == 200
    compute = reply.json()["compute"]  # type: ignore[index]
    assert compute["name"] == "vm-worker-1" and compute["location"] == "eastus"
    assert compute["vmSize"] == "Standard_D2s_v5" and compute["vmId"]
    assert {t["name"]: t["value"] for t in compute["tagsList"]} == AZURE_TAGS
    assert compute["userData"] == base64.b64encode(b"hello").decode()
    assert "adminPassword" not in json.dumps(compute) and "customData" not in json.dumps(compute)
    address = reply.json()["network"]["interface"][0]["ipv4"]["ipAddress"][0]  # type: ignore[index]
    assert address["privateIpAddress"]
    vm_id = imds(
        sim_arm, base, "/metadata/instance/compute/vmId?api-version=2025-04-07&format=text"
    )
    assert vm_id.text == compute["vmId"]
    assert imds(sim_arm, base, "/metadata/instance").status == 400  # no api-version
    no_header = imds(sim_arm, base, "/metadata/instance?api-version=2025-04-07", Other="x")
    assert no_header.status == 400


def test_azure_attested_document_needs_no_nonce_and_names_the_vm(sim_arm: SimArm):
    from cryptography.hazmat.primitives.serialization import pkcs7

    rid = azure_vm(sim_arm, "vm-worker-2", AZURE_TAGS)
    base = metadata_base_url("azure", sim_arm.endpoint, rid)

    reply = imds(sim_arm, base, "/metadata/attested/document?api-version=2025-04-07")
    vm = imds(sim_arm, base, "/metadata/instance/compute?api-version=2025-04-07").json()

    body = reply.json()
    assert reply.status == 200 and body["encoding"] == "pkcs7"  # type: ignore[index]
    der = base64.b64decode(body["signature"])  # type: ignore[index]
    certificates = pkcs7.load_der_pkcs7_certificates(der)
    assert any("metadata.azure.com" in c.subject.rfc4514_string() for c in certificates)
    assert json.dumps(vm["vmId"]).encode() in der  # type: ignore[index]


def test_azure_scheduled_events_are_empty_until_an_eviction_is_announced(sim_arm: SimArm):
    rid = azure_vm(sim_arm, "vm-worker-3", AZURE_TAGS)
    base = metadata_base_url("azure", sim_arm.endpoint, rid)
    reply = imds(sim_arm, base, "/metadata/scheduledevents?api-version=2020-07-01")
    assert reply.json() == {"DocumentIncarnation": 0, "Events": []}


def test_azure_an_unknown_vm_has_no_metadata_service(sim_arm: SimArm):
    base = metadata_base_url("azure", sim_arm.endpoint, "vm-nobody")
    assert imds(sim_arm, base, "/metadata/instance?api-version=2025-04-07").status == 404
