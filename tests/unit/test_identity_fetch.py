"""The identity verifiers' only way out: allow-listed URLs, public addresses, cached keys."""

from __future__ import annotations

import socket

import pytest

from wm.providers import identity_fetch
from wm.providers.azure.identity import AIA_HOSTS, check_aia_url
from wm.providers.gcp import identity as gcp_identity
from wm.providers.identity_fetch import FetchRefused, check_url


@pytest.mark.parametrize(
    "url",
    [
        "http://www.microsoft.com/pkiops/certs/Microsoft%20Azure%20RSA%20TLS%20Issuing%20CA%2003.crt",
        "http://WWW.Microsoft.com./pkiops/certs/ca.crt",
        "http://cacerts.digicert.com/DigiCertGlobalRootG2.crt",
        "http://www.microsoft.com:80/ca.crt",
    ],
)
def test_allow_listed_aia_urls_pass(url: str):
    assert check_url(url, AIA_HOSTS, ("http",)) in AIA_HOSTS


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://[::ffff:169.254.169.254]/",
        "http://127.0.0.1/",
        "http://2852039166/",  # 169.254.169.254 as one number
        "http://0xa9.0xfe.0xa9.0xfe/",
        "http://0251.0376.0251.0376/",
        "http://metadata.google.internal/",
        "http://metadata/",
        "http://localhost/",
        "http://www.microsoft.com.attacker.test/",
        "http://attacker.test/?www.microsoft.com",
        "http://www.microsoft.com@attacker.test/",
        "http://attacker.test#@www.microsoft.com/",
        "https://www.microsoft.com/",
        "file:///etc/passwd",
        "gopher://www.microsoft.com/",
        "http://www.microsoft.com:8080/",
        "http://www.microsoft.com:99999/",
        "http://www.microsoft.com/\r\nHost: evil",
        "",
        "http:///",
    ],
)
def test_everything_else_is_refused_before_any_io(url: str, monkeypatch: pytest.MonkeyPatch):
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("check_url must not touch the network")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    with pytest.raises(FetchRefused):
        check_url(url, AIA_HOSTS, ("http",))


@pytest.mark.parametrize("address", ["169.254.169.254", "10.0.0.7", "127.0.0.1", "fd00:ec2::254"])
def test_an_allowed_name_resolving_inward_is_not_fetched(
    address: str, monkeypatch: pytest.MonkeyPatch
):
    family = socket.AF_INET6 if ":" in address else socket.AF_INET

    def resolve(host: str, port: int, **kwargs: object) -> list:
        return [(family, socket.SOCK_STREAM, 6, "", (address, port))]

    def no_connection(*args: object, **kwargs: object) -> None:
        raise AssertionError("connected to a non-public address")

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.setattr(socket, "create_connection", no_connection)
    with pytest.raises(FetchRefused, match="non-public"):
        identity_fetch.fetch("http://www.microsoft.com/ca.crt", 1024)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_unknown_kid_reloads_the_keys_at_most_once_a_minute():
    loads: list[float] = []
    clock = Clock()

    def load() -> tuple[bytes, float]:
        loads.append(clock.now)
        return b'{"keys": []}', 3600.0

    keys = gcp_identity.JwksKeys(load, clock=clock)
    for kid in ("a", "b", "c"):
        assert keys.key(kid) is None
    clock.now += gcp_identity.JWKS_REFRESH_MIN_S
    assert keys.key("d") is None
    assert loads == [1000.0, 1000.0 + gcp_identity.JWKS_REFRESH_MIN_S]


def test_googles_cache_control_sets_how_long_keys_are_kept():
    from tests.fixtures.identity import RecordingFetch

    fetch = RecordingFetch({gcp_identity.GOOGLE_JWKS_URL: b'{"keys": []}'})
    original = fetch.__call__

    def with_headers(url: str, max_bytes: int) -> identity_fetch.Fetched:
        answer = original(url, max_bytes)
        return identity_fetch.Fetched(answer.body, {"cache-control": "public, max-age=19000"})

    load = gcp_identity._google_loader(with_headers)
    assert load() == (b'{"keys": []}', 19000.0)
    assert fetch.calls == [gcp_identity.GOOGLE_JWKS_URL]


# worker-manager's isAllowedAiaLocation (src/providers/azure/index.js), URL by URL.
@pytest.mark.parametrize(
    ("url", "refusal"),
    [
        (
            "http://www.microsoft.com/pkiops/certs/Microsoft%20TLS%20G2%20RSA%20CA%20OCSP%2002.crt",
            None,
        ),
        (
            "https://www.microsoft.com/pkiops/certs/Microsoft%20TLS%20G2%20RSA%20CA%20OCSP%2002.crt",
            None,
        ),
        (
            "http://caissuers.microsoft.com/pkiops/certs/Microsoft%20TLS%20G2%20RSA%20CA%20OCSP%2002.crt",
            None,
        ),
        ("http://cacerts.digicert.com/DigiCertGlobalRootG2.crt", None),
        ("http://cacerts.digicert.cn/DigiCertGlobalRootG2.crt", None),
        ("http://cacerts.geotrust.com/GeoTrustGlobalCA.crt", None),
        ("http://CAISSUERS.Microsoft.com./any/path.crt", None),
        ("http://www.microsoft.com:80/pkiops/certs/ca.crt", None),
        ("http://www.microsoft.com:443/pkiops/certs/ca.crt", None),
        ("https://cacerts.digicert.com:443/ca.crt", None),
        ("http://www.microsoft.com/pki/mscorp/Microsoft%20IT%20TLS%20CA%204.crt", "path"),
        ("http://www.microsoft.com/pkiops/certsx/ca.crt", "path"),
        ("http://www.microsoft.com/", "path"),
        ("http://www.microsoft.com/pkiops/certs/../../evil.crt", "dot segments"),
        ("http://www.microsoft.com/pkiops/certs/%2e%2e/%2E%2E/evil.crt", "dot segments"),
        ("http://www.microsoft.com:8080/pkiops/certs/ca.crt", "port"),
        ("http://cacerts.digicert.com:8443/ca.crt", "port"),
        ("ftp://cacerts.digicert.com/ca.crt", "scheme"),
        ("file:///etc/ssl/ca.crt", "scheme"),
        ("http://user:secret@cacerts.digicert.com/ca.crt", "user info"),
        ("http://user@caissuers.microsoft.com/ca.crt", "user info"),
        ("http://23.45.67.89/pkiops/certs/ca.crt", "IP address"),
        ("http://[2600:1406::1]/pkiops/certs/ca.crt", "IP address"),
        ("http://microsoft.com/pkiops/certs/ca.crt", "allow-list"),
        ("http://crl.microsoft.com/pkiops/certs/ca.crt", "allow-list"),
        ("http://oneocsp.microsoft.com/ocsp", "allow-list"),
        ("http://cacerts.digicert.com.evil.test/ca.crt", "allow-list"),
        ("http://evil.example/cert.crt", "allow-list"),
        ("http://169.254.169.254/metadata/ca.crt", "IP address"),
    ],
)
def test_aia_urls_are_allowed_exactly_where_worker_manager_allows_them(
    url: str, refusal: str | None, monkeypatch: pytest.MonkeyPatch
):
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the allow-list must not touch the network")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    if refusal is None:
        assert check_aia_url(url) in AIA_HOSTS
    else:
        with pytest.raises(FetchRefused, match=refusal):
            check_aia_url(url)
