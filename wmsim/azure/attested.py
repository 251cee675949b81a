"""Azure attested data as the simulated ARM signs it: a PKCS#7 SignedData over the document.

A simulated PKI stands in for Microsoft's: a root CA and an issuing CA (both in the file a
provider config's `identity_roots` names, as wm ships Microsoft's roots and intermediates), and
a leaf for metadata.azure.com that signs. Documents have the form of genuine ones (Taskcluster's
fixture captured from a real VM, tests/fixtures/real_proofs; tests/unit/test_attested_form.py
compares them field by field): the SignerInfo names its digest as sha256WithRSAEncryption and
its signature as rsaEncryption, the signature is over the content itself (no signed
attributes), and the PKCS#7 carries the signer's certificate alone. The issuing CA allows
serverAuth only, and the leaf is a TLS server certificate for metadata.azure.com and one label
under it, as Microsoft's are.

For tests, `make_signer` builds other leaves (another name, other dates, an issuer the trust
file does not list with an AIA URL to fetch it from, or a look-alike chain under an untrusted
root), and `sign_attested` can add signed attributes, carry the issuer or detach the content.
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
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtendedKeyUsageOID

from wmsim.trust import ca_key, name, signing_key

SIGNER_NAME = "metadata.azure.com"
# Genuine leaves name the region's host too ("eastus.metadata.azure.com").
SIGNER_DNS_NAMES = (f"simulated.{SIGNER_NAME}", SIGNER_NAME)
LEAF_KEY_NAME = "arm-attested-leaf"
TIMESTAMP_FORMAT = "%m/%d/%y %H:%M:%S -0000"  # IMDS writes UTC as -0000
DOCUMENT_LIFETIME_S = 6 * 3600
CA_VALIDITY_DAYS = 3650
LEAF_VALIDITY_DAYS = 365


@dataclass(frozen=True)
class Pki:
    """A root and two issuing CAs (trusted or look-alike): `intermediate`, listed in the trust
    file beside the root, and `unlisted`, which a verifier finds only through AIA (as wm meets
    a Microsoft issuing CA it does not ship)."""

    root: x509.Certificate
    intermediate: x509.Certificate
    intermediate_key: ec.EllipticCurvePrivateKey
    unlisted: x509.Certificate
    unlisted_key: ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class Signer:
    certificate: x509.Certificate
    key: rsa.RSAPrivateKey
    chain: tuple[x509.Certificate, ...]  # carried in the PKCS#7 beside the signer (genuine: none)


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
    unlisted_issuer: bool = False,
    carry_issuer: bool = False,
    aia_url: str | Sequence[str] | None = None,
) -> Signer:
    """A leaf certificate for the signing key, issued by the (trusted or look-alike) issuing
    CA, or with unlisted_issuer by the one the trust file does not list. The PKCS#7 carries
    only the leaf, as genuine documents do, unless carry_issuer; `aia_url` is where its
    issuer's certificate may be fetched (or several, listed in turn, as on Microsoft's real
    leaves)."""
    authority = pki(trusted)
    issuer, issuer_key = (
        (authority.unlisted, authority.unlisted_key)
        if unlisted_issuer
        else (authority.intermediate, authority.intermediate_key)
    )
    key = signing_key(LEAF_KEY_NAME)
    now = dt.datetime.now(dt.UTC)
    if dns_names is not None:
        names = list(dns_names)
    else:
        names = list(SIGNER_DNS_NAMES) if common_name == SIGNER_NAME else [common_name]
    builder = (
        x509.CertificateBuilder()
        .subject_name(name(common_name, "Microsoft Corporation (simulated)"))
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - dt.timedelta(days=1))
        .not_valid_after(not_after or now + dt.timedelta(days=LEAF_VALIDITY_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True, key_encipherment=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    )
    if names:
        san = x509.SubjectAlternativeName([x509.DNSName(n) for n in names])
        builder = builder.add_extension(san, critical=False)
    if aia_url:
        urls = [aia_url] if isinstance(aia_url, str) else list(aia_url)
        access = [
            x509.AccessDescription(
                AuthorityInformationAccessOID.CA_ISSUERS, x509.UniformResourceIdentifier(url)
            )
            for url in urls
        ]
        builder = builder.add_extension(x509.AuthorityInformationAccess(access), False)
    certificate = builder.sign(issuer_key, hashes.SHA384())  # as Microsoft's issuing CAs sign
    return Signer(certificate, key, (issuer,) if carry_issuer else ())


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
    """Base64 DER PKCS#7 SignedData of the content: IMDS's "signature" field, written field by
    field as IMDS writes it (cryptography's builder names the digest by its hash OID, which
    real documents do not)."""
    who = signer or default_signer()
    data = content if isinstance(content, bytes) else json.dumps(content, separators=(",", ":"))
    payload = data if isinstance(data, bytes) else data.encode()
    signed = payload
    attributes = b""
    if signed_attributes:
        digest = hashes.Hash(hashes.SHA256())
        digest.update(payload)
        attribute_set = _set_of(
            _sequence(_oid(OID_CONTENT_TYPE), _set_of(_oid(OID_DATA))),
            _sequence(_oid(OID_MESSAGE_DIGEST), _set_of(_tlv(0x04, digest.finalize()))),
        )
        signed = attribute_set
        attributes = _tlv(0xA0, attribute_set[_header_length(attribute_set) :])
    signature = who.key.sign(signed, padding.PKCS1v15(), hashes.SHA256())
    certificates = [
        c.public_bytes(serialization.Encoding.DER) for c in (who.certificate, *who.chain)
    ]
    signer_info = _sequence(
        _integer(1),
        _sequence(who.certificate.issuer.public_bytes(), _integer(who.certificate.serial_number)),
        _algorithm(OID_SHA256_WITH_RSA),
        attributes,
        _algorithm(OID_RSA_ENCRYPTION),
        _tlv(0x04, signature),
    )
    encapsulated = _sequence(_oid(OID_DATA), b"" if detached else _tlv(0xA0, _tlv(0x04, payload)))
    signed_data = _sequence(
        _integer(1),
        _set_of(_algorithm(OID_SHA256_WITH_RSA)),
        encapsulated,
        _tlv(0xA0, b"".join(certificates)),
        _set_of(signer_info),
    )
    der = _sequence(_oid(OID_SIGNED_DATA), _tlv(0xA0, signed_data))
    return base64.b64encode(der).decode()


def root_pem(trusted: bool = True) -> bytes:
    return pki(trusted).root.public_bytes(serialization.Encoding.PEM)


def trust_pem(trusted: bool = True) -> bytes:
    """What a provider config's `identity_roots` file holds: the root and the listed issuing
    CA (genuine documents carry no issuer, and wm ships Microsoft's intermediates)."""
    authority = pki(trusted)
    return b"".join(
        c.public_bytes(serialization.Encoding.PEM) for c in (authority.root, authority.intermediate)
    )


def intermediate_der(trusted: bool = True, *, unlisted: bool = True) -> bytes:
    """An issuing CA's certificate as an AIA URL serves it (DER): by default the one the trust
    file does not list, which only AIA can supply."""
    authority = pki(trusted)
    return (authority.unlisted if unlisted else authority.intermediate).public_bytes(
        serialization.Encoding.DER
    )


# -- DER, just what a SignedData needs ---------------------------------------------------------

OID_SIGNED_DATA = "1.2.840.113549.1.7.2"
OID_DATA = "1.2.840.113549.1.7.1"
OID_CONTENT_TYPE = "1.2.840.113549.1.9.3"
OID_MESSAGE_DIGEST = "1.2.840.113549.1.9.4"
OID_SHA256_WITH_RSA = "1.2.840.113549.1.1.11"  # what IMDS writes as the digest algorithm
OID_RSA_ENCRYPTION = "1.2.840.113549.1.1.1"  # and as the signature algorithm


def _tlv(tag: int, body: bytes) -> bytes:
    size = len(body)
    if size < 0x80:
        return bytes([tag, size]) + body
    octets = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(octets)]) + octets + body


def _header_length(der: bytes) -> int:
    return 2 if der[1] < 0x80 else 2 + (der[1] & 0x7F)


def _sequence(*items: bytes) -> bytes:
    return _tlv(0x30, b"".join(items))


def _set_of(*items: bytes) -> bytes:
    return _tlv(0x31, b"".join(sorted(items)))  # DER orders a SET OF by encoding


def _integer(value: int) -> bytes:
    return _tlv(0x02, value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True))


def _oid(dotted: str) -> bytes:
    arcs = [int(arc) for arc in dotted.split(".")]
    body = bytearray()
    for arc in [40 * arcs[0] + arcs[1], *arcs[2:]]:
        chunk = [arc & 0x7F]
        arc >>= 7
        while arc:
            chunk.append(0x80 | (arc & 0x7F))
            arc >>= 7
        body += bytes(reversed(chunk))
    return _tlv(0x06, bytes(body))


def _algorithm(dotted: str) -> bytes:
    return _sequence(_oid(dotted), b"\x05\x00")  # parameters NULL, as IMDS writes them


# -- the PKI ---------------------------------------------------------------------------------


def _make_pki(prefix: str) -> Pki:
    root_key = ca_key(f"{prefix}arm-attested-root")
    issuing_key = ca_key(f"{prefix}arm-attested-issuing")
    unlisted_key = ca_key(f"{prefix}arm-attested-unlisted")
    root_name = name("Microsoft TLS RSA Root G2 (simulated)")
    issuing_name = name("Microsoft TLS G2 RSA CA OCSP 02 (simulated)")
    unlisted_name = name("Microsoft TLS G2 RSA CA OCSP 06 (simulated)")
    root = _ca(root_name, root_key, root_name, root_key, path_length=None)
    intermediate = _ca(issuing_name, issuing_key, root_name, root_key, path_length=0)
    unlisted = _ca(unlisted_name, unlisted_key, root_name, root_key, path_length=0)
    return Pki(root, intermediate, issuing_key, unlisted, unlisted_key)


def _ca(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    path_length: int | None,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (
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
    )
    if path_length is not None:
        # Microsoft's issuing CAs for attested data (TLS G2 RSA CA OCSP 02/04) allow server
        # authentication only; the roots carry no EKU.
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA384())


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
