"""The AWS certificates shipped with wm are intact, and each region finds its own."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from wm.providers.data import aws_identity_certificates as certs

ALL = ["DEFAULT", "HONG_KONG", "BAHRAIN", "CAPE_TOWN", "MILAN", "JAKARTA", "CHINA", "GOVCLOUD"]


@pytest.mark.parametrize("name", ALL)
def test_each_shipped_certificate_verifies_its_own_signature(name: str):
    # A single changed character of a copied certificate breaks its self-signature.
    certificate = x509.load_pem_x509_certificate(getattr(certs, name).encode())
    key = certificate.public_key()
    assert isinstance(key, rsa.RSAPublicKey)
    key.verify(
        certificate.signature,
        certificate.tbs_certificate_bytes,
        padding.PKCS1v15(),
        certificate.signature_hash_algorithm,
    )


@pytest.mark.parametrize(
    ("region", "name"),
    [
        ("us-east-1", "DEFAULT"),
        ("eu-west-1", "DEFAULT"),
        ("ap-east-1", "HONG_KONG"),
        ("ap-southeast-3", "JAKARTA"),
        ("cn-northwest-1", "CHINA"),
        ("us-gov-east-1", "GOVCLOUD"),
    ],
)
def test_regions_find_their_certificate(region: str, name: str):
    assert certs.certificate_for(region) == getattr(certs, name)
