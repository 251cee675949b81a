"""Hawk verification edge cases: host/port, malformed headers and ext, scheme rules."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import mohawk
import pytest

from wm.tc.credentials import IssuerCredentials, worker_credentials
from wm.tc.hawk import (
    AuthenticationFailed,
    Client,
    HawkRequest,
    authenticate,
    certificate_issuer,
    issuing_client_id,
    request_host_port,
)

FAR = datetime(2100, 1, 1, tzinfo=UTC)
ISSUER = Client(
    "wm/issuer",
    "issuer-token",
    ("assume:*", "auth:create-client:worker/*", "queue:*", "secrets:*", "worker-manager:*"),
    FAR,
)
NAME = "worker/aws/p/c/g/w"


def load(client_id):
    return ISSUER if client_id == ISSUER.client_id else None


def signed(client_id, key, ext=None, *, method="GET", resource="/api/x", content=b""):
    """A request signed as the taskcluster client signs (mohawk.Sender, sha256)."""
    sender = mohawk.Sender(
        {"id": client_id, "key": key, "algorithm": "sha256"},
        f"http://wm.example:8080{resource}",
        method,
        content=content.decode(),
        content_type="application/json" if content else "",
        ext=ext or {},
    )
    return HawkRequest(
        method=method,
        resource=resource,
        host="wm.example",
        port=8080,
        authorization=sender.request_header,
        content=content,
        content_type="application/json" if content else None,
    )


def ext_of(obj, *, urlsafe=False):
    raw = base64.b64encode(json.dumps(obj).encode())
    return (base64.urlsafe_b64encode(base64.b64decode(raw)) if urlsafe else raw).decode()


@pytest.fixture
def now() -> datetime:
    """Read when the test runs: mohawk signs with the current time, and a time read at import
    is minutes old by the time a long suite gets here."""
    return datetime.now(UTC)


def temporary(now, **changes):
    args = dict(
        provider_id="aws",
        worker_pool_id="p/c",
        worker_group="g",
        worker_id="w",
        expires=now + timedelta(days=1),
        now=now,
    )
    return worker_credentials(
        IssuerCredentials(ISSUER.client_id, ISSUER.access_token), **(args | changes)
    )


@pytest.mark.parametrize(
    ("host", "kwargs", "expected"),
    [
        ("wm.example", {}, ("wm.example", 80)),
        ("wm.example", {"tls": True}, ("wm.example", 443)),
        ("wm.example:8080", {}, ("wm.example", 8080)),
        ("[::1]:9000", {}, ("[::1]", 9000)),
        ("wm.example:8080", {"forwarded_port": "443"}, ("wm.example", 443)),
        ("wm.example:8080", {"forwarded_port": "8443, 80"}, ("wm.example", 8443)),
        ("wm.example:8080", {"forwarded_proto": "https"}, ("wm.example", 443)),
        ("wm.example:8080", {"forwarded_proto": "http"}, ("wm.example", 8080)),
        (
            "wm.example",
            {"forwarded_port": "8443", "forwarded_proto": "https"},
            ("wm.example", 8443),
        ),
    ],
)
def test_host_and_port_as_the_client_signed_them(host, kwargs, expected):
    assert request_host_port(host, **kwargs) == expected


def test_temporary_credentials_with_a_standard_base64_ext_verify(now):
    # The JS and Go clients send ext in the standard alphabet, the Python client URL-safe.
    creds = temporary(now)
    ext = ext_of({"certificate": json.loads(creds.certificate)})
    who = authenticate(signed(NAME, creds.access_token, ext), load, now=now)
    assert who.client_id == NAME
    assert who.expires == now.replace(microsecond=now.microsecond // 1000 * 1000) + timedelta(
        days=1
    )


def test_the_issuers_own_expiry_caps_the_certificates(now):
    soon = now + timedelta(hours=1)
    creds = temporary(now)
    ext = ext_of({"certificate": json.loads(creds.certificate)})
    who = authenticate(
        signed(NAME, creds.access_token, ext),
        lambda _id: Client(ISSUER.client_id, ISSUER.access_token, ISSUER.scopes, soon),
        now=now,
    )
    assert who.expires == soon


def test_roles_expand_through_the_expander(now):
    request = signed(ISSUER.client_id, ISSUER.access_token)
    who = authenticate(request, load, now=now, expand_scopes=lambda s: (*s, "role:extra"))
    assert "role:extra" in who.scopes


REFUSED = [
    (
        "both a header and a bewit",
        lambda: HawkRequest("GET", "/x?bewit=abc", "h", 80, authorization='Hawk id="a"'),
        "Cannot use two authentication schemes at once this request has both bewit in "
        "querystring and 'authorization' header",
    ),
    (
        "not Hawk",
        lambda: HawkRequest("GET", "/x", "h", 80, authorization="Bearer abc"),
        "Unauthorized: Bad header format",
    ),
    (
        "attributes missing",
        lambda: HawkRequest("GET", "/x", "h", 80, authorization='Hawk id="a", mac="b"'),
        "Unauthorized: Missing attributes",
    ),
    ("an unknown client", lambda: signed("nobody", "t"), "Client with clientId 'nobody' not found"),
    ("ext not base64 JSON", lambda: signed(NAME, "t", "bm90IGpzb24"), "Failed to parse ext"),
    (
        "a certificate that is a string",
        lambda: signed(NAME, "t", ext_of({"certificate": "{}"})),
        "ext.certificate must be a JSON object",
    ),
    (
        "an issuer naming itself",
        lambda: signed(NAME, "t", ext_of({"certificate": {"issuer": NAME}})),
        "ext.certificate.issuer must differ from the supplied clientId",
    ),
    (
        "an issuer that is not a string",
        lambda: signed(NAME, "t", ext_of({"certificate": {"issuer": 7}})),
        "ext.certificate.issuer must be a string",
    ),
    (
        "authorizedScopes not a list",
        lambda: signed(ISSUER.client_id, ISSUER.access_token, ext_of({"authorizedScopes": "x"})),
        "ext.authorizedScopes must be an array",
    ),
    (
        "a bewit on a POST",
        lambda: HawkRequest("POST", "/x?bewit=YQ", "h", 80),
        "Unauthorized: Invalid method",
    ),
    (
        "a bewit of three parts",
        lambda: HawkRequest(
            "GET", "/x?bewit=" + base64.urlsafe_b64encode(b"a\\1\\m").decode().rstrip("="), "h", 80
        ),
        "Bad Request: Invalid bewit structure",
    ),
    (
        "a certificate that is true",
        lambda: signed(NAME, "t", ext_of({"certificate": True})),
        "ext.certificate must be a JSON object",
    ),
    (
        "a certificate that is 1",
        lambda: signed(NAME, "t", ext_of({"certificate": 1})),
        "ext.certificate must be a JSON object",
    ),
    (
        "a bewit that is not base64",
        lambda: HawkRequest("GET", "/x?bewit=a", "h", 80),
        "Bad Request: Invalid bewit encoding",
    ),
    (
        "a bewit with bad characters",
        lambda: HawkRequest("GET", "/x?bewit=a+b", "h", 80),
        "Bad Request: Invalid bewit encoding",
    ),
]


@pytest.mark.parametrize(("scenario", "request_", "reason"), REFUSED, ids=[r[0] for r in REFUSED])
def test_malformed_requests_are_refused(scenario, request_, reason, now):
    # Taskcluster's words exactly: clients and operators match on them.
    with pytest.raises(AuthenticationFailed) as refused:
        authenticate(request_(), load, now=now)
    assert str(refused.value) == reason, scenario


def test_an_empty_authorized_scopes_list_leaves_only_anonymous(now):
    # `if (ext.authorizedScopes)` is true for [] in JavaScript: the restriction applies.
    request = signed(ISSUER.client_id, ISSUER.access_token, ext_of({"authorizedScopes": []}))
    assert authenticate(request, load, now=now).scopes == ("assume:anonymous",)


def test_the_issuer_is_found_without_verifying_anything(now):
    creds = temporary(now)
    ext = ext_of({"certificate": json.loads(creds.certificate)}, urlsafe=True)
    assert issuing_client_id(signed(NAME, "wrong", ext)) == ISSUER.client_id
    assert issuing_client_id(signed("plain/client", "t")) == "plain/client"
    assert issuing_client_id(HawkRequest("GET", "/x", "h", 80)) is None
    assert issuing_client_id(HawkRequest("GET", "/x", "h", 80, authorization="junk")) is None


def test_only_a_named_certificate_names_an_issuer(now):
    # What wm mints (named temporary credentials) names its issuer; the issuer's permanent
    # credentials, unnamed temporary ones (the issuer's own id) and no credentials do not.
    creds = temporary(now)
    named = ext_of({"certificate": json.loads(creds.certificate)}, urlsafe=True)
    unnamed = {**json.loads(creds.certificate)}
    del unnamed["issuer"]
    assert certificate_issuer(signed(NAME, "wrong", named)) == ISSUER.client_id
    assert certificate_issuer(signed(ISSUER.client_id, ISSUER.access_token)) is None
    assert (
        certificate_issuer(signed(ISSUER.client_id, "t", ext_of({"certificate": unnamed}))) is None
    )
    assert certificate_issuer(HawkRequest("GET", "/x", "h", 80)) is None
    assert certificate_issuer(HawkRequest("GET", "/x", "h", 80, authorization="junk")) is None
