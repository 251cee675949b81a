"""What an authenticated request is granted (scheme, client, scopes, expiry, issuer), by header
and by bewit, and Taskcluster's reasons when it is refused."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import mohawk
import pytest
from mohawk.base import EmptyValue, Resource
from mohawk.bewit import get_bewit

from wm.tc.credentials import IssuerCredentials, worker_credentials
from wm.tc.hawk import (
    ANONYMOUS_LIFETIME,
    HAWK_TIMESTAMP_SKEW_S,
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
EXPIRED = Client("old/client", "old-token", ("queue:*",), datetime(2000, 1, 1, tzinfo=UTC))
NAME = "worker/aws/p/c/g/w"
HOST, PORT = "wm.example", 8080
WITH_ANONYMOUS = tuple(sorted({*ISSUER.scopes, "assume:anonymous"}))


def load(client_id: str) -> Client | None:
    return {c.client_id: c for c in (ISSUER, EXPIRED)}.get(client_id)


@pytest.fixture
def now() -> datetime:
    """Whole seconds (Hawk's timestamps are), read when the test runs: mohawk's bewit and header
    are checked against it, not against the wall clock."""
    return datetime.now(UTC).replace(microsecond=0)


def ext_of(obj: object) -> str:
    return base64.b64encode(json.dumps(obj).encode()).decode()


def certificate_ext(now: datetime) -> tuple[str, str]:
    """(access token, ext) of temporary credentials named NAME, issued by ISSUER for a day."""
    creds = worker_credentials(
        IssuerCredentials(ISSUER.client_id, ISSUER.access_token),
        provider_id="aws",
        worker_pool_id="p/c",
        worker_group="g",
        worker_id="w",
        expires=now + timedelta(days=1),
        now=now,
    )
    return creds.access_token, ext_of({"certificate": json.loads(creds.certificate)})


def bewit_request(
    client_id: str,
    key: str,
    expires: datetime,
    *,
    path: str = "/api/x",
    before: str = "",
    after: str = "",
    ext: str | None = None,
    method: str = "GET",
) -> HawkRequest:
    """A GET with a bewit, as the client's `buildSignedUrl` makes one: signed over the URL
    without it, then added among the other query parameters."""
    query = "&".join(q for q in (before, after) if q)
    signed_url = f"http://{HOST}:{PORT}{path}" + (f"?{query}" if query else "")
    bewit = get_bewit(
        Resource(
            credentials={"id": client_id, "key": key, "algorithm": "sha256"},
            url=signed_url,
            method="GET",
            timestamp=str(int(expires.timestamp())),
            nonce="",
            ext=ext,
        )
    ).rstrip("=")  # as the client's buildSignedUrl sends it
    params = "&".join(q for q in (before, f"bewit={bewit}", after) if q)
    return HawkRequest(method, f"{path}?{params}", HOST, PORT)


def header_request(
    client_id: str,
    key: str,
    *,
    ext: str | None = None,
    content: bytes = b"",
    always_hash_content: bool = True,
    timestamp: datetime | None = None,
    method: str = "POST",
) -> HawkRequest:
    sender = mohawk.Sender(
        {"id": client_id, "key": key, "algorithm": "sha256"},
        f"http://{HOST}:{PORT}/api/x",
        method,
        # Without always_hash_content, a client that passes no content signs no hash.
        content=content.decode() if always_hash_content else EmptyValue,
        content_type="application/json" if always_hash_content else EmptyValue,
        ext=ext,
        always_hash_content=always_hash_content,
        _timestamp=None if timestamp is None else str(int(timestamp.timestamp())),
    )
    return HawkRequest(
        method,
        "/api/x",
        HOST,
        PORT,
        authorization=sender.request_header,
        content=content,
        content_type="application/json",
    )


# --- what a bewit grants ---------------------------------------------------------------------


def test_a_bewit_of_permanent_credentials_grants_the_clients_scopes_until_its_expiry(now):
    who = authenticate(
        bewit_request(ISSUER.client_id, ISSUER.access_token, now + timedelta(minutes=5)),
        load,
        now=now,
    )
    assert (who.client_id, who.scheme, who.issuer) == (ISSUER.client_id, "hawk", None)
    assert who.scopes == WITH_ANONYMOUS
    assert who.expires == FAR


def test_a_bewit_of_temporary_credentials_grants_the_certificates_scopes_and_names_its_issuer(now):
    token, ext = certificate_ext(now)
    who = authenticate(
        bewit_request(NAME, token, now + timedelta(minutes=5), ext=ext), load, now=now
    )
    assert (who.client_id, who.scheme, who.issuer) == (NAME, "hawk", ISSUER.client_id)
    assert "assume:anonymous" in who.scopes
    assert "worker-manager:reregister-worker:p/c/g/w" in who.scopes
    assert "secrets:*" not in who.scopes  # the certificate's scopes, not the issuer's
    assert who.expires == now + timedelta(days=1)


@pytest.mark.parametrize(
    ("scenario", "before", "after"),
    [
        ("the bewit first of several parameters", "", "b=2"),
        ("the bewit last", "a=1", ""),
        ("the bewit between two", "a=1", "b=2"),
    ],
)
def test_the_bewit_is_checked_over_the_url_without_it(scenario, before, after, now):
    request = bewit_request(
        ISSUER.client_id,
        ISSUER.access_token,
        now + timedelta(minutes=5),
        before=before,
        after=after,
    )
    assert authenticate(request, load, now=now).client_id == ISSUER.client_id, scenario


def test_a_head_request_may_carry_a_bewit(now):
    request = bewit_request(
        ISSUER.client_id, ISSUER.access_token, now + timedelta(minutes=5), method="HEAD"
    )
    assert authenticate(request, load, now=now).client_id == ISSUER.client_id


def raw_bewit(*parts: str) -> HawkRequest:
    encoded = base64.urlsafe_b64encode("\\".join(parts).encode()).decode().rstrip("=")
    return HawkRequest("GET", f"/api/x?bewit={encoded}", HOST, PORT)


BEWITS_REFUSED = [
    (
        "a bewit that expired a second ago",
        lambda now: bewit_request(
            ISSUER.client_id, ISSUER.access_token, now - timedelta(seconds=1)
        ),
        "Unauthorized: Access expired",
    ),
    (
        "a bewit that expires this very second",
        lambda now: bewit_request(ISSUER.client_id, ISSUER.access_token, now),
        "Unauthorized: Access expired",
    ),
    (
        "a bewit signed with another key",
        lambda now: bewit_request(ISSUER.client_id, "not-the-token", now + timedelta(minutes=5)),
        "Unauthorized: Bad mac",
    ),
    (
        "a bewit moved to another path",
        lambda now: HawkRequest(
            "GET",
            bewit_request(
                ISSUER.client_id, ISSUER.access_token, now + timedelta(minutes=5)
            ).resource.replace("/api/x", "/api/y"),
            HOST,
            PORT,
        ),
        "Unauthorized: Bad mac",
    ),
    (
        "an empty bewit",
        lambda now: HawkRequest("GET", "/api/x?bewit=", HOST, PORT),
        "Unauthorized: Empty bewit",
    ),
    (
        "a bewit without its client",
        lambda now: raw_bewit("", "4102444800", "mac", ""),
        "Bad Request: Missing bewit attributes",
    ),
    (
        "a bewit without its expiry",
        lambda now: raw_bewit("c", "", "mac", ""),
        "Bad Request: Missing bewit attributes",
    ),
    (
        "a bewit without its mac",
        lambda now: raw_bewit("c", "4102444800", "", ""),
        "Bad Request: Missing bewit attributes",
    ),
    (
        "a bewit whose expiry is not a number",
        lambda now: raw_bewit("c", "soon", "mac", ""),
        "Unauthorized: Access expired",
    ),
    (
        "a bewit of an unknown client",
        lambda now: raw_bewit("nobody", "4102444800", "mac", ""),
        "Client with clientId 'nobody' not found",
    ),
]


@pytest.mark.parametrize(
    ("scenario", "request_", "reason"), BEWITS_REFUSED, ids=[r[0] for r in BEWITS_REFUSED]
)
def test_bewits_refused(scenario, request_, reason, now):
    with pytest.raises(AuthenticationFailed) as refused:
        authenticate(request_(now), load, now=now)
    assert str(refused.value) == reason, scenario


# --- what a signed header grants -------------------------------------------------------------


def test_temporary_credentials_name_their_issuer_and_grant_the_certificates_scopes(now):
    token, ext = certificate_ext(now)
    who = authenticate(header_request(NAME, token, ext=ext), load, now=now)
    assert (who.client_id, who.scheme, who.issuer) == (NAME, "hawk", ISSUER.client_id)
    assert "worker-manager:reregister-worker:p/c/g/w" in who.scopes
    assert who.expires == now + timedelta(days=1)


def test_permanent_credentials_name_no_issuer(now):
    who = authenticate(header_request(ISSUER.client_id, ISSUER.access_token), load, now=now)
    assert (who.client_id, who.scheme, who.issuer) == (ISSUER.client_id, "hawk", None)
    assert who.scopes == WITH_ANONYMOUS
    assert who.expires == FAR


def test_a_body_sent_without_a_payload_hash_is_accepted(now):
    # Taskcluster checks the hash only when the client sent one.
    request = header_request(
        ISSUER.client_id, ISSUER.access_token, content=b'{"a": 1}', always_hash_content=False
    )
    assert "hash=" not in (request.authorization or "")
    assert authenticate(request, load, now=now).client_id == ISSUER.client_id


def test_a_body_that_does_not_match_its_signed_hash_is_refused(now):
    request = header_request(ISSUER.client_id, ISSUER.access_token, content=b'{"a": 1}')
    tampered = HawkRequest(**{**request.__dict__, "content": b'{"a": 2}'})
    with pytest.raises(AuthenticationFailed) as refused:
        authenticate(tampered, load, now=now)
    assert str(refused.value) == (
        "Invalid payload hash: the request carries a signed hash of the payload that does not "
        "match the hash computed on the server side"
    )


@pytest.mark.parametrize(
    ("scenario", "skew", "accepted"),
    [
        ("signed just now", 0, True),
        ("signed the whole skew ago", -HAWK_TIMESTAMP_SKEW_S, True),
        ("signed the whole skew ahead", HAWK_TIMESTAMP_SKEW_S, True),
        ("signed a second more than the skew ago", -HAWK_TIMESTAMP_SKEW_S - 1, False),
        ("signed a second more than the skew ahead", HAWK_TIMESTAMP_SKEW_S + 1, False),
    ],
)
def test_the_signature_time_may_be_fifteen_minutes_off(scenario, skew, accepted, now):
    request = header_request(
        ISSUER.client_id, ISSUER.access_token, timestamp=now + timedelta(seconds=skew)
    )
    if accepted:
        assert authenticate(request, load, now=now).client_id == ISSUER.client_id, scenario
    else:
        with pytest.raises(AuthenticationFailed, match=r"^Unauthorized: Stale timestamp$"):
            authenticate(request, load, now=now)


def test_no_credentials_grant_the_anonymous_scopes_for_fifteen_minutes(now):
    who = authenticate(
        HawkRequest("GET", "/api/x", HOST, PORT),
        load,
        now=now,
        expand_scopes=lambda s: (*s, "queue:get-task:*"),
    )
    assert (who.client_id, who.scheme, who.issuer) == (None, "none", None)
    assert who.scopes == ("assume:anonymous", "queue:get-task:*")
    assert who.expires == now + ANONYMOUS_LIFETIME


def test_authorized_scopes_replace_the_clients_own(now):
    request = header_request(
        ISSUER.client_id, ISSUER.access_token, ext=ext_of({"authorizedScopes": ["queue:x"]})
    )
    assert authenticate(request, load, now=now).scopes == ("assume:anonymous", "queue:x")


def test_authorized_scopes_beyond_the_clients_are_refused_with_both_lists(now):
    request = header_request(
        ISSUER.client_id, ISSUER.access_token, ext=ext_of({"authorizedScopes": ["auth:*"]})
    )
    with pytest.raises(AuthenticationFailed) as refused:
        authenticate(request, load, now=now)
    assert str(refused.value) == "\n".join(
        [
            "Supplied credentials do not satisfy authorizedScopes; credentials have scopes:",
            "",
            "```",
            *WITH_ANONYMOUS,
            "```",
            "",
            "authorizedScopes are:",
            "",
            "```",
            "auth:*",
            "```",
        ]
    )


HEADERS_REFUSED = [
    (
        "signed with another key",
        lambda now: header_request(ISSUER.client_id, "not-the-token"),
        "Unauthorized: Bad mac",
    ),
    (
        "a client that has expired",
        lambda now: header_request(EXPIRED.client_id, EXPIRED.access_token),
        "Client with clientId: 'old/client' has expired",
    ),
    (
        "authorizedScopes that are not scopes",
        lambda now: header_request(
            ISSUER.client_id, ISSUER.access_token, ext=ext_of({"authorizedScopes": ["tab\t"]})
        ),
        "ext.authorizedScopes must be an array of valid scopes",
    ),
    (
        "a timestamp that is not a number",
        lambda now: HawkRequest(
            "GET", "/api/x", HOST, PORT, 'Hawk id="a", ts="soon", nonce="n", mac="m"'
        ),
        "Unauthorized: Invalid timestamp",
    ),
]


@pytest.mark.parametrize(
    ("scenario", "request_", "reason"), HEADERS_REFUSED, ids=[r[0] for r in HEADERS_REFUSED]
)
def test_headers_refused(scenario, request_, reason, now):
    with pytest.raises(AuthenticationFailed) as refused:
        authenticate(request_(now), load, now=now)
    assert str(refused.value) == reason, scenario


def test_a_replayed_nonce_is_refused_when_the_caller_tracks_them(now):
    request = header_request(ISSUER.client_id, ISSUER.access_token)
    with pytest.raises(AuthenticationFailed, match=r"^Unauthorized: Invalid nonce$"):
        authenticate(request, load, now=now, seen_nonce=lambda *_: True)


# --- what ext may hold, as JavaScript reads it --------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "ext"),
    [
        ("ext that is JSON but not an object", "[]"),
        ("a null certificate", {"certificate": None}),
        ("a false certificate", {"certificate": False}),
        ("a zero certificate", {"certificate": 0}),
        ("an empty-string certificate", {"certificate": ""}),
        ("null authorizedScopes", {"authorizedScopes": None}),
        ("empty-string authorizedScopes", {"authorizedScopes": ""}),
    ],
)
def test_falsy_ext_parts_are_as_good_as_absent(scenario, ext, now):
    text = base64.b64encode(ext.encode()).decode() if isinstance(ext, str) else ext_of(ext)
    who = authenticate(
        header_request(ISSUER.client_id, ISSUER.access_token, ext=text), load, now=now
    )
    assert (who.client_id, who.scopes, who.issuer) == (ISSUER.client_id, WITH_ANONYMOUS, None)


@pytest.mark.parametrize(
    ("scenario", "certificate", "reason"),
    [
        ("an empty list", [], "ext.certificate must be a JSON object"),
        ("an empty object", {}, "ext.certificate.version must be 1"),
    ],
)
def test_an_empty_certificate_is_still_checked(scenario, certificate, reason, now):
    request = header_request(NAME, "t", ext=ext_of({"certificate": certificate}))
    with pytest.raises(AuthenticationFailed) as refused:
        authenticate(request, lambda _id: ISSUER, now=now)
    assert str(refused.value) == reason, scenario


def test_a_certificate_with_an_empty_issuer_is_the_signers_own(now):
    # `if (ext.certificate.issuer)`: an empty issuer names the signer itself.
    creds = worker_credentials(
        IssuerCredentials(ISSUER.client_id, ISSUER.access_token),
        provider_id="aws",
        worker_pool_id="p/c",
        worker_group="g",
        worker_id="w",
        expires=now + timedelta(days=1),
        now=now,
    )
    certificate = {**json.loads(creds.certificate), "issuer": ""}
    request = header_request(NAME, "t", ext=ext_of({"certificate": certificate}))
    with pytest.raises(AuthenticationFailed, match=f"Client with clientId '{NAME}' not found"):
        authenticate(request, load, now=now)


def test_an_invalid_host_header_is_refused():
    with pytest.raises(AuthenticationFailed, match=r"^Invalid Host header$"):
        request_host_port("wm.example:80:80")


def test_the_issuer_of_a_bewit_is_read_without_verifying_it(now):
    _, ext = certificate_ext(now)
    named = bewit_request(NAME, "wrong", now + timedelta(minutes=5), ext=ext)
    plain = bewit_request(ISSUER.client_id, "wrong", now + timedelta(minutes=5))
    assert (issuing_client_id(named), certificate_issuer(named)) == (
        ISSUER.client_id,
        ISSUER.client_id,
    )
    assert (issuing_client_id(plain), certificate_issuer(plain)) == (ISSUER.client_id, None)
    for junk in (HawkRequest("GET", "/x?bewit=", HOST, PORT), raw_bewit("a", "1", "m")):
        assert (issuing_client_id(junk), certificate_issuer(junk)) == (None, None)


@pytest.mark.parametrize(
    ("scenario", "ext", "issuer"),
    [
        ("ext that does not parse", "bm90IGpzb24", "worker/x"),
        ("a certificate that is not an object", ext_of({"certificate": "c"}), "worker/x"),
        ("an issuer that is not a string", ext_of({"certificate": {"issuer": 7}}), "worker/x"),
        ("an issuer", ext_of({"certificate": {"issuer": "wm/i"}}), "wm/i"),
    ],
)
def test_the_signer_is_the_client_unless_a_certificate_names_an_issuer(scenario, ext, issuer):
    request = header_request("worker/x", "t", ext=ext)
    assert issuing_client_id(request) == issuer, scenario


def test_a_body_with_its_payload_hash_is_accepted(now):
    request = header_request(ISSUER.client_id, ISSUER.access_token, content=b'{"a": 1}')
    assert "hash=" in (request.authorization or "")
    assert authenticate(request, load, now=now).client_id == ISSUER.client_id


def test_a_client_expiring_this_instant_is_still_valid(now):
    client = Client(ISSUER.client_id, ISSUER.access_token, ISSUER.scopes, now)
    request = header_request(ISSUER.client_id, ISSUER.access_token)
    assert authenticate(request, lambda _id: client, now=now).expires == now


def test_a_certificate_beyond_its_issuers_scopes_is_refused_naming_the_issuer(now):
    token, ext = certificate_ext(now)
    poorer = Client(ISSUER.client_id, ISSUER.access_token, ("queue:*",), FAR)
    with pytest.raises(AuthenticationFailed) as refused:
        authenticate(header_request(NAME, token, ext=ext), lambda _id: poorer, now=now)
    assert str(refused.value).startswith(
        f"ext.certificate issuer `{ISSUER.client_id}` doesn't have `auth:create-client:{NAME}`"
    )


def url_safe_unpadded_ext(authorized: list[str]) -> str:
    """authorizedScopes as the Python client sends ext (URL-safe alphabet), unpadded, of a
    length that needs two '=' (and that no other count of them would mend), with both of the
    alphabet's differing characters in it."""
    for n in range(2000):
        standard = ext_of({"authorizedScopes": authorized, "pad": "?" * n, "x": "~~~>>>"})
        text = standard.rstrip("=")
        if len(text) % 20 == 10 and "+" in text and "/" in text:
            return text.replace("+", "-").replace("/", "_")
    raise AssertionError("no such ext")


def test_ext_in_the_url_safe_alphabet_without_padding_is_read(now):
    ext = url_safe_unpadded_ext(["queue:x"])
    request = header_request(ISSUER.client_id, ISSUER.access_token, ext=ext)
    assert authenticate(request, load, now=now).scopes == ("assume:anonymous", "queue:x")


@pytest.mark.parametrize(
    ("scenario", "certificate", "issuer"),
    [
        ("an issuer named", {"issuer": "wm/i"}, "wm/i"),
        ("no issuer", {}, None),
        ("an empty issuer", {"issuer": ""}, None),
        ("an issuer that is not a string", {"issuer": 7}, None),
        ("the signer naming itself", {"issuer": "worker/x"}, None),
    ],
)
def test_only_a_certificate_naming_another_client_names_an_issuer(scenario, certificate, issuer):
    request = header_request("worker/x", "t", ext=ext_of({"certificate": certificate}))
    assert certificate_issuer(request) == issuer, scenario
