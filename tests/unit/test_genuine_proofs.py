"""Proofs captured from real VMs (tests/fixtures/real_proofs, from Taskcluster's own tests),
each checked at its own time through wm's verifiers as the web process builds them: the
genuine ones accepted with only what wm ships, the tampered ones refused, each for its own
reason. No network: a fetch fails the test unless a test serves it from a vendored file."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from wm.kinds.aws import AwsProviderConfig
from wm.kinds.azure import AzureProviderConfig
from wm.providers import build_verifier, pkcs7
from wm.providers.azure import identity as azure_identity
from wm.providers.data import aws_identity_certificates, azure_certificates
from wm.providers.identity_fetch import Fetched, FetchRefused
from wm.workers.identity import ExpectedIdentity, IdentityRejected

FIXTURES = Path(__file__).parents[1] / "fixtures" / "real_proofs"
CA_CERTS = Path(azure_certificates.__file__).parent / "azure_ca_certs"


def fixture(name: str) -> str:
    if name == "aws_iid_SIGNATURE_bit_flipped":
        signature = bytearray(base64.b64decode(fixture("aws_iid_SIGNATURE")))
        signature[-1] ^= 0x01
        return base64.b64encode(signature).decode()
    return (FIXTURES / name).read_text()


def at(moment: datetime) -> Any:
    return lambda: moment


def rejected(verifier: Any, proof: Mapping[str, str], expected: ExpectedIdentity) -> str:
    with pytest.raises(IdentityRejected) as caught:
        verifier.verify(json.loads(json.dumps(proof)), expected)
    return caught.value.reason


# -- AWS: the instance identity document of i-02312cd4f06c990ca, us-west-2 ------------------

AWS_DOCUMENT = json.loads(fixture("aws_iid_DOCUMENT"))
AWS_PENDING = datetime(2019, 8, 15, 18, 19, 47, tzinfo=UTC)


def aws_verifier(now: datetime) -> Any:
    # No identity_certificate(s): the key is the certificate wm ships for the region.
    config = AwsProviderConfig(id="aws-real", kind="aws", regions=("us-west-2",))
    return build_verifier(config, "real-deploy", "https://tc.example.test", now=at(now))


def aws_expected(**changes: Any) -> ExpectedIdentity:
    values: dict[str, Any] = {
        "deployment_id": "real-deploy",
        "provider_id": "aws-real",
        "pool_id": "proj/real",
        "worker_id": "w-real",
        "region": "us-west-2",
        "cloud_id": AWS_DOCUMENT["instanceId"],
        "audience": "https://tc.example.test",
        "provider_data": {
            "account_id": AWS_DOCUMENT["accountId"],
            "availability_zone": AWS_DOCUMENT["availabilityZone"],
            "image_id": AWS_DOCUMENT["imageId"],
            "instance_type": AWS_DOCUMENT["instanceType"],
        },
        "requested_at": AWS_PENDING - timedelta(minutes=1),
        "tc_worker_id": AWS_DOCUMENT["instanceId"],
    }
    return ExpectedIdentity(**{**values, **changes})


def test_the_certificate_wm_ships_for_us_west_2_carries_worker_managers_aws_key():
    shipped = x509.load_pem_x509_certificate(
        aws_identity_certificates.certificate_for("us-west-2").encode()
    )
    vendored = serialization.load_pem_public_key(
        (FIXTURES / "aws_RSA-key-forSignature").read_bytes()
    )
    assert shipped.public_key() == vendored


def test_the_genuine_aws_document_is_accepted_at_its_pending_time():
    proof = {"document": fixture("aws_iid_DOCUMENT"), "signature": fixture("aws_iid_SIGNATURE")}
    aws_verifier(AWS_PENDING).verify(proof, aws_expected())
    aws_verifier(AWS_PENDING + timedelta(days=3)).verify(proof, aws_expected())


@pytest.mark.parametrize(
    ("document", "signature", "now", "reason"),
    [
        # pendingTime edited to two days later, checked at that time: the claims hold, the bytes
        # are not the ones AWS signed.
        (
            "aws_iid_DOCUMENT_bad",
            "aws_iid_SIGNATURE",
            AWS_PENDING + timedelta(days=2),
            "document is not what AWS's signature signed",
        ),
        (
            "aws_iid_DOCUMENT",
            "aws_iid_SIGNATURE_badKey",
            AWS_PENDING,
            "signature is not the size of AWS's key",
        ),
        # AWS's own signature of another document: its key made it, over other bytes.
        (
            "aws_iid_DOCUMENT",
            "aws_iid_SIGNATURE_badSignature",
            AWS_PENDING,
            "document is not what AWS's signature signed",
        ),
        # The genuine signature with one bit flipped: no document's signature by AWS's key.
        (
            "aws_iid_DOCUMENT",
            "aws_iid_SIGNATURE_bit_flipped",
            AWS_PENDING,
            "signature was not made with AWS's key",
        ),
        (
            "aws_iid_DOCUMENT",
            "aws_iid_EMPTYFILE",
            AWS_PENDING,
            "signature is not base64 of an acceptable size",
        ),
        # The genuine pair, checked before the instance was pending.
        (
            "aws_iid_DOCUMENT",
            "aws_iid_SIGNATURE",
            AWS_PENDING - timedelta(hours=1),
            "pendingTime is in the future",
        ),
    ],
)
def test_tampered_aws_proofs_are_refused_each_for_its_reason(
    document: str, signature: str, now: datetime, reason: str
):
    proof = {"document": fixture(document), "signature": fixture(signature)}
    assert rejected(aws_verifier(now), proof, aws_expected(requested_at=None)) == reason


@pytest.mark.parametrize(
    ("scenario", "changes", "reason"),
    [
        # wm.take_over.marks: the legacy worker-manager's API shows none of the VM's details.
        ("imported, not yet adopted", {"provider_data": {"importedFrom": "https://tc"}}, None),
        # A scan adopted it since and recorded what the cloud shows: checked again.
        (
            "imported, adopted with another image",
            {"provider_data": {"importedFrom": "https://tc", "image_id": "ami-other"}},
            "imageId does not match the worker",
        ),
        (
            "launched by wm, nothing recorded",
            {"provider_data": {}},
            "no accountId recorded for this worker",
        ),
        (
            "imported, another instance",
            {"provider_data": {"importedFrom": "https://tc"}, "tc_worker_id": "i-0other"},
            "instance id does not match the worker",
        ),
    ],
)
def test_an_imported_aws_worker_is_proven_by_its_signed_instance_id_and_region(
    scenario: str, changes: dict[str, Any], reason: str | None
):
    proof = {"document": fixture("aws_iid_DOCUMENT"), "signature": fixture("aws_iid_SIGNATURE")}
    expected = aws_expected(**changes)
    if reason is None:
        aws_verifier(AWS_PENDING).verify(proof, expected)
    else:
        assert rejected(aws_verifier(AWS_PENDING), proof, expected) == reason, scenario


# -- Azure: attested data of VM b1310a36-..., eastus, 2026 ----------------------------------

(GENUINE,) = json.loads(fixture("azure_signature_good.json"))
GENUINE_DER = base64.b64decode(GENUINE["document"])
GENUINE_SUBSCRIPTION = "8a205152-b25a-417f-a676-80465535a6c9"
GENUINE_CREATED = datetime(2026, 7, 28, 13, 24, 0, tzinfo=UTC)
G2_OCSP_02_URLS = [
    "http://www.microsoft.com/pkiops/certs/Microsoft%20TLS%20G2%20RSA%20CA%20OCSP%2002.crt",
    "http://caissuers.microsoft.com/pkiops/certs/Microsoft%20TLS%20G2%20RSA%20CA%20OCSP%2002.crt",
]


def no_network(url: str, max_bytes: int) -> Fetched:
    raise AssertionError(f"the verifier fetched {url}")


def azure_verifier(
    now: datetime, subscription: str = GENUINE_SUBSCRIPTION, fetch: Any = no_network
) -> azure_identity.AzureIdentityVerifier:
    # No identity_roots: only the Microsoft roots and intermediates wm ships.
    config = AzureProviderConfig(
        id="azure-real",
        kind="azure",
        regions=("eastus",),
        subscription_id=subscription,
        resource_group="workers",
    )
    return azure_identity.make_verifier(
        config, "real-deploy", "https://tc.example.test", fetch=fetch, now=at(now)
    )


def azure_expected(vm_id: str, created: datetime, **changes: Any) -> ExpectedIdentity:
    values: dict[str, Any] = {
        "deployment_id": "real-deploy",
        "provider_id": "azure-real",
        "pool_id": "proj/real",
        "worker_id": "vm-real",
        "region": "eastus",
        "cloud_id": f"/subscriptions/{GENUINE_SUBSCRIPTION}/resourceGroups/workers/providers/"
        "Microsoft.Compute/virtualMachines/vm-real",
        "audience": "https://tc.example.test",
        "provider_data": {"vmId": vm_id},
        "requested_at": created - timedelta(minutes=5),
        "tc_worker_id": "vm-real",
    }
    return ExpectedIdentity(**{**values, **changes})


def document(der: bytes) -> dict[str, str]:
    return {"document": base64.b64encode(der).decode()}


def pem_document(name: str) -> bytes:
    text = re.sub(r"-----[A-Z0-9 ]+-----", "", fixture(name))
    return base64.b64decode("".join(text.split()))


def test_the_genuine_azure_document_is_accepted_with_only_the_shipped_certificates():
    verifier = azure_verifier(GENUINE_CREATED)
    assert len(pkcs7.parse_signed_data(GENUINE_DER).certificates) == 1  # the leaf, no issuer
    verifier.verify(
        {"document": GENUINE["document"]}, azure_expected(GENUINE["vmId"], GENUINE_CREATED)
    )
    # And again, later in its time window (the verifier keeps no state between documents).
    later = dataclasses.replace(verifier, now=at(GENUINE_CREATED + timedelta(minutes=50)))
    later.verify(document(GENUINE_DER), azure_expected(GENUINE["vmId"], GENUINE_CREATED))


def test_without_the_shipped_intermediate_the_issuer_is_fetched_from_the_leafs_first_url():
    # As worker-manager's test does: Microsoft TLS G2 RSA CA OCSP 02 comes from the leaf's first
    # CA Issuers URL (served here from the shipped file, as DER, as Microsoft serves it).
    served = x509.load_pem_x509_certificate(
        (CA_CERTS / "microsoft_tls_g2_rsa_ca_ocsp_02.pem").read_bytes()
    )
    calls: list[str] = []

    def fetch(url: str, max_bytes: int) -> Fetched:
        calls.append(url)
        return Fetched(served.public_bytes(serialization.Encoding.DER), {})

    verifier = dataclasses.replace(azure_verifier(GENUINE_CREATED, fetch=fetch), intermediates=())
    verifier.verify(document(GENUINE_DER), azure_expected(GENUINE["vmId"], GENUINE_CREATED))
    assert calls == G2_OCSP_02_URLS[:1]


def test_without_the_shipped_intermediate_and_both_urls_down_the_document_is_refused():
    calls: list[str] = []

    def down(url: str, max_bytes: int) -> Fetched:
        calls.append(url)
        raise FetchRefused("fetch failed")

    verifier = dataclasses.replace(azure_verifier(GENUINE_CREATED, fetch=down), intermediates=())
    reason = rejected(
        verifier, document(GENUINE_DER), azure_expected(GENUINE["vmId"], GENUINE_CREATED)
    )
    assert (
        reason
        == "signer does not chain to a trusted root (issuer certificate not fetched: fetch failed)"
    )
    assert calls == G2_OCSP_02_URLS


def flip(der: bytes, offset: int, mask: int = 0x01) -> bytes:
    return der[:offset] + bytes([der[offset] ^ mask]) + der[offset + 1 :]


def signed_byte_changed() -> bytes:
    # One character of the signed nonce: the JSON still parses and every claim still holds.
    offset = GENUINE_DER.index(b'"nonce":"20260728-192400"') + len(b'"nonce":"20260728-19240')
    return flip(GENUINE_DER, offset)  # "0" -> "1"


def signature_bit_flipped() -> bytes:
    return flip(GENUINE_DER, len(GENUINE_DER) - 1)  # the signature is the last field


def digest_oid_replaced(oid_der: bytes) -> bytes:
    sha256_with_rsa = bytes.fromhex("2a864886f70d01010b")
    assert GENUINE_DER.count(sha256_with_rsa) == 2  # digestAlgorithms, and the SignerInfo's
    return GENUINE_DER.replace(sha256_with_rsa, oid_der)


@pytest.mark.parametrize(
    ("der", "reason"),
    [
        pytest.param(
            signed_byte_changed(),
            "document signature does not verify: the signed data was changed",
            id="one-signed-byte-changed",
        ),
        pytest.param(
            signature_bit_flipped(),
            "document signature was not made with the signer's key",
            id="one-signature-bit-flipped",
        ),
        pytest.param(
            digest_oid_replaced(bytes.fromhex("2a864886f70d010105")),
            "digest algorithm is not SHA-2",
            id="digest-sha1WithRSAEncryption",
        ),
        pytest.param(
            digest_oid_replaced(bytes.fromhex("2a864886f70d010104")),
            "digest algorithm is not SHA-2",
            id="digest-md5WithRSAEncryption",
        ),
        pytest.param(
            GENUINE_DER + b"\x00",
            "document is not PKCS#7 SignedData: trailing data after ContentInfo",
            id="a-byte-appended",
        ),
    ],
)
def test_copies_of_the_genuine_azure_document_with_a_change_are_refused(der: bytes, reason: str):
    verifier = azure_verifier(GENUINE_CREATED)
    expected = azure_expected(GENUINE["vmId"], GENUINE_CREATED)
    assert rejected(verifier, document(der), expected) == reason


@pytest.mark.parametrize(
    ("now", "changes", "reason"),
    [
        (GENUINE_CREATED + timedelta(hours=7), {}, "attested data expired"),
        (GENUINE_CREATED + timedelta(hours=2), {}, "attested data is too old"),
        (
            GENUINE_CREATED - timedelta(hours=1),
            {"requested_at": None},
            "attested data is from the future",
        ),
        (
            GENUINE_CREATED,
            {"provider_data": {"vmId": "5a06deb3-807b-46dd-aef5-78aaf9193f71"}},
            "vmId does not match the worker",
        ),
        (
            GENUINE_CREATED,
            {"requested_at": GENUINE_CREATED + timedelta(hours=1)},
            "attested data is older than the worker",
        ),
        # The leaf expired on 2026-11-11: after that no document it signed is accepted.
        (datetime(2026, 11, 12, tzinfo=UTC), {"requested_at": None}, "attested data expired"),
    ],
)
def test_the_genuine_azure_document_for_another_worker_or_time_is_refused(
    now: datetime, changes: dict[str, Any], reason: str
):
    expected = azure_expected(GENUINE["vmId"], GENUINE_CREATED, **changes)
    assert rejected(azure_verifier(now), document(GENUINE_DER), expected) == reason


def test_the_genuine_azure_document_is_refused_for_another_subscription():
    verifier = azure_verifier(GENUINE_CREATED, subscription="fe7fd10a-bdc1-44b0-811e-94c4b4be754f")
    expected = azure_expected(GENUINE["vmId"], GENUINE_CREATED)
    assert (
        rejected(verifier, document(GENUINE_DER), expected)
        == "subscription does not match the provider"
    )


OLD_CREATED = datetime(2019, 12, 13, 0, 33, 40, tzinfo=UTC)


def test_azure_message_bad_is_refused():
    # A 2019 document with its vmId edited, and a byte appended after the DER.
    der = base64.b64decode("".join(fixture("azure_message_bad").split()))
    expected = azure_expected("5a06deb3-807b-46dd-aef5-78aaf9193f71", OLD_CREATED)
    reason = rejected(azure_verifier(OLD_CREATED), document(der), expected)
    assert reason == "document is not PKCS#7 SignedData: trailing data after ContentInfo"
    # Without the appended byte, its signature is Azure's over other content: the vmId edit.
    signed = pkcs7.parse_signed_data(der[:-1])
    signer = x509.load_der_x509_certificate(signed.certificates[0])
    with pytest.raises(IdentityRejected) as caught:
        azure_identity.check_signature(signed.signers[0], signer, signed.content or b"")
    assert caught.value.reason == "document signature does not verify: the signed data was changed"


def test_azure_signature_bad_is_refused():
    der = base64.b64decode("".join(fixture("azure_signature_bad").split()))
    expected = azure_expected("5d06deb3-807b-46dd-aef5-78aaf9193f71", OLD_CREATED)
    # Attested data of 2019 named no subscription; wm refuses it before any signature work.
    reason = rejected(azure_verifier(OLD_CREATED), document(der), expected)
    assert reason == "subscription does not match the provider"
    signed = pkcs7.parse_signed_data(der)
    signer = x509.load_der_x509_certificate(signed.certificates[0])
    with pytest.raises(IdentityRejected) as caught:
        azure_identity.check_signature(signed.signers[0], signer, signed.content or b"")
    assert caught.value.reason == "document signature was not made with the signer's key"


def test_azure_wrong_subject_is_refused_for_its_signers_name():
    # Signed by a leaf for metadata.azure.org under Taskcluster's test root, 2020.
    der = pem_document("azure_wrong_subject.pkcs7")
    created = datetime(2020, 11, 15, 12, 0, 0, tzinfo=UTC)
    verifier = azure_verifier(created, subscription="fe7fd10a-bdc1-44b0-811e-94c4b4be754f")
    reason = rejected(verifier, document(der), azure_expected("some-vm", created))
    assert reason == "signer is not metadata.azure.com"


def test_the_shipped_certificates_are_worker_managers():
    roots, intermediates = azure_certificates.bundled()
    listing = json.loads((CA_CERTS / "certificates.json").read_text())
    assert len(roots) == sum(1 for entry in listing if entry.get("root")) == 2
    assert len(roots) + len(intermediates) == len(listing) == len(list(CA_CERTS.glob("*.pem")))
    assert {r.subject.rfc4514_string() for r in roots} == {
        "CN=Microsoft RSA Root Certificate Authority 2017,O=Microsoft Corporation,C=US",
        "CN=Microsoft TLS RSA Root G2,O=Microsoft Corporation,C=US",
    }


def test_the_shipped_certificates_go_into_the_distribution():
    # Package data is listed by pattern in pyproject.toml: a certificate file the patterns miss
    # would be absent from an installed wm, and every Azure document refused there.
    import fnmatch
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["wm"]
    wm_dir = Path(azure_certificates.__file__).parents[2]
    for path in CA_CERTS.iterdir():
        relative = path.relative_to(wm_dir).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative
