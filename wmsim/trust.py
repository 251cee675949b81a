"""Keys and certificates the simulated clouds sign identity proofs with.

Each simulated cloud signs like its real counterpart but with keys of its own, and writes the
public half (a certificate, a JWKS, a root CA) to a file that a provider config's trust field
can name. RSA key generation costs 0.1-1 s, so keys are made once per process and name, and
only when a proof or trust file is first asked for.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

RSA_KEY_BITS = 2048
CERT_VALIDITY_DAYS = 3650


_keys: dict[str, rsa.RSAPrivateKey] = {}
_ca_keys: dict[str, ec.EllipticCurvePrivateKey] = {}
_keys_lock = threading.Lock()


def signing_key(name: str) -> rsa.RSAPrivateKey:
    """The process's key for `name`: every sim of one kind in a process signs with it."""
    with _keys_lock:  # one key per name even when the first two proofs are minted at once
        key = _keys.get(name)
        if key is None:
            key = _keys[name] = new_rsa_key()
        return key


def ca_key(name: str) -> ec.EllipticCurvePrivateKey:
    """The process's CA key for `name` (P-256: instant to make, and CAs need no RSA)."""
    with _keys_lock:
        key = _ca_keys.get(name)
        if key is None:
            key = _ca_keys[name] = ec.generate_private_key(ec.SECP256R1())
        return key


def new_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)


def name(common_name: str, organization: str = "wm simulated cloud") -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def self_signed(key: rsa.RSAPrivateKey, common_name: str) -> x509.Certificate:
    """A self-signed certificate that only carries `key` (as AWS's identity certificates do)."""
    now = dt.datetime.now(dt.UTC)
    subject = name(common_name)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=CERT_VALIDITY_DAYS))
        .sign(key, hashes.SHA256())
    )


def pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


class TrustDir:
    """Where a sim writes its public trust material: a given directory (the demo's state dir)
    or a temporary one made on first use and removed by `cleanup`."""

    def __init__(self, directory: Path | None, prefix: str) -> None:
        self._directory = directory
        self._prefix = prefix
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._lock = threading.Lock()

    def path(self, filename: str) -> Path:
        with self._lock:
            if self._directory is None:
                self._tmp = tempfile.TemporaryDirectory(prefix=self._prefix)
                self._directory = Path(self._tmp.name)
            self._directory.mkdir(parents=True, exist_ok=True)
            return self._directory / filename

    def cleanup(self) -> None:
        with self._lock:
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None
                self._directory = None
