"""The simulated ARM's attested data has the form of the genuine document captured from a real
Azure VM (tests/fixtures/real_proofs/azure_signature_good.json), field by field: the PKCS#7's
algorithm identifiers, what it carries, and the extensions of the leaf and its issuing CA that
a chain check reads. When the simulator drifts from the genuine form, a check wm needs for real
documents goes untested (as the digest OID and the issuer's serverAuth-only EKU once did)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from wm.providers import pkcs7
from wm.providers.data import azure_certificates
from wmsim.azure import attested

FIXTURES = Path(__file__).parents[1] / "fixtures" / "real_proofs"
# AlgorithmIdentifier DER, parameters NULL included, as the genuine document writes them.
SHA256_WITH_RSA = bytes.fromhex("300d06092a864886f70d01010b0500")
RSA_ENCRYPTION = bytes.fromhex("300d06092a864886f70d0101010500")
SIGNER_NAME = re.compile(r"([a-z0-9-]{1,63}\.)?metadata\.azure\.com")
TIMESTAMP = re.compile(r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d -0000")


def genuine() -> tuple[bytes, x509.Certificate, x509.Certificate]:
    """The genuine document, its leaf, and the shipped issuing CA that signed the leaf."""
    (entry,) = json.loads((FIXTURES / "azure_signature_good.json").read_text())
    der = base64.b64decode(entry["document"])
    leaf = x509.load_der_x509_certificate(pkcs7.parse_signed_data(der).certificates[0])
    _, intermediates = azure_certificates.bundled()
    (issuer,) = [c for c in intermediates if c.subject == leaf.issuer]
    return der, leaf, issuer


def simulated() -> tuple[bytes, x509.Certificate, x509.Certificate]:
    content = attested.attested_content(
        nonce="20260728-192400",
        vm_id="b1310a36-d400-46f6-82cb-6217df846586",
        subscription_id="8a205152-b25a-417f-a676-80465535a6c9",
    )
    der = base64.b64decode(attested.sign_attested(content))
    leaf = x509.load_der_x509_certificate(pkcs7.parse_signed_data(der).certificates[0])
    return der, leaf, attested.pki().intermediate


def document_form(der: bytes) -> dict[str, Any]:
    signed = pkcs7.parse_signed_data(der)
    (signer,) = signed.signers
    content = json.loads(signed.content or b"")
    return {
        "content type": signed.content_type,
        "content carried": signed.content is not None,
        "certificates carried": len(signed.certificates),
        "signers": len(signed.signers),
        "signer named by issuer and serial": signer.issuer is not None,
        "digest OID": signer.digest_oid,
        "signature OID": signer.signature_oid,
        "signed attributes": signer.signed_attributes is not None,
        # digestAlgorithms and the SignerInfo's digest, parameters NULL, nothing else.
        "sha256WithRSAEncryption identifiers": der.count(SHA256_WITH_RSA),
        "rsaEncryption identifiers": der.count(RSA_ENCRYPTION),
        "content fields": sorted(content),
        "timeStamp fields": sorted(content["timeStamp"]),
        "timeStamp format": all(TIMESTAMP.fullmatch(v) for v in content["timeStamp"].values()),
    }


def extension(certificate: x509.Certificate, kind: type) -> tuple[bool, Any] | None:
    try:
        found = certificate.extensions.get_extension_for_class(kind)
    except x509.ExtensionNotFound:
        return None
    return found.critical, found.value


def usage_form(certificate: x509.Certificate) -> dict[str, Any]:
    usage = extension(certificate, x509.KeyUsage)
    eku = extension(certificate, x509.ExtendedKeyUsage)
    constraints = extension(certificate, x509.BasicConstraints)
    return {
        "key usage": usage and (usage[0], _usages(usage[1])),
        "extended key usage": eku and (eku[0], [oid.dotted_string for oid in eku[1]]),
        "basic constraints": constraints
        and (constraints[0], constraints[1].ca, constraints[1].path_length),
    }


def leaf_form(leaf: x509.Certificate) -> dict[str, Any]:
    names = extension(leaf, x509.SubjectAlternativeName)
    assert names is not None
    dns = names[1].get_values_for_type(x509.DNSName)
    return {
        **usage_form(leaf),
        "common name": [a.value for a in leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)],
        "subjectAltName critical": names[0],
        "subjectAltName has metadata.azure.com": "metadata.azure.com" in dns,
        "subjectAltName names, one label under": sorted(
            SIGNER_NAME.fullmatch(n) is not None and n != "metadata.azure.com" for n in dns
        ),
        "key": type(leaf.public_key()).__name__,
        "key bits": leaf.public_key().key_size,  # type: ignore[union-attr]
    }


def _usages(usage: x509.KeyUsage) -> list[str]:
    names = [
        "digital_signature",
        "content_commitment",
        "key_encipherment",
        "data_encipherment",
        "key_agreement",
        "key_cert_sign",
        "crl_sign",
    ]
    return [name for name in names if getattr(usage, name)]


@pytest.mark.parametrize(
    ("part", "form"),
    [
        ("document", lambda der, leaf, issuer: document_form(der)),
        ("leaf", lambda der, leaf, issuer: leaf_form(leaf)),
        ("issuing CA", lambda der, leaf, issuer: usage_form(issuer)),
    ],
)
def test_the_simulators_attested_data_has_the_genuine_form(part: str, form: Any):
    assert form(*simulated()) == form(*genuine()), f"the simulator's {part} differs"


def test_the_forms_compared_are_those_that_broke_real_documents():
    # The two differences that once let every genuine document be refused while every test
    # passed: spelled out, so the comparison above cannot quietly stop comparing them.
    der, leaf, issuer = simulated()
    assert document_form(der)["digest OID"] == "1.2.840.113549.1.1.11"
    assert usage_form(issuer)["extended key usage"] == (False, ["1.3.6.1.5.5.7.3.1"])
    assert leaf_form(leaf)["extended key usage"] == (False, ["1.3.6.1.5.5.7.3.1"])
