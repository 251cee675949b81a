"""The strict PKCS#7 SignedData reader: what it accepts, and junk it refuses."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import pkcs7 as builder

from wm.providers import pkcs7
from wmsim.azure import attested

CONTENT = b'{"nonce":"abc","vmId":"x"}'


def signed(*options: builder.PKCS7Options) -> bytes:
    signer = attested.default_signer()
    der = (
        builder.PKCS7SignatureBuilder()
        .set_data(CONTENT)
        .add_signer(signer.certificate, signer.key, hashes.SHA256())
        .add_certificate(attested.pki().intermediate)
        .sign(serialization.Encoding.DER, [builder.PKCS7Options.Binary, *options])
    )
    return der


def test_content_certificates_and_signer_are_read():
    data = pkcs7.parse_signed_data(signed(builder.PKCS7Options.NoAttributes))
    signer = attested.default_signer()
    assert (data.content_type, data.content) == (pkcs7.OID_DATA, CONTENT)
    assert len(data.certificates) == 2
    info = data.signers[0]
    assert info.serial == signer.certificate.serial_number
    assert info.issuer == signer.certificate.issuer.public_bytes()
    assert info.digest_oid == "2.16.840.1.101.3.4.2.1"
    assert info.signed_attributes is None


def test_signed_attributes_are_returned_as_the_signed_set():
    info = pkcs7.parse_signed_data(signed()).signers[0]
    assert info.signed_attributes is not None and info.signed_attributes[0] == pkcs7.TAG_SET
    digests = pkcs7.attribute_values(info.signed_attributes, pkcs7.OID_MESSAGE_DIGEST)
    assert [d.value for d in digests] == [hashlib.sha256(CONTENT).digest()]


def test_a_detached_signature_has_no_content():
    data = pkcs7.parse_signed_data(
        signed(builder.PKCS7Options.NoAttributes, builder.PKCS7Options.DetachedSignature)
    )
    assert data.content is None


def test_the_sims_documents_parse():
    document = attested.sign_attested({"nonce": "n"})
    assert pkcs7.parse_signed_data(base64.b64decode(document)).content == b'{"nonce":"n"}'


OID_SIGNED_DATA_DER = bytes.fromhex("2a864886f70d010702")
OID_ENVELOPED_DATA_DER = bytes.fromhex("2a864886f70d010703")


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(lambda good: b"", id="empty"),
        pytest.param(lambda good: good[:-1], id="truncated"),
        pytest.param(lambda good: good + b"\x00", id="trailing-byte"),
        pytest.param(lambda good: b"\x30\x80" + good[4:] + b"\x00\x00", id="indefinite-length"),
        pytest.param(lambda good: b"\x30\x81\x05" + b"\x00" * 5, id="non-minimal-length"),
        pytest.param(lambda good: b"\x1f\x81\x01\x00", id="multi-byte-tag"),
        pytest.param(lambda good: b"\x30\x84\x7f\xff\xff\xff", id="length-past-the-end"),
        pytest.param(
            lambda good: b"\x30\x0b\x06\x09" + bytes.fromhex("2a864886f70d010701"),
            id="data-not-signed",
        ),
        pytest.param(lambda good: b"\x04\x03abc", id="not-a-sequence"),
        pytest.param(
            lambda good: good.replace(OID_SIGNED_DATA_DER, OID_ENVELOPED_DATA_DER, 1),
            id="enveloped-data",
        ),
    ],
)
def test_junk_is_refused(corrupt):
    der = corrupt(signed(builder.PKCS7Options.NoAttributes))
    with pytest.raises(pkcs7.Pkcs7Error):
        pkcs7.parse_signed_data(der)
