"""Azure identity proofs: attested data, a PKCS#7 SignedData signed for metadata.azure.com.

What a worker posts:

    {"document": <the "signature" field of GET /metadata/attested/document, base64 DER PKCS#7>}

exactly as worker-runner sends it: it asks for no nonce (IMDS then puts its own timestamp in
the nonce field), so none is checked. The replay guard is the registration itself: a worker
registers once, from state requested only.

The PKCS#7 carries the signed JSON itself ({"nonce", "vmId", "subscriptionId", "timeStamp":
{"createdOn", "expiresOn"}, ...}); there is no second copy to compare, so what is checked is the
signed content. Checks, cheapest first: shape and sizes; the DER structure; the content's
vmId (recorded by the Azure provider at create), subscription and times; the signer
certificate's name (metadata.azure.com or one label under it) and dates; the signature over the
content (or over the signed attributes, whose messageDigest must be the content's); and last the
chain from the signer to a trusted root, verified as a TLS server chain for the signer's name.

Genuine documents carry the signer's certificate alone, so its issuer comes from elsewhere:
wm ships the roots and intermediates worker-manager ships (wm/providers/data/azure_ca_certs),
and a provider's `identity_roots` adds to them (a private CA, the simulated ARM's). Only when
those do not complete the chain are the certificates' AIA "CA Issuers" URLs fetched, each in
turn until one gives a certificate, from worker-manager's allowed locations (AIA_LOCATIONS)
through identity_fetch (never an IP literal or a metadata address), at most AIA_MAX_FETCHES a
verification and cached per process.

Times are read from the verifier's one clock (`now`), so a captured document can be checked at
its own time.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509 import verification
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtensionOID, NameOID

from wm.errors import CloudError, ConfigError, ErrorCategory
from wm.kinds.azure import AzureProviderConfig
from wm.ops.telemetry import IDENTITY_SIGNATURE_CHECKS
from wm.providers import identity_fetch, pkcs7
from wm.providers.azure.clients import AzureClients
from wm.providers.azure.provider import make_gate
from wm.providers.data import azure_certificates
from wm.workers.identity import (
    CLOCK_SKEW_S,
    Clock,
    ExpectedIdentity,
    IdentityRejected,
    decode_base64,
    proof_strings,
    require_not_before_request,
    utc_now,
)

if TYPE_CHECKING:
    from wm.providers.gate import Budget

DOCUMENT_MAX_CHARS = 48 * 1024  # base64; real documents are 2-8 KiB
DOCUMENT_MAX_BYTES = 36 * 1024
CONTENT_MAX_BYTES = 8 * 1024
SIGNER_NAME = "metadata.azure.com"
SIGNER_NAME_PATTERN = re.compile(r"([a-z0-9-]{1,63}\.)?metadata\.azure\.com")
ATTESTED_MAX_AGE_S = 3600.0  # a document made longer ago is refused even if not expired
TIMESTAMP_FORMAT = "%m/%d/%y %H:%M:%S %z"  # "11/28/18 06:16:17 -0000", as IMDS writes it
MAX_CHAIN_DEPTH = 5
# Where Azure's CAs publish their certificates: worker-manager's allowed AIA locations
# (isAllowedAiaLocation, from Microsoft's "Azure Certificate Authority details"), host -> the
# path a URL must start with.
AIA_LOCATIONS: Mapping[str, str] = {
    "cacerts.digicert.com": "/",
    "cacerts.digicert.cn": "/",
    "cacerts.geotrust.com": "/",
    "caissuers.microsoft.com": "/",
    "www.microsoft.com": "/pkiops/certs/",
}
AIA_HOSTS = frozenset(AIA_LOCATIONS)
AIA_SCHEMES = ("http", "https")
AIA_PORTS = (80, 443)
AIA_MAX_FETCHES = 2  # network fetches per verification (a real leaf names two URLs)
AIA_MAX_BYTES = 16 * 1024
AIA_CACHE_SIZE = 32
# sha*WithRSAEncryption: allowed as the signature algorithm when it names the same digest.
RSA_WITH: Mapping[str, type[hashes.HashAlgorithm]] = {
    "1.2.840.113549.1.1.11": hashes.SHA256,
    "1.2.840.113549.1.1.12": hashes.SHA384,
    "1.2.840.113549.1.1.13": hashes.SHA512,
}
# Digest algorithms as OpenSSL (and node-forge) read a SignerInfo's: the hash OIDs, and the
# sha*WithRSAEncryption OIDs as their hash, which is what IMDS writes. SHA-1, MD5 and every
# other OID stay refused.
DIGESTS: Mapping[str, type[hashes.HashAlgorithm]] = {
    "2.16.840.1.101.3.4.2.1": hashes.SHA256,
    "2.16.840.1.101.3.4.2.2": hashes.SHA384,
    "2.16.840.1.101.3.4.2.3": hashes.SHA512,
    **RSA_WITH,
}
OID_RSA = "1.2.840.113549.1.1.1"


@dataclass
class AiaCache:
    """Intermediates fetched by URL (only ever URLs on the allow-list)."""

    fetch: identity_fetch.Fetch
    _certificates: OrderedDict[str, x509.Certificate] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def cached(self, url: str) -> x509.Certificate | None:
        with self._lock:
            if url in self._certificates:
                self._certificates.move_to_end(url)
                return self._certificates[url]
        return None

    def get(self, url: str) -> x509.Certificate:
        """The certificate at an allowed URL, from the cache or fetched; FetchRefused for a URL
        off the allow-list (before any I/O), a failed fetch or a body that is no certificate."""
        check_aia_url(url)
        certificate = self.cached(url)
        if certificate is not None:
            return certificate
        body = self.fetch(url, AIA_MAX_BYTES).body
        try:
            certificate = _parsed(
                x509.load_pem_x509_certificate(body)
                if body.lstrip().startswith(b"-----")
                else x509.load_der_x509_certificate(body)
            )
        except Exception:  # see _parsed: any type may mean a junk certificate
            raise identity_fetch.FetchRefused(
                "fetched issuer certificate is not a certificate"
            ) from None
        with self._lock:
            self._certificates[url] = certificate
            while len(self._certificates) > AIA_CACHE_SIZE:
                self._certificates.popitem(last=False)
        return certificate


def check_aia_url(url: str) -> str:
    """The host of an AIA URL wm may fetch, as worker-manager's isAllowedAiaLocation decides:
    http or https, an allowed host (and path, for www.microsoft.com), no user info, port 80 or
    443, no IP literal. FetchRefused, before any I/O, for any other URL."""
    host = identity_fetch.check_url(url, AIA_HOSTS, AIA_SCHEMES, ports=AIA_PORTS)
    path = urllib.parse.urlsplit(url).path
    # A dot segment would move the path out of its prefix once a server normalises it.
    segments = urllib.parse.unquote(path).replace("\\", "/").split("/")
    if any(segment in (".", "..") for segment in segments):
        raise identity_fetch.refused("URL path has dot segments")
    if not path.startswith(AIA_LOCATIONS[host]):
        raise identity_fetch.refused("URL path is not on the allow-list")
    return host


@dataclass(frozen=True)
class AzureIdentityVerifier:
    provider_id: str
    subscription_id: str
    roots: tuple[x509.Certificate, ...]  # trusted: Microsoft's shipped roots + identity_roots'
    aia: AiaCache
    # The vmId ARM gives the VM with this resource id (None: no such VM). A VM an ARM
    # deployment made is on its row only once a scan saw it; a worker that registers sooner is
    # checked against ARM's answer, as worker-manager's registerWorker does (fetchVmInfo).
    vm_id_of: Callable[[str], str | None] | None = None
    # Offered to the path builder beside the document's own: Microsoft's shipped intermediates
    # and identity_roots' certificates that are not self-signed. Trusted only through a root.
    intermediates: tuple[x509.Certificate, ...] = ()
    now: Clock = utc_now  # the time documents and certificates are checked at

    def verify(self, proof: Mapping[str, Any], expected: ExpectedIdentity) -> None:
        fields = proof_strings(proof, {"document": DOCUMENT_MAX_CHARS})
        der = decode_base64(fields["document"], "document", max_bytes=DOCUMENT_MAX_BYTES)
        try:
            signed = pkcs7.parse_signed_data(der)
        except pkcs7.Pkcs7Error as exc:
            raise IdentityRejected(f"document is not PKCS#7 SignedData: {exc}") from None
        content = _content(signed)
        now = self.now()
        recorded = expected.provider_data.get("vmId")
        # Without a recorded vmId, ARM is asked for the VM's: by its resource id alone (an
        # imported worker no scan adopted yet is known by its VM name only, and is refused here
        # until the scan records its VM).
        if not recorded and not (self.vm_id_of and _resource_id(expected.cloud_id)):
            raise IdentityRejected("no vmId recorded for this worker")
        check_claims(
            content,
            expected,
            subscription_id=self.subscription_id,
            now=now,
            vm_id=recorded or None,
        )
        if len(signed.signers) != 1:
            raise IdentityRejected("document must have exactly one signer")
        signer_info = signed.signers[0]
        certificates = _certificates(signed)
        signer = _signer_certificate(signer_info, certificates)
        name = check_signer(signer, now)
        IDENTITY_SIGNATURE_CHECKS.labels(self.provider_id).inc()
        check_signature(signer_info, signer, signed.content or b"")
        carried = [c for c in certificates if c is not signer]
        self._check_chain(signer, name, carried, now)
        if not recorded:
            # Only a document Azure signed costs a call to ARM: one GET of this worker's VM.
            assert self.vm_id_of is not None and expected.cloud_id
            check_vm_id(content, self.vm_id_of(expected.cloud_id))

    def _check_chain(
        self,
        signer: x509.Certificate,
        name: str,
        carried: list[x509.Certificate],
        now: datetime,
    ) -> None:
        """`carried`: the document's certificates beside the signer. Only they, the signer and
        what was fetched name URLs to fetch; the shipped intermediates are offered as they are."""
        verifier = _chain_verifier(self.roots, name, now)
        tried: set[str] = set()
        failures: list[str] = []
        fetches = 0
        while True:
            try:
                verifier.verify(signer, [*carried, *self.intermediates])
                return
            except verification.VerificationError:
                pass
            except ValueError:  # a certificate the path builder cannot read
                raise IdentityRejected("a certificate of the chain is malformed") from None
            # Only now, with the content, signer name and signature checked, may a URL the
            # document names be fetched: each in turn (as worker-manager does) until one gives
            # a certificate; allowed locations only, a few fetches per document.
            fetched = None
            for url in _issuer_urls(signer, carried, tried):
                if fetches >= AIA_MAX_FETCHES and self.aia.cached(url) is None:
                    break
                tried.add(url)
                try:
                    check_aia_url(url)
                    fetches += self.aia.cached(url) is None
                    fetched = self.aia.get(url)
                    break
                except identity_fetch.FetchRefused as refused:
                    if refused.reason not in failures:
                        failures.append(refused.reason)
            if fetched is None:
                reason = "signer does not chain to a trusted root"
                if failures:
                    reason += f" (issuer certificate not fetched: {'; '.join(failures)})"
                raise IdentityRejected(reason)
            carried = [*carried, fetched]


def check_claims(
    content: Mapping[str, Any],
    expected: ExpectedIdentity,
    *,
    subscription_id: str,
    now: datetime,
    vm_id: str | None = "",
) -> None:
    """The signed content is fresh and names exactly this worker's VM. `vm_id` None: the
    caller checks the vmId itself, against ARM's answer (check_vm_id)."""
    if vm_id is not None:
        check_vm_id(content, vm_id or expected.provider_data.get("vmId"))
    if not _same_guid(content.get("subscriptionId"), subscription_id):
        raise IdentityRejected("subscription does not match the provider")
    stamps = content.get("timeStamp")
    if not isinstance(stamps, Mapping):
        raise IdentityRejected("document has no timeStamp")
    created = _timestamp(stamps.get("createdOn"), "createdOn")
    expires = _timestamp(stamps.get("expiresOn"), "expiresOn")
    if (now - expires).total_seconds() > CLOCK_SKEW_S:
        raise IdentityRejected("attested data expired")
    if (created - now).total_seconds() > CLOCK_SKEW_S:
        raise IdentityRejected("attested data is from the future")
    if (now - created).total_seconds() > ATTESTED_MAX_AGE_S:
        raise IdentityRejected("attested data is too old")
    require_not_before_request(created, expected, "attested data")


def check_vm_id(content: Mapping[str, Any], recorded_vm_id: Any) -> None:
    if not recorded_vm_id:
        raise IdentityRejected("no vmId recorded for this worker")
    if not _same_guid(content.get("vmId"), recorded_vm_id):
        raise IdentityRejected("vmId does not match the worker")


def check_signer(signer: x509.Certificate, now: datetime) -> str:
    """The signer certificate is Azure's metadata service's, and current. Returns the name its
    chain is verified for: metadata.azure.com, or the one label under it the certificate's
    subjectAltName gives (a TLS server name lives there; genuine leaves carry both)."""
    common = [
        str(a.value).lower() for a in signer.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    ]
    try:
        san = signer.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = [name.lower() for name in san.get_values_for_type(x509.DNSName)]
    except x509.ExtensionNotFound:
        dns = []
    if not any(SIGNER_NAME_PATTERN.fullmatch(name) for name in common + dns):
        raise IdentityRejected(f"signer is not {SIGNER_NAME}")
    server_names = sorted(
        (name for name in dns if SIGNER_NAME_PATTERN.fullmatch(name)),
        key=lambda name: name != SIGNER_NAME,
    )
    if not server_names:
        raise IdentityRejected(f"signer's subjectAltName does not name {SIGNER_NAME}")
    if not signer.not_valid_before_utc <= now <= signer.not_valid_after_utc:
        raise IdentityRejected("signer certificate is expired or not yet valid")
    try:
        usage = signer.extensions.get_extension_for_class(x509.KeyUsage).value
    except x509.ExtensionNotFound:
        return server_names[0]
    if not usage.digital_signature:
        raise IdentityRejected("signer certificate may not sign")
    return server_names[0]


def check_signature(info: pkcs7.SignerInfo, signer: x509.Certificate, content: bytes) -> None:
    """RSA PKCS#1 v1.5 over the content, or over the signed attributes that hash it."""
    digest = DIGESTS.get(info.digest_oid)
    if digest is None:
        raise IdentityRejected("digest algorithm is not SHA-2")
    if info.signature_oid != OID_RSA and RSA_WITH.get(info.signature_oid) is not digest:
        raise IdentityRejected("signature algorithm is not RSA with the named digest")
    try:
        key = signer.public_key()
    except (UnsupportedAlgorithm, ValueError):
        raise IdentityRejected("signer key is not supported") from None
    if not isinstance(key, rsa.RSAPublicKey) or key.key_size < 2048:
        raise IdentityRejected("signer key is not RSA of at least 2048 bits")
    signed = content
    if info.signed_attributes is not None:
        _check_signed_attributes(info.signed_attributes, digest, content)
        signed = info.signed_attributes
    if len(info.signature) != (key.key_size + 7) // 8:
        raise IdentityRejected("document signature is not the size of the signer's key")
    try:
        key.verify(info.signature, signed, padding.PKCS1v15(), digest())
        return
    except InvalidSignature:
        pass
    # Refused either way; this only names the reason: a signature the signer's key never made
    # (a changed bit), or the signer's genuine signature over other bytes (changed content).
    try:
        key.recover_data_from_signature(info.signature, padding.PKCS1v15(), digest())
    except InvalidSignature:
        raise IdentityRejected("document signature was not made with the signer's key") from None
    raise IdentityRejected("document signature does not verify: the signed data was changed")


def make_verifier(
    config: AzureProviderConfig,
    deployment_id: str,
    audience: str,
    *,
    budget: Budget | None = None,
    fetch: identity_fetch.Fetch = identity_fetch.fetch,
    now: Clock = utc_now,
) -> AzureIdentityVerifier:
    """`budget`: the account's shared API budget, which the VM look-ups draw from. Trusts the
    Microsoft roots wm ships and offers its intermediates; `identity_roots` adds to them."""
    del deployment_id, audience  # attested data names the VM; the row ties it to the deployment
    roots, intermediates = azure_certificates.bundled()
    added_roots, added_intermediates = load_identity_roots(config)
    return AzureIdentityVerifier(
        config.id,
        config.subscription_id,
        (*roots, *added_roots),
        AiaCache(fetch),
        vm_id_lookup(config, budget),
        intermediates=(*intermediates, *added_intermediates),
        now=now,
    )


def load_identity_roots(
    config: AzureProviderConfig,
) -> tuple[list[x509.Certificate], list[x509.Certificate]]:
    """(roots, intermediates) from `identity_roots`' PEM files: self-signed certificates become
    trusted roots; any other certificate in them is offered as an intermediate, which must still
    chain to a root (a simulated or private CA's issuing certificate beside its root)."""
    key_path = f"providers.{config.id}.identity_roots"
    roots: list[x509.Certificate] = []
    intermediates: list[x509.Certificate] = []
    for path in config.identity_roots:
        try:
            certificates = x509.load_pem_x509_certificates(Path(path).read_bytes())
        except OSError as exc:
            raise ConfigError([f"{key_path}: cannot read {path}: {exc.strerror}"]) from None
        except ValueError:
            raise ConfigError([f"{key_path}: {path} holds no PEM certificate"]) from None
        for certificate in certificates:
            (roots if _self_signed(certificate) else intermediates).append(certificate)
    return roots, intermediates


def vm_id_lookup(
    config: AzureProviderConfig, budget: Budget | None = None
) -> Callable[[str], str | None]:
    """One GET of a VM by its resource id: its vmId, or None when ARM has no such VM. The
    gate is the web process's own, classed as the provider's and drawing from the account's
    shared budget (wired by procs/providers.py): registrations share ARM's read limit with
    the scans. The SDK clients are built at the first call."""

    gate = make_gate(config)
    if budget is not None:
        gate.use_budget(budget)
    clients: list[AzureClients] = []
    lock = threading.Lock()

    def vm_id_of(resource_id: str) -> str | None:
        with lock:
            if not clients:
                clients.append(AzureClients(config))
        parts = resource_id.strip("/").split("/")
        group, name = parts[3], parts[-1]
        try:
            vm = gate.call(
                "VirtualMachines_Get", clients[0].compute.virtual_machines.get, group, name
            )
        except CloudError as error:
            if error.category is ErrorCategory.NOT_FOUND:
                return None
            raise IdentityRejected(f"cannot look up the worker's VM: {error.code}") from None
        return getattr(vm, "vm_id", None)

    return vm_id_of


# -- helpers ---------------------------------------------------------------------------------


def _resource_id(cloud_id: str | None) -> bool:
    return bool(cloud_id) and "/virtualmachines/" in (cloud_id or "").lower()


def _content(signed: pkcs7.SignedData) -> Mapping[str, Any]:
    if signed.content_type != pkcs7.OID_DATA or signed.content is None:
        raise IdentityRejected("document carries no signed data")
    if len(signed.content) > CONTENT_MAX_BYTES:
        raise IdentityRejected("signed data is too large")
    try:
        content = json.loads(signed.content)
    except ValueError:
        raise IdentityRejected("signed data is not JSON") from None
    if not isinstance(content, dict):
        raise IdentityRejected("signed data is not a JSON object")
    return content


def _certificates(signed: pkcs7.SignedData) -> list[x509.Certificate]:
    try:
        return [_parsed(x509.load_der_x509_certificate(der)) for der in signed.certificates]
    except Exception:  # see _parsed: whatever the type, it means a junk certificate
        raise IdentityRejected("document carries a malformed certificate") from None


def _parsed(certificate: x509.Certificate) -> x509.Certificate:
    # `cryptography` parses names and extensions lazily, on first use, and a corrupt one raises
    # from wherever that is (the signer's name check, the chain builder...) one of many types
    # (ValueError, TypeError, InvalidVersion, DuplicateExtension...). Parse them all now, so a
    # corrupt certificate is one rejection here and never an unexpected error (a 500) later.
    _ = (certificate.subject, certificate.issuer, certificate.extensions)
    for extension in certificate.extensions:
        _ = extension.value
    return certificate


def _signer_certificate(
    info: pkcs7.SignerInfo, certificates: Sequence[x509.Certificate]
) -> x509.Certificate:
    for certificate in certificates:
        if info.issuer is not None:
            if (
                certificate.serial_number == info.serial
                and certificate.issuer.public_bytes() == info.issuer
            ):
                return certificate
        elif (
            info.subject_key_id is not None and _subject_key_id(certificate) == info.subject_key_id
        ):
            return certificate
    raise IdentityRejected("document does not carry its signer's certificate")


def _subject_key_id(certificate: x509.Certificate) -> bytes | None:
    try:
        return certificate.extensions.get_extension_for_class(
            x509.SubjectKeyIdentifier
        ).value.digest
    except x509.ExtensionNotFound:
        return None


def _check_signed_attributes(
    attributes: bytes, digest: type[hashes.HashAlgorithm], content: bytes
) -> None:
    try:
        types = pkcs7.attribute_values(attributes, pkcs7.OID_CONTENT_TYPE)
        digests = pkcs7.attribute_values(attributes, pkcs7.OID_MESSAGE_DIGEST)
        content_type = [pkcs7.oid_of(t) for t in types]
    except pkcs7.Pkcs7Error as exc:
        raise IdentityRejected(f"signed attributes are malformed: {exc}") from None
    if content_type != [pkcs7.OID_DATA]:
        raise IdentityRejected("signed attributes name another content type")
    hasher = hashes.Hash(digest())
    hasher.update(content)
    if len(digests) != 1 or digests[0].tag != pkcs7.TAG_OCTET_STRING:
        raise IdentityRejected("signed attributes carry no message digest")
    if digests[0].value != hasher.finalize():
        raise IdentityRejected("signed attributes are for other content")


def _chain_verifier(roots: Sequence[x509.Certificate], name: str, now: datetime) -> Any:
    # The signer's certificate is a TLS server certificate for metadata.azure.com, and
    # Microsoft's current issuing CAs (Microsoft TLS G2 RSA CA OCSP 02/04) allow serverAuth
    # alone: the chain is verified as a server's for the signer's name, with the Web PKI's rules
    # for the CAs (dates, signatures, CA constraints, key usage, EKU) and the leaf (SAN, EKU).
    return (
        verification.PolicyBuilder()
        .store(verification.Store(list(roots)))
        .time(now)
        .max_chain_depth(MAX_CHAIN_DEPTH)
        .build_server_verifier(verification.DNSName(name))
    )


def _issuer_urls(
    signer: x509.Certificate, intermediates: Sequence[x509.Certificate], tried: set[str]
) -> list[str]:
    """The CA Issuers URLs not tried yet: the signer's first, in the order it lists them."""
    urls: list[str] = []
    for certificate in (signer, *intermediates):
        try:
            access = certificate.extensions.get_extension_for_oid(
                ExtensionOID.AUTHORITY_INFORMATION_ACCESS
            ).value
        except x509.ExtensionNotFound:
            continue
        urls += [
            d.access_location.value
            for d in access
            if d.access_method == AuthorityInformationAccessOID.CA_ISSUERS
            and isinstance(d.access_location, x509.UniformResourceIdentifier)
            and d.access_location.value not in tried
            and d.access_location.value not in urls
        ]
    return urls


def _self_signed(certificate: x509.Certificate) -> bool:
    if certificate.issuer != certificate.subject:
        return False
    try:
        certificate.verify_directly_issued_by(certificate)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _same_guid(claimed: Any, recorded: Any) -> bool:
    return isinstance(claimed, str) and bool(claimed) and claimed.lower() == str(recorded).lower()


def _timestamp(value: Any, what: str) -> datetime:
    if not isinstance(value, str) or len(value) > 40:
        raise IdentityRejected(f"timeStamp.{what} is missing")
    try:
        return datetime.strptime(value, TIMESTAMP_FORMAT)
    except ValueError:
        raise IdentityRejected(f"timeStamp.{what} is not a timestamp") from None
