"""EC2 identity proofs: the instance identity document and its base64 RSA-SHA256 signature.

What a worker posts, both exactly as the instance metadata service returns them:

    {"document":  <GET /latest/dynamic/instance-identity/document, the JSON text unchanged>,
     "signature": <GET /latest/dynamic/instance-identity/signature, base64>}

The signature is RSA PKCS#1 v1.5 over SHA-256 of the document's bytes (what
`openssl dgst -sha256 -verify` checks). It is checked with AWS's public certificate for the
region wm launched the worker in: `identity_certificates[region]`, else `identity_certificate`,
else the certificates shipped in wm/providers/data. Then every claim that identifies the
instance must equal what wm recorded when it launched it (see RECORDED below).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from wm.errors import ConfigError
from wm.kinds.aws import AwsProviderConfig
from wm.ops.telemetry import IDENTITY_SIGNATURE_CHECKS
from wm.providers.data import aws_identity_certificates
from wm.take_over.marks import imported_from
from wm.workers.identity import (
    CLOCK_SKEW_S,
    Clock,
    ExpectedIdentity,
    IdentityRejected,
    decode_base64,
    proof_strings,
    require_equal,
    require_not_before_request,
    utc_now,
)

DOCUMENT_MAX_CHARS = 8 * 1024  # real documents are about 500 bytes
SIGNATURE_MAX_CHARS = 1024  # base64 of a 4096-bit signature is 684
SIGNATURE_MAX_BYTES = 512
MIN_KEY_BITS = 1024  # AWS's keys for this signature are RSA-1024
# document field -> provider_data key the AWS provider records at launch (provider.py).
RECORDED: Mapping[str, str] = {
    "accountId": "account_id",
    "availabilityZone": "availability_zone",
    "imageId": "image_id",
    "instanceType": "instance_type",
}


@dataclass(frozen=True)
class AwsIdentityVerifier:
    provider_id: str
    keys: Mapping[str, rsa.RSAPublicKey]  # region -> key, from `identity_certificates`
    fallback: rsa.RSAPublicKey | None  # `identity_certificate`, for regions not in `keys`
    now: Clock = utc_now  # the time proofs are checked at

    def verify(self, proof: Mapping[str, Any], expected: ExpectedIdentity) -> None:
        fields = proof_strings(
            proof, {"document": DOCUMENT_MAX_CHARS, "signature": SIGNATURE_MAX_CHARS}
        )
        signature = decode_base64(fields["signature"], "signature", max_bytes=SIGNATURE_MAX_BYTES)
        try:
            signed = fields["document"].encode()  # the exact bytes AWS signed
        except UnicodeEncodeError:  # a lone surrogate, smuggled in as a JSON escape
            raise IdentityRejected("document is not valid text") from None
        document = _parse_document(fields["document"])
        # Claims first: they cost nothing, and a proof for no waiting worker never reaches RSA.
        check_claims(document, expected, self.now())
        key = self._key(expected.region)
        IDENTITY_SIGNATURE_CHECKS.labels(self.provider_id).inc()
        check_signature(key, signature, signed)

    def _key(self, region: str) -> rsa.RSAPublicKey:
        key = self.keys.get(region) or self.fallback
        if key is None:
            key = _packaged_key(region)
        return key


def check_signature(key: rsa.RSAPublicKey, signature: bytes, signed: bytes) -> None:
    """RSA PKCS#1 v1.5 SHA-256 by AWS's key over the document's bytes. A refusal says which
    part is wrong, for the operator reading the log: a signature of another key's size, one
    AWS's key never made, or a genuine signature over other bytes (an edited document)."""
    if len(signature) != (key.key_size + 7) // 8:
        raise IdentityRejected("signature is not the size of AWS's key")
    try:
        key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
        return
    except InvalidSignature:
        pass
    try:  # only to name the reason: the signature was refused above whatever this finds
        key.recover_data_from_signature(signature, padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        raise IdentityRejected("signature was not made with AWS's key") from None
    raise IdentityRejected("document is not what AWS's signature signed")


def check_claims(document: Mapping[str, Any], expected: ExpectedIdentity, now: datetime) -> None:
    """The document names exactly the instance wm launched for this worker."""
    # The workerId worker-runner registered as is the instance id it read from this document.
    require_equal(document.get("instanceId"), expected.tc_worker_id, "instance id")
    require_equal(document.get("instanceId"), expected.cloud_id, "instance id")
    require_equal(document.get("region"), expected.region, "region")
    imported = imported_from(expected.provider_data) is not None
    for field, key in RECORDED.items():
        if imported and key not in expected.provider_data:
            # Imported from a legacy worker-manager (wm.take_over.marks), whose API shows none of
            # these, and not yet adopted by a scan: the signed instance id it registered under
            # with worker-manager and its region are what wm knows of it.
            continue
        require_equal(document.get(field), expected.provider_data.get(key), field)
    pending = _timestamp(document.get("pendingTime"), "pendingTime")
    if (pending - now).total_seconds() > CLOCK_SKEW_S:
        raise IdentityRejected("pendingTime is in the future")
    require_not_before_request(pending, expected, "pendingTime")


def make_verifier(
    config: AwsProviderConfig,
    deployment_id: str,
    audience: str,
    *,
    budget: object = None,
    now: Clock = utc_now,
) -> AwsIdentityVerifier:
    """Load the trusted certificates now, so a bad path is a start-up error, not a 403."""
    del deployment_id, audience  # the document names neither; the row's instance id does
    del budget  # verifying a document calls no EC2 API
    keys = {
        region: _load_key(path, f"providers.{config.id}.identity_certificates.{region}")
        for region, path in config.identity_certificates.items()
    }
    fallback = None
    if config.identity_certificate:
        fallback = _load_key(
            config.identity_certificate, f"providers.{config.id}.identity_certificate"
        )
    return AwsIdentityVerifier(config.id, keys, fallback, now)


def _parse_document(text: str) -> Mapping[str, Any]:
    try:
        document = json.loads(text)
    except ValueError:
        raise IdentityRejected("document is not JSON") from None
    if not isinstance(document, dict):
        raise IdentityRejected("document is not a JSON object")
    return document


def _timestamp(value: Any, what: str) -> datetime:
    if not isinstance(value, str) or len(value) > 40:
        raise IdentityRejected(f"{what} is missing")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise IdentityRejected(f"{what} is not a timestamp") from None
    if moment.tzinfo is None:
        raise IdentityRejected(f"{what} has no time zone")
    return moment


def _load_key(path: str, key_path: str) -> rsa.RSAPublicKey:
    try:
        pem = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError([f"{key_path}: cannot read {path}: {exc.strerror}"]) from None
    try:
        return _rsa_key(pem)
    except ValueError as exc:
        raise ConfigError([f"{key_path}: {path}: {exc}"]) from None


@lru_cache(maxsize=64)
def _packaged_key(region: str) -> rsa.RSAPublicKey:
    return _rsa_key(aws_identity_certificates.certificate_for(region).encode())


def _rsa_key(pem: bytes) -> rsa.RSAPublicKey:
    # The certificate only carries AWS's key: its dates are not checked, as AWS's own
    # procedure does not check them (re-issued certificates keep the same key).
    certificate = x509.load_pem_x509_certificate(pem)
    key = certificate.public_key()
    if not isinstance(key, rsa.RSAPublicKey) or key.key_size < MIN_KEY_BITS:
        raise ValueError(f"not an RSA certificate of at least {MIN_KEY_BITS} bits")
    return key
