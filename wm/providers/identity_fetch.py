"""The only way an identity verifier reaches the network: GETs to hosts on an allow-list.

A proof may name URLs (a certificate's AIA "CA Issuers" address), and an attacker writes the
proof, so every URL is checked before anything connects: scheme, exact host name on the
verifier's allow-list, no IP literals, no user info, the default port (or the verifier's
allowed ports). Then the name is
resolved and every address must be a public one (never loopback, private, link-local such as
the metadata service 169.254.169.254, or reserved), and the connection goes to an address that
passed. No redirects are followed, bodies are capped and calls time out.
"""

from __future__ import annotations

import http.client
import ipaddress
import re
import socket
import ssl
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from prometheus_client import Counter

from wm.ops.telemetry import log
from wm.workers.identity import IdentityRejected

FETCH_TIMEOUT_S = 5.0
_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")
DEFAULT_PORTS = {"http": 80, "https": 443}
# Never fetched whatever an allow-list says: the clouds' metadata services.
METADATA_HOSTS = frozenset(
    {"169.254.169.254", "fd00:ec2::254", "metadata.google.internal", "metadata", "localhost"}
)


@dataclass(frozen=True)
class Fetched:
    body: bytes
    headers: Mapping[str, str]  # lower-case names


Fetch = Callable[[str, int], Fetched]  # (checked url, max bytes) -> response


# refused: a URL stopped before any I/O; fetched / failed: a GET to an allowed host.
FETCHES = Counter(
    "wm_identity_fetches_total", "URLs identity verifiers asked to fetch, by outcome.", ["outcome"]
)


class FetchRefused(IdentityRejected):
    """A URL was refused or its fetch failed; nothing was trusted from it."""


def check_url(
    url: str,
    allowed_hosts: Collection[str],
    schemes: Collection[str],
    *,
    ports: Collection[int] | None = None,
) -> str:
    """The host of a URL wm may fetch; FetchRefused (before any I/O) for any other URL.
    `ports`: the ports a URL may name (None: only its scheme's default)."""
    try:
        return _check_url(url, allowed_hosts, schemes, ports)
    except FetchRefused as refused:
        _refused(refused)
        raise


def refused(reason: str) -> FetchRefused:
    """A refusal of a URL by a caller's own rule (counted and logged as check_url's are)."""
    refusal = FetchRefused(reason)
    _refused(refusal)
    return refusal


def _check_url(
    url: str,
    allowed_hosts: Collection[str],
    schemes: Collection[str],
    ports: Collection[int] | None,
) -> str:
    if not isinstance(url, str) or len(url) > 2048 or any(ord(c) < 0x21 for c in url):
        raise FetchRefused("certificate or key URL is malformed")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise FetchRefused("certificate or key URL is malformed") from None
    host = (parts.hostname or "").lower().rstrip(".")
    if parts.scheme not in schemes:
        raise FetchRefused("URL scheme is not allowed")
    if parts.username is not None or parts.password is not None:
        raise FetchRefused("URL carries user info")
    if _is_ip_literal(host):
        raise FetchRefused("URL host is an IP address")
    if host in METADATA_HOSTS or host not in allowed_hosts:
        raise FetchRefused("URL host is not on the allow-list")
    if port is not None and ports is None and port != DEFAULT_PORTS[parts.scheme]:
        raise FetchRefused("URL port is not the default")
    if port is not None and ports is not None and port not in ports:
        raise FetchRefused("URL port is not allowed")
    return host


def fetch(url: str, max_bytes: int) -> Fetched:
    """GET a URL that `check_url` accepted, from a public address of its host."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or DEFAULT_PORTS[parts.scheme]
    try:
        address = _public_address(host, port)
    except FetchRefused as refused:
        _refused(refused)
        raise
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = _PinnedHTTPS(host, address, port)
    else:
        connection = _PinnedHTTP(host, address, port)
    try:
        connection.request("GET", path, headers={"User-Agent": "wm"})
        response = connection.getresponse()
        if response.status != 200:  # redirects included: never followed
            raise FetchRefused(f"fetch answered {response.status}")
        body = response.read(max_bytes + 1)
        if len(body) > max_bytes:
            raise FetchRefused("fetched body is too large")
        FETCHES.labels("fetched").inc()
        log("identity-fetched", host=host)
        return Fetched(body, {k.lower(): v for k, v in response.getheaders()})
    except (OSError, http.client.HTTPException):
        FETCHES.labels("failed").inc()
        raise FetchRefused("fetch failed") from None
    except FetchRefused:
        FETCHES.labels("failed").inc()
        raise
    finally:
        connection.close()


def _refused(refused: FetchRefused) -> None:
    FETCHES.labels("refused").inc()
    # The reason only: the URL is the attacker's text.
    log("identity-fetch-refused", reason=refused.reason)


def _is_ip_literal(host: str) -> bool:
    candidate = host.strip("[]")
    try:
        ipaddress.ip_address(candidate)
    except ValueError:
        # Forms inet_aton accepts but ip_address does not (0x7f.1, 2130706433, 127.1).
        return all(_NUMERIC_LABEL.fullmatch(label) for label in candidate.split("."))
    return True


def _public_address(host: str, port: int) -> str:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        raise FetchRefused("URL host does not resolve") from None
    addresses = [str(info[4][0]) for info in infos]
    if not addresses or not all(ipaddress.ip_address(a).is_global for a in addresses):
        # A name on the allow-list that resolves inward is an attack or a broken resolver.
        raise FetchRefused("URL host resolves to a non-public address")
    return addresses[0]


class _PinnedHTTP(http.client.HTTPConnection):
    """HTTP to an address already checked; the Host header still names the host."""

    def __init__(self, host: str, address: str, port: int) -> None:
        super().__init__(host, port, timeout=FETCH_TIMEOUT_S)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to an address already checked; the certificate is checked for the host name."""

    def __init__(self, host: str, address: str, port: int) -> None:
        self._tls = ssl.create_default_context()
        super().__init__(host, port, timeout=FETCH_TIMEOUT_S, context=self._tls)
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)
