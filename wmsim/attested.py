"""Azure attested data as the simulated ARM signs it: a PKCS#7 SignedData over the document.

A simulated PKI stands in for Microsoft's: a root CA (the file a provider config's
`identity_roots` names), an issuing CA, and a leaf for metadata.azure.com that signs. Like IMDS,
the signature is over the content itself (no signed attributes) with SHA-256 and RSA. For
tests, `make_signer` builds other leaves (another name, other dates, an AIA URL instead of the
intermediate, or a look-alike chain under an untrusted root), and `sign_attested` can add
signed attributes or detach the content.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtendedKeyUsageOID

from wmsim.trust import ca_key, name, signing_key

SIGNER_NAME = "metadata.azure.com"
LEAF_KEY_NAME = "arm-attested-leaf"
TIMESTAMP_FORMAT = "%m/%d/%y %H:%M:%S -0000"  # IMDS writes UTC as -0000
DOCUMENT_LIFETIME_S = 6 * 3600
CA_VALIDITY_DAYS = 3650
LEAF_VALIDITY_DAYS = 365


@dataclass(frozen=True)
class Pki:
    """A root and an issuing CA (trusted or look-alike)."""

    root: x509.Certificate
    intermediate: x509.Certificate
    intermediate_key: ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class Signer:
    certificate: x509.Certificate
    key: rsa.RSAPrivateKey
    chain: tuple[x509.Certificate, ...]  # carried in the PKCS#7 beside the signer


_pkis: dict[bool, Pki] = {}
_lock = threading.RLock()  # default_signer() builds under it, and pki() takes it too


def pki(trusted: bool = True) -> Pki:
    """The process's simulated Microsoft PKI, or (trusted=False) a look-alike with the same
    names under a root nobody trusts."""
    with _lock:
        if trusted not in _pkis:
            _pkis[trusted] = _make_pki("" if trusted else "untrusted-")
        return _pkis[trusted]


def make_signer(
    *,
    common_name: str = SIGNER_NAME,
    dns_names: Sequence[str] | None = None,
    not_before: dt.datetime | None = None,
    not_after: dt.datetime | None = None,
    trusted: bool = True,
    include_intermediate: bool = True,
    aia_url: str | None = None,
) -> Signer:
    """A leaf certificate for the signing key, issued by the (trusted or look-alike) issuing
    CA; with include_intermediate=False the PKCS#7 carries only the leaf, and `aia_url` is
    where its issuer's certificate may be fetched (as on Microsoft's real leaves)."""
    authority = pki(trusted)
    key = signing_key(LEAF_KEY_NAME)
    now = dt.datetime.now(dt.UTC)
    names = [common_name] if dns_names is None else list(dns_names)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name(common_name, "Microsoft Corporation (simulated)"))
        .issuer_name(authority.intermediate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - dt.timedelta(days=1))
        .not_valid_after(not_after or now + dt.timedelta(days=LEAF_VALIDITY_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True, key_encipherment=True), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(
                authority.intermediate_key.public_key()
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    )
    if names:
        san = x509.SubjectAlternativeName([x509.DNSName(n) for n in names])
        builder = builder.add_extension(san, critical=False)
    if aia_url:
        access = x509.AccessDescription(
            AuthorityInformationAccessOID.CA_ISSUERS, x509.UniformResourceIdentifier(aia_url)
        )
        builder = builder.add_extension(x509.AuthorityInformationAccess([access]), False)
    certificate = builder.sign(authority.intermediate_key, hashes.SHA256())
    chain = (authority.intermediate,) if include_intermediate else ()
    return Signer(certificate, key, chain)


_default_signer: Signer | None = None


def default_signer() -> Signer:
    global _default_signer
    with _lock:
        if _default_signer is None:
            _default_signer = make_signer()
        return _default_signer


def attested_content(
    *,
    nonce: str,
    vm_id: str,
    subscription_id: str,
    created_on: dt.datetime | None = None,
    lifetime_s: float = DOCUMENT_LIFETIME_S,
    sku: str = "",
) -> dict[str, Any]:
    """The signed JSON of attested data, in IMDS's field order."""
    created = created_on or dt.datetime.now(dt.UTC)
    expires = created + dt.timedelta(seconds=lifetime_s)
    return {
        "licenseType": "",
        "nonce": nonce,
        "plan": {"name": "", "product": "", "publisher": ""},
        "sku": sku,
        "subscriptionId": subscription_id,
        "timeStamp": {
            "createdOn": created.astimezone(dt.UTC).strftime(TIMESTAMP_FORMAT),
            "expiresOn": expires.astimezone(dt.UTC).strftime(TIMESTAMP_FORMAT),
        },
        "vmId": vm_id,
    }


def sign_attested(
    content: Mapping[str, Any] | bytes,
    signer: Signer | None = None,
    *,
    signed_attributes: bool = False,
    detached: bool = False,
) -> str:
    """Base64 DER PKCS#7 SignedData of the content: IMDS's "signature" field."""
    who = signer or default_signer()
    data = content if isinstance(content, bytes) else json.dumps(content, separators=(",", ":"))
    payload = data if isinstance(data, bytes) else data.encode()
    builder = pkcs7.PKCS7SignatureBuilder().set_data(payload)
    builder = builder.add_signer(who.certificate, who.key, hashes.SHA256())
    for certificate in who.chain:
        builder = builder.add_certificate(certificate)
    options = [pkcs7.PKCS7Options.Binary]
    if not signed_attributes:
        options.append(pkcs7.PKCS7Options.NoAttributes)
    if detached:
        options.append(pkcs7.PKCS7Options.DetachedSignature)
    der = builder.sign(serialization.Encoding.DER, options)
    return base64.b64encode(der).decode()


def root_pem(trusted: bool = True) -> bytes:
    return pki(trusted).root.public_bytes(serialization.Encoding.PEM)


def intermediate_der(trusted: bool = True) -> bytes:
    """The issuing CA's certificate as an AIA URL serves it (DER)."""
    return pki(trusted).intermediate.public_bytes(serialization.Encoding.DER)


# -- the PKI ---------------------------------------------------------------------------------


def _make_pki(prefix: str) -> Pki:
    root_key = ca_key(f"{prefix}arm-attested-root")
    issuing_key = ca_key(f"{prefix}arm-attested-issuing")
    root_name = name("Microsoft RSA Root Certificate Authority 2017 (simulated)")
    issuing_name = name("Microsoft Azure RSA TLS Issuing CA 03 (simulated)")
    root = _ca(root_name, root_key, root_name, root_key, path_length=None)
    intermediate = _ca(issuing_name, issuing_key, root_name, root_key, path_length=0)
    return Pki(root, intermediate, issuing_key)


def _ca(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    path_length: int | None,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=CA_VALIDITY_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
        .add_extension(
            _key_usage(digital_signature=True, key_cert_sign=True, crl_sign=True), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), False
        )
        .sign(issuer_key, hashes.SHA256())
    )


def _key_usage(
    *,
    digital_signature: bool = False,
    key_encipherment: bool = False,
    key_cert_sign: bool = False,
    crl_sign: bool = False,
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=key_encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )
