"""A strict reader of PKCS#7 / CMS SignedData (RFC 2315, RFC 5652), just what verifying one
signer needs: the signed content, the certificates carried, and each SignerInfo.

`cryptography` loads the certificates of a PKCS#7 but cannot check its signature, so the
structure is read here. DER only (definite lengths, single-byte tags): attested data is DER, and
accepting BER's indefinite lengths would only widen what junk can make the parser do. Every
length is checked against what is left, nesting is shallow and fixed, and nothing is decoded
beyond the fields named below. Verifying the signature is the caller's job (azure/identity.py).
"""

from __future__ import annotations

from dataclasses import dataclass

OID_SIGNED_DATA = "1.2.840.113549.1.7.2"
OID_DATA = "1.2.840.113549.1.7.1"
OID_CONTENT_TYPE = "1.2.840.113549.1.9.3"
OID_MESSAGE_DIGEST = "1.2.840.113549.1.9.4"
MAX_CERTIFICATES = 8
MAX_SIGNERS = 4
MAX_ATTRIBUTES = 16

TAG_INTEGER = 0x02
TAG_OCTET_STRING = 0x04
TAG_OID = 0x06
TAG_SEQUENCE = 0x30
TAG_SET = 0x31
TAG_CONTEXT_0 = 0xA0  # [0] constructed
TAG_CONTEXT_1 = 0xA1  # [1] constructed
TAG_CONTEXT_0_PRIMITIVE = 0x80  # [0] primitive: a SignerIdentifier's subjectKeyIdentifier


class Pkcs7Error(ValueError):
    """The data is not a PKCS#7 SignedData this reader accepts."""


@dataclass(frozen=True)
class SignerInfo:
    issuer: bytes | None  # DER of the signer certificate's issuer Name (issuerAndSerialNumber)
    serial: int | None
    subject_key_id: bytes | None  # the other way CMS names the signer certificate
    digest_oid: str
    signed_attributes: bytes | None  # DER re-tagged as SET OF: the exact bytes that were signed
    signature_oid: str
    signature: bytes


@dataclass(frozen=True)
class SignedData:
    content_type: str
    content: bytes | None  # None: a detached signature
    certificates: tuple[bytes, ...]  # DER of each certificate carried
    signers: tuple[SignerInfo, ...]


@dataclass(frozen=True)
class Tlv:
    tag: int
    value: bytes
    raw: bytes  # tag, length and value as they appeared


def parse_signed_data(der: bytes) -> SignedData:
    outer = _one(der, TAG_SEQUENCE, "ContentInfo")
    items = _children(outer.value)
    if len(items) != 2 or _oid(items[0]) != OID_SIGNED_DATA:
        raise Pkcs7Error("not a SignedData ContentInfo")
    explicit = _expect(items[1], TAG_CONTEXT_0, "ContentInfo content")
    signed = _one(explicit.value, TAG_SEQUENCE, "SignedData")
    fields = _children(signed.value)
    if len(fields) < 4:
        raise Pkcs7Error("SignedData is incomplete")
    _expect(fields[0], TAG_INTEGER, "SignedData version")
    _expect(fields[1], TAG_SET, "digestAlgorithms")
    content_type, content = _encapsulated(fields[2])
    rest = fields[3:]
    certificates: tuple[bytes, ...] = ()
    if rest and rest[0].tag == TAG_CONTEXT_0:
        certs = _children(rest[0].value)
        if len(certs) > MAX_CERTIFICATES:
            raise Pkcs7Error("too many certificates")
        certificates = tuple(_expect(c, TAG_SEQUENCE, "certificate").raw for c in certs)
        rest = rest[1:]
    if rest and rest[0].tag == TAG_CONTEXT_1:  # CRLs: not used
        rest = rest[1:]
    if len(rest) != 1:
        raise Pkcs7Error("SignedData has unexpected fields")
    signer_items = _children(_expect(rest[0], TAG_SET, "signerInfos").value)
    if not signer_items or len(signer_items) > MAX_SIGNERS:
        raise Pkcs7Error("SignedData has no or too many signers")
    signers = tuple(_signer_info(item) for item in signer_items)
    return SignedData(content_type, content, certificates, signers)


def attribute_values(signed_attributes: bytes, oid: str) -> list[Tlv]:
    """The values of one signed attribute (SET OF Attribute { type, SET OF value })."""
    attributes = _children(_one(signed_attributes, TAG_SET, "signedAttrs").value)
    if len(attributes) > MAX_ATTRIBUTES:
        raise Pkcs7Error("too many signed attributes")
    values: list[Tlv] = []
    seen = 0
    for attribute in attributes:
        parts = _children(_expect(attribute, TAG_SEQUENCE, "Attribute").value)
        if len(parts) != 2:
            raise Pkcs7Error("malformed signed attribute")
        if _oid(parts[0]) == oid:
            seen += 1
            values += _children(_expect(parts[1], TAG_SET, "attribute values").value)
    if seen > 1:
        raise Pkcs7Error("a signed attribute appears twice")  # RFC 5652 5.3: at most once
    return values


def oid_of(tlv: Tlv) -> str:
    return _oid(tlv)


# -- the pieces ------------------------------------------------------------------------------


def _encapsulated(tlv: Tlv) -> tuple[str, bytes | None]:
    parts = _children(_expect(tlv, TAG_SEQUENCE, "encapContentInfo").value)
    if not parts or len(parts) > 2:
        raise Pkcs7Error("malformed encapContentInfo")
    content_type = _oid(parts[0])
    if len(parts) == 1:
        return content_type, None
    inner = _one(_expect(parts[1], TAG_CONTEXT_0, "eContent").value, TAG_OCTET_STRING, "eContent")
    return content_type, inner.value


def _signer_info(tlv: Tlv) -> SignerInfo:
    parts = _children(_expect(tlv, TAG_SEQUENCE, "SignerInfo").value)
    if len(parts) < 5:
        raise Pkcs7Error("SignerInfo is incomplete")
    _expect(parts[0], TAG_INTEGER, "SignerInfo version")
    issuer = serial = subject_key_id = None
    sid = parts[1]
    if sid.tag == TAG_SEQUENCE:
        name_and_serial = _children(sid.value)
        if len(name_and_serial) != 2:
            raise Pkcs7Error("malformed issuerAndSerialNumber")
        issuer = _expect(name_and_serial[0], TAG_SEQUENCE, "issuer").raw
        serial = _integer(_expect(name_and_serial[1], TAG_INTEGER, "serialNumber"))
    elif sid.tag == TAG_CONTEXT_0_PRIMITIVE:
        subject_key_id = sid.value
    else:
        raise Pkcs7Error("unknown SignerIdentifier")
    digest_oid = _algorithm(parts[2])
    rest = parts[3:]
    signed_attributes = None
    if rest[0].tag == TAG_CONTEXT_0:
        # Signed as a SET OF: the [0] IMPLICIT tag is replaced by SET's (RFC 5652 5.4).
        signed_attributes = bytes([TAG_SET]) + rest[0].raw[1:]
        rest = rest[1:]
    if len(rest) < 2:
        raise Pkcs7Error("SignerInfo is incomplete")
    signature_oid = _algorithm(rest[0])
    signature = _expect(rest[1], TAG_OCTET_STRING, "signature").value
    if len(rest) > 3 or (len(rest) == 3 and rest[2].tag != TAG_CONTEXT_1):
        raise Pkcs7Error("SignerInfo has unexpected fields")
    return SignerInfo(
        issuer, serial, subject_key_id, digest_oid, signed_attributes, signature_oid, signature
    )


def _algorithm(tlv: Tlv) -> str:
    parts = _children(_expect(tlv, TAG_SEQUENCE, "AlgorithmIdentifier").value)
    if not parts or len(parts) > 2:
        raise Pkcs7Error("malformed AlgorithmIdentifier")
    return _oid(parts[0])


# -- DER -------------------------------------------------------------------------------------


def _read(data: bytes, offset: int) -> tuple[Tlv, int]:
    """One TLV at `offset`; returns it and the offset after it."""
    if offset + 2 > len(data):
        raise Pkcs7Error("truncated")
    tag = data[offset]
    if tag & 0x1F == 0x1F:
        raise Pkcs7Error("multi-byte tags are not accepted")
    first = data[offset + 1]
    position = offset + 2
    if first < 0x80:
        length = first
    elif first == 0x80:
        raise Pkcs7Error("indefinite lengths are not DER")
    else:
        count = first & 0x7F
        if count > 4 or position + count > len(data):
            raise Pkcs7Error("bad length")
        length = int.from_bytes(data[position : position + count], "big")
        if length < 0x80 or data[position] == 0:
            raise Pkcs7Error("length is not minimally encoded")
        position += count
    end = position + length
    if end > len(data):
        raise Pkcs7Error("truncated")
    return Tlv(tag, data[position:end], data[offset:end]), end


def _children(data: bytes) -> list[Tlv]:
    items, offset = [], 0
    while offset < len(data):
        item, offset = _read(data, offset)
        items.append(item)
    return items


def _one(data: bytes, tag: int, what: str) -> Tlv:
    item, end = _read(data, 0)
    if end != len(data):
        raise Pkcs7Error(f"trailing data after {what}")
    return _expect(item, tag, what)


def _expect(item: Tlv, tag: int, what: str) -> Tlv:
    if item.tag != tag:
        raise Pkcs7Error(f"{what}: unexpected tag")
    return item


def _integer(item: Tlv) -> int:
    if not item.value:
        raise Pkcs7Error("empty integer")
    return int.from_bytes(item.value, "big", signed=True)


def _oid(item: Tlv) -> str:
    _expect(item, TAG_OID, "object identifier")
    data = item.value
    if not data or data[-1] & 0x80 or len(data) > 64:
        raise Pkcs7Error("malformed object identifier")
    arcs: list[int] = []
    value = 0
    for byte in data:
        if value == 0 and byte == 0x80:
            raise Pkcs7Error("object identifier is not minimally encoded")
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(str(arc) for arc in [first, arcs[0] - 40 * first, *arcs[1:]])
