"""EC2 identity proofs: the real AWS provider launches the instances on the simulated EC2, the
sim signs their identity documents, and the verifier (built from a config that trusts the sim's
certificate) accepts exactly the right one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.fixtures.identity import expected_identity, http_get_json, over_the_wire
from tests.fixtures.sim_ec2 import EC2_DEPLOYMENT, EC2_REGION, aws_config
from wm.errors import ConfigError
from wm.model import LaunchSpec, WorkerRef
from wm.providers import build_verifier
from wm.providers.aws.provider import AwsProvider
from wm.providers.base import LaunchBatch, LaunchIntent, LaunchResult
from wm.workers.identity import ExpectedIdentity, IdentityRejected
from wmsim.aws.ec2 import SimEc2
from wmsim.aws.identity import sign_identity_document
from wmsim.aws.run_instances import example_launch_config
from wmsim.trust import new_rsa_key, pem, self_signed

IMAGE, INSTANCE_TYPE = "ami-0abcdef1234567890", "m5.large"
SPEC = LaunchSpec(
    launch_config_id="lc-identity",
    region=EC2_REGION,
    capacity_per_worker=1,
    launch_config=example_launch_config(
        EC2_REGION, image_id=IMAGE, instance_type=INSTANCE_TYPE, launch_config_id="lc-identity"
    ),
)


@pytest.fixture
def launched(aws_provider: AwsProvider) -> list[LaunchResult]:
    intents = (LaunchIntent("w-aws-1", "t-1"), LaunchIntent("w-aws-2", "t-2"))
    results = aws_provider.create(LaunchBatch("proj-ci/identity", SPEC, intents, "batch-identity"))
    assert all(r.cloud_id for r in results)
    return results


def expected(result: LaunchResult, **changes: object) -> ExpectedIdentity:
    return expected_identity(
        result,
        provider_id="aws-test",
        region=EC2_REGION,
        deployment_id=EC2_DEPLOYMENT,
        **changes,
    )


def rejected(verifier, proof, expectation) -> str:
    with pytest.raises(IdentityRejected) as caught:
        verifier.verify(over_the_wire(proof), expectation)
    return caught.value.reason


def test_the_provider_records_what_the_document_is_checked_against(
    sim_ec2: SimEc2, launched: list[LaunchResult]
):
    data = launched[0].provider_data
    assert data["account_id"] == sim_ec2.account_id
    assert data["availability_zone"].startswith(EC2_REGION)
    assert (data["image_id"], data["instance_type"]) == (IMAGE, INSTANCE_TYPE)


def test_a_worker_recovered_by_look_up_records_the_same(
    aws_provider: AwsProvider, launched: list[LaunchResult]
):
    # An intent whose create result was lost is recovered from lookup (provisioner.py).
    ref = WorkerRef(launched[0].worker_id, EC2_REGION, launched[0].cloud_id)
    found = aws_provider.lookup([ref])[launched[0].worker_id].provider_data
    assert {k: found[k] for k in launched[0].provider_data} == launched[0].provider_data


def test_a_proof_fetched_from_the_instance_verifies(
    sim_ec2: SimEc2, launched: list[LaunchResult], aws_identity_verifier
):
    proof = http_get_json(f"{sim_ec2.endpoint}/_sim/identity/{launched[0].cloud_id}")
    assert set(proof) == {"document", "signature"}
    # worker-runner registers as the document's instanceId: the row's Taskcluster workerId.
    assert json.loads(proof["document"])["instanceId"] == launched[0].tc_worker_id
    assert launched[0].tc_worker_id == launched[0].cloud_id
    aws_identity_verifier.verify(over_the_wire(proof), expected(launched[0]))


def test_a_proof_for_an_instance_launched_after_the_row_verifies(
    sim_ec2: SimEc2, launched: list[LaunchResult], aws_identity_verifier
):
    before = datetime.now(UTC) - timedelta(minutes=5)
    proof = sim_ec2.identity_proof(launched[0].cloud_id)
    aws_identity_verifier.verify(proof, expected(launched[0], requested_at=before))


def test_a_document_signed_with_another_key_is_rejected(
    sim_ec2: SimEc2, launched: list[LaunchResult], aws_identity_verifier
):
    forged = sim_ec2.mint_identity(launched[0].cloud_id, key=new_rsa_key())
    assert "signature" in rejected(aws_identity_verifier, forged, expected(launched[0]))


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda d: d.replace('"privateIp" : "', '"privateIp" : "1'), id="private-ip"),
        pytest.param(lambda d: d.replace('"version" : "2017', '"version" : "2018'), id="version"),
        pytest.param(lambda d: d.replace("\n", "\r\n"), id="line-endings"),
        pytest.param(lambda d: d + " ", id="trailing-space"),
    ],
)
def test_an_edited_document_is_rejected(
    sim_ec2: SimEc2, launched: list[LaunchResult], aws_identity_verifier, edit
):
    proof = sim_ec2.identity_proof(launched[0].cloud_id)
    edited = {**proof, "document": edit(proof["document"])}
    assert edited["document"] != proof["document"]
    assert "signature" in rejected(aws_identity_verifier, edited, expected(launched[0]))


def test_another_instances_valid_document_is_rejected(
    sim_ec2: SimEc2, launched: list[LaunchResult], aws_identity_verifier
):
    other = sim_ec2.identity_proof(launched[1].cloud_id)
    aws_identity_verifier.verify(other, expected(launched[1]))  # genuine for its own worker
    assert "instance id" in rejected(aws_identity_verifier, other, expected(launched[0]))


def test_a_signature_taken_from_another_document_is_rejected(
    sim_ec2: SimEc2, launched: list[LaunchResult], aws_identity_verifier
):
    mine = sim_ec2.identity_proof(launched[0].cloud_id)
    other = sim_ec2.identity_proof(launched[1].cloud_id)
    spliced = {"document": mine["document"], "signature": other["signature"]}
    assert "signature" in rejected(aws_identity_verifier, spliced, expected(launched[0]))


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"accountId": "999999999999"}, "accountId"),
        ({"region": "eu-west-1"}, "region"),
        ({"availabilityZone": "us-east-1f"}, "availabilityZone"),
        ({"imageId": "ami-00000000000000000"}, "imageId"),
        ({"instanceType": "m5.24xlarge"}, "instanceType"),
        ({"instanceId": "i-0123456789abcdef0"}, "instance id"),
        ({"pendingTime": "2030-01-01T00:00:00Z"}, "future"),
        ({"pendingTime": "yesterday"}, "pendingTime"),
    ],
)
def test_a_genuinely_signed_document_with_other_claims_is_rejected(
    sim_ec2: SimEc2, launched: list[LaunchResult], aws_identity_verifier, changes, reason
):
    # Signed with the trusted key: only the claims are wrong (another account, and so on).
    proof = sim_ec2.mint_identity(launched[0].cloud_id, changes=changes)
    assert reason in rejected(aws_identity_verifier, proof, expected(launched[0]))


def test_a_document_older_than_the_worker_row_is_rejected(
    sim_ec2: SimEc2, launched: list[LaunchResult], aws_identity_verifier
):
    proof = sim_ec2.identity_proof(launched[0].cloud_id)
    later = datetime.now(UTC) + timedelta(minutes=10)
    reason = rejected(aws_identity_verifier, proof, expected(launched[0], requested_at=later))
    assert "older than the worker" in reason


@pytest.mark.parametrize("missing", ["account_id", "availability_zone", "image_id"])
def test_a_worker_without_recorded_launch_data_is_rejected(
    sim_ec2: SimEc2, launched: list[LaunchResult], aws_identity_verifier, missing
):
    proof = sim_ec2.identity_proof(launched[0].cloud_id)
    data = {k: v for k, v in launched[0].provider_data.items() if k != missing}
    reason = rejected(aws_identity_verifier, proof, expected(launched[0], provider_data=data))
    assert "recorded" in reason


def test_a_worker_without_a_cloud_id_is_rejected(
    sim_ec2: SimEc2, launched: list[LaunchResult], aws_identity_verifier
):
    proof = sim_ec2.identity_proof(launched[0].cloud_id)
    assert "recorded" in rejected(
        aws_identity_verifier, proof, expected(launched[0], cloud_id=None)
    )


def test_the_packaged_aws_certificates_do_not_trust_the_simulated_cloud(
    sim_ec2: SimEc2, launched: list[LaunchResult]
):
    verifier = build_verifier(aws_config(sim_ec2.endpoint), EC2_DEPLOYMENT, "https://x.test")
    proof = sim_ec2.identity_proof(launched[0].cloud_id)
    assert "signature" in rejected(verifier, proof, expected(launched[0]))


@pytest.mark.parametrize("region_has_the_sim_key", [True, False])
def test_a_region_certificate_wins_over_the_general_one(
    sim_ec2: SimEc2, launched: list[LaunchResult], tmp_path: Path, region_has_the_sim_key: bool
):
    stranger = tmp_path / "stranger.pem"
    stranger.write_bytes(pem(self_signed(new_rsa_key(), "stranger.test")))
    sim, other = str(sim_ec2.identity_trust_path), str(stranger)
    region_cert, general_cert = (sim, other) if region_has_the_sim_key else (other, sim)
    config = aws_config(sim_ec2.endpoint).model_copy(
        update={
            "identity_certificates": {EC2_REGION: region_cert},
            "identity_certificate": general_cert,
        }
    )
    verifier = build_verifier(config, EC2_DEPLOYMENT, "https://x.test")
    proof = sim_ec2.identity_proof(launched[0].cloud_id)
    if region_has_the_sim_key:
        verifier.verify(proof, expected(launched[0]))
    else:
        assert "signature" in rejected(verifier, proof, expected(launched[0]))


def test_the_sim_signs_as_imds_formats(sim_ec2: SimEc2, launched: list[LaunchResult]):
    document = sim_ec2.identity_document(launched[0].cloud_id)
    proof = sign_identity_document(document, new_rsa_key())
    assert proof["document"].startswith('{\n  "accountId" : "')
    assert "\n" in proof["signature"]  # wrapped, as IMDS wraps it


def test_an_unreadable_trust_file_is_a_config_error(sim_ec2: SimEc2, tmp_path: Path):
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    for path in (str(tmp_path / "missing.pem"), str(junk)):
        config = aws_config(sim_ec2.endpoint).model_copy(update={"identity_certificate": path})
        with pytest.raises(ConfigError, match="identity_certificate"):
            build_verifier(config, EC2_DEPLOYMENT, "https://x.test")


def test_a_document_for_another_workerid_than_the_rows_is_rejected(
    sim_ec2: SimEc2, launched: list[LaunchResult], aws_identity_verifier
):
    proof = sim_ec2.identity_proof(launched[0].cloud_id)
    for tc_worker_id in (launched[1].tc_worker_id, None):
        moved = expected(launched[0], tc_worker_id=tc_worker_id)
        assert "instance id" in rejected(aws_identity_verifier, proof, moved)
