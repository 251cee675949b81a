"""Verifying a Hawk-signed request the way Taskcluster's auth service does, without I/O.

Sources (taskcluster/taskcluster @ 9d59eb59):
- `services/auth/src/signaturevalidator.js`: the Authorization header or a `bewit` query
  parameter (GET/HEAD only); `ext` = base64 JSON `{certificate?, authorizedScopes?}`; a named
  certificate's `issuer` is the client whose token signs it; 15 minutes of timestamp skew;
  `authorizedScopes` must be satisfied by the (certificate's) scopes and then replace them; every
  client implicitly holds `assume:anonymous`; no credentials at all = `no-auth` with the
  anonymous scopes for 15 minutes; failures carry Taskcluster's messages;
- `libraries/api/src/middleware/auth.js`: host and port as the client signed them (Host header,
  overridden by X-Forwarded-Port, or 443 for X-Forwarded-Proto https), the resource as received
  (path and query), both schemes at once refused, the payload hash checked against the raw body
  when the header carries one.

The Hawk MAC and payload hash are computed by `mohawk` (the library the `taskcluster` client
signs with). Who a client is and what it holds comes from a `ClientLoader`: wm resolves the
issuer of its own certificates locally; other clients are for the auth service's
`authenticateHawk` (`certificate_issuer` tells the caller which case a request is).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import mohawk
import mohawk.exc
import mohawk.util
from mohawk.base import Resource

from wm.tc.credentials import (
    CertificateInvalid,
    IssuerCredentials,
    parse_certificate,
    verify_certificate,
)
from wm.tc.scopes import satisfies, valid_scope

# signaturevalidator.js: `timestampSkewSec: 15 * 60`, and the life of a no-auth result.
HAWK_TIMESTAMP_SKEW_S = 15 * 60
ANONYMOUS_LIFETIME = timedelta(minutes=15)
ANONYMOUS_SCOPE = "assume:anonymous"

# signaturevalidator.js / hawk: how a bewit sits in the resource.
_BEWIT_IN_RESOURCE = re.compile(r"^/.*[?&]bewit=")
_BEWIT_SPLIT = re.compile(r"^(/.*)([?&])bewit=([^&$]*)(?:&(.+))?$")
_BEWIT_CHARS = re.compile(r"^[\w-]*$")


class AuthenticationFailed(Exception):
    """The request's credentials were refused; str() is the message Taskcluster would give."""


@dataclass(frozen=True)
class HawkRequest:
    """What the signature covers, as the server received it."""

    method: str
    resource: str  # path and query exactly as received (Express `originalUrl`)
    host: str  # Host header without the port
    port: int
    authorization: str | None = None
    content: bytes = b""  # the raw body
    content_type: str | None = None


@dataclass(frozen=True)
class Client:
    """A client as the auth service knows it: the issuer of a certificate, or the signer."""

    client_id: str
    access_token: str = field(repr=False)
    scopes: tuple[str, ...]  # already expanded (roles resolved)
    expires: datetime


@dataclass(frozen=True)
class Authenticated:
    """Who signed the request and what they may do (auth `authenticateHawk` success/no-auth)."""

    client_id: str | None  # the credential name; None when the request carried none
    scheme: Literal["hawk", "none"]
    scopes: tuple[str, ...]  # restricted by certificate and authorizedScopes, anonymous added
    expires: datetime
    # The issuer of the temporary credentials that signed, when their certificate was checked
    # here against that issuer's access token (None: permanent credentials, none, or checked by
    # the auth service, which does not say).
    issuer: str | None = None


ClientLoader = Callable[[str], Client | None]
ScopeExpander = Callable[[Sequence[str]], Sequence[str]]
NonceSeen = Callable[[str, str, str], bool]


def request_host_port(
    host_header: str,
    *,
    tls: bool = False,
    forwarded_port: str | None = None,
    forwarded_proto: str | None = None,
) -> tuple[str, int]:
    """Host and port the client signed, as Taskcluster's API library derives them."""
    match = re.fullmatch(r"(\[[^\]]+\]|[^:]+)(?::(\d+))?", host_header.strip())
    if match is None:
        raise AuthenticationFailed("Invalid Host header")
    name, port_text = match.groups()
    port = int(port_text) if port_text else (443 if tls else 80)
    if forwarded_port is not None:
        port = int(forwarded_port.split(",")[0].strip())
    elif forwarded_proto is not None and forwarded_proto == "https":
        port = 443
    return name, port


def issuing_client_id(request: HawkRequest) -> str | None:
    """The client whose access token signed the request (a certificate's issuer, if any)."""
    try:
        client_id, ext = _credentials_in(request)
    except AuthenticationFailed:
        return None
    if client_id is None:
        return None
    try:
        issuer = _parse_ext(ext).get("certificate", {}).get("issuer") if ext else None
    except (AuthenticationFailed, AttributeError):
        return client_id
    return issuer if isinstance(issuer, str) else client_id


def certificate_issuer(request: HawkRequest) -> str | None:
    """The `issuer` a request's certificate names (named temporary credentials), else None:
    permanent credentials, unnamed temporary ones, none, or a header that does not parse."""
    try:
        client_id, ext = _credentials_in(request)
        certificate = _parse_ext(ext).get("certificate") if client_id and ext else None
    except AuthenticationFailed:
        return None
    issuer = certificate.get("issuer") if isinstance(certificate, Mapping) else None
    return issuer if isinstance(issuer, str) and issuer and issuer != client_id else None


def authenticate(
    request: HawkRequest,
    load_client: ClientLoader,
    *,
    now: datetime,
    expand_scopes: ScopeExpander = tuple,
    seen_nonce: NonceSeen | None = None,
) -> Authenticated:
    """Authenticate like `authenticateHawk`; raises AuthenticationFailed with its message.

    `seen_nonce(client_id, nonce, ts)` may refuse replays; Taskcluster does not track nonces
    (the 15-minute skew bounds a replay), so by default none is refused.
    """
    has_bewit = _BEWIT_IN_RESOURCE.match(request.resource) is not None
    if request.authorization and has_bewit:
        raise AuthenticationFailed(
            "Cannot use two authentication schemes at once this request has both bewit in "
            "querystring and 'authorization' header"
        )
    if request.authorization:
        return _authenticate_header(
            request, request.authorization, load_client, now, expand_scopes, seen_nonce
        )
    if has_bewit:
        return _authenticate_bewit(request, load_client, now, expand_scopes)
    return Authenticated(
        client_id=None,
        scheme="none",
        scopes=tuple(expand_scopes([ANONYMOUS_SCOPE])),
        expires=now + ANONYMOUS_LIFETIME,
    )


def _authenticate_header(
    request: HawkRequest,
    authorization: str,
    load_client: ClientLoader,
    now: datetime,
    expand_scopes: ScopeExpander,
    seen_nonce: NonceSeen | None,
) -> Authenticated:
    attributes = _parse_header(authorization)
    name = attributes["id"]
    key, scopes, expires = _load_credentials(
        name, attributes.get("ext"), load_client, now, expand_scopes
    )
    try:
        mohawk.Receiver(
            lambda _id: {"id": name, "key": key, "algorithm": "sha256"},
            authorization,
            _signed_url(request, request.resource),
            request.method.upper(),
            content=request.content,
            content_type=request.content_type or "",
            seen_nonce=seen_nonce or (lambda *_: False),
            # Taskcluster checks the hash only when the client sent one.
            accept_untrusted_content=True,
            # The timestamp is checked below against `now`, not against the wall clock.
            timestamp_skew_in_seconds=float("inf"),
        )
    except mohawk.exc.MacMismatch as error:
        raise AuthenticationFailed("Unauthorized: Bad mac") from error
    except mohawk.exc.MisComputedContentHash as error:
        raise AuthenticationFailed(
            "Invalid payload hash: the request carries a signed hash of the payload that does "
            "not match the hash computed on the server side"
        ) from error
    except mohawk.exc.AlreadyProcessed as error:
        raise AuthenticationFailed("Unauthorized: Invalid nonce") from error
    except mohawk.exc.HawkFail as error:
        raise AuthenticationFailed(f"Unauthorized: {error}") from error
    if abs(int(attributes["ts"]) - now.timestamp()) > HAWK_TIMESTAMP_SKEW_S:
        raise AuthenticationFailed("Unauthorized: Stale timestamp")
    return Authenticated(
        client_id=name, scheme="hawk", scopes=scopes, expires=expires, issuer=_issuer(request, name)
    )


def _authenticate_bewit(
    request: HawkRequest,
    load_client: ClientLoader,
    now: datetime,
    expand_scopes: ScopeExpander,
) -> Authenticated:
    if request.method.upper() not in ("GET", "HEAD"):
        raise AuthenticationFailed("Unauthorized: Invalid method")
    parts = _BEWIT_SPLIT.match(request.resource)
    if parts is None or not parts.group(3):
        raise AuthenticationFailed("Unauthorized: Empty bewit")
    base, separator, encoded, rest = parts.groups()
    bewit = _decode_bewit(encoded)
    if len(bewit) != 4:
        raise AuthenticationFailed("Bad Request: Invalid bewit structure")
    name, exp, mac, ext = bewit
    if not (name and exp and mac):
        raise AuthenticationFailed("Bad Request: Missing bewit attributes")
    if not exp.isdigit() or int(exp) <= now.timestamp():
        raise AuthenticationFailed("Unauthorized: Access expired")
    key, scopes, expires = _load_credentials(name, ext or None, load_client, now, expand_scopes)
    # The MAC covers the resource without the bewit parameter (hawk `authenticateBewit`).
    resource = base + (separator + rest if rest else "")
    signed = Resource(
        credentials={"id": name, "key": key, "algorithm": "sha256"},
        url=_signed_url(request, resource),
        method="GET",
        timestamp=exp,
        nonce="",
        ext=ext,
    )
    expected = mohawk.util.calculate_mac("bewit", signed, None).decode()
    if not mohawk.util.strings_match(expected, mac):
        raise AuthenticationFailed("Unauthorized: Bad mac")
    return Authenticated(
        client_id=name, scheme="hawk", scopes=scopes, expires=expires, issuer=_issuer(request, name)
    )


def _issuer(request: HawkRequest, name: str) -> str | None:
    """The certificate's issuer of a request authenticated here (its signature verified with
    that issuer's token), None when it was signed with permanent credentials."""
    signer = issuing_client_id(request)
    return signer if signer != name else None


def _load_credentials(
    name: str,
    ext_text: str | None,
    load_client: ClientLoader,
    now: datetime,
    expand_scopes: ScopeExpander,
) -> tuple[str, tuple[str, ...], datetime]:
    """(access token, scopes, expires) for a request signed as `name` (`loadCredentials`)."""
    ext = _parse_ext(ext_text) if ext_text else {}
    certificate = ext.get("certificate")
    if _js_truthy(certificate) and not isinstance(certificate, Mapping):
        raise AuthenticationFailed("ext.certificate must be a JSON object")
    issuer_id = name
    if _js_truthy(certificate) and _js_truthy(certificate.get("issuer")):
        issuer_id = certificate["issuer"]
        if not isinstance(issuer_id, str):
            raise AuthenticationFailed("ext.certificate.issuer must be a string")
        if issuer_id == name:
            raise AuthenticationFailed(
                "ext.certificate.issuer must differ from the supplied clientId"
            )
    client = load_client(issuer_id)
    if client is None:
        raise AuthenticationFailed(f"Client with clientId '{issuer_id}' not found")
    if client.expires < now:
        raise AuthenticationFailed(f"Client with clientId: '{issuer_id}' has expired")
    key, scopes, expires = client.access_token, client.scopes, client.expires

    if _js_truthy(certificate):
        try:
            granted = verify_certificate(
                parse_certificate(certificate),
                credential_name=name,
                issuer=IssuerCredentials(client.client_id, client.access_token),
                issuer_scopes=client.scopes,
                now=now,
            )
        except CertificateInvalid as error:
            raise AuthenticationFailed(str(error)) from error
        key, scopes, expires = granted.access_token, granted.scopes, min(expires, granted.expires)

    authorized = ext.get("authorizedScopes")
    if _js_truthy(authorized):
        if not isinstance(authorized, list):
            raise AuthenticationFailed("ext.authorizedScopes must be an array")
        if not all(valid_scope(s) for s in authorized):
            raise AuthenticationFailed("ext.authorizedScopes must be an array of valid scopes")
        held = tuple(expand_scopes(_with_anonymous(scopes)))
        if not satisfies(held, {"AllOf": authorized}):
            raise AuthenticationFailed(
                "\n".join(
                    [
                        "Supplied credentials do not satisfy authorizedScopes; credentials have "
                        "scopes:",
                        "",
                        "```",
                        *held,
                        "```",
                        "",
                        "authorizedScopes are:",
                        "",
                        "```",
                        *authorized,
                        "```",
                    ]
                )
            )
        scopes = tuple(authorized)
    return key, tuple(expand_scopes(_with_anonymous(scopes))), expires


def _credentials_in(request: HawkRequest) -> tuple[str | None, str | None]:
    """(id, ext) from the Authorization header or the bewit, without checking anything."""
    if request.authorization:
        attributes = _parse_header(request.authorization)
        return attributes["id"], attributes.get("ext")
    parts = _BEWIT_SPLIT.match(request.resource)
    if parts is None or not parts.group(3):
        return None, None
    bewit = _decode_bewit(parts.group(3))
    if len(bewit) != 4:
        return None, None
    return bewit[0] or None, bewit[3] or None


def _parse_header(authorization: str) -> dict[str, str]:
    try:
        attributes = mohawk.util.parse_authorization_header(authorization)
    except (mohawk.exc.HawkFail, ValueError) as error:
        raise AuthenticationFailed("Unauthorized: Bad header format") from error
    if not all(attributes.get(k) for k in ("id", "ts", "nonce", "mac")):
        raise AuthenticationFailed("Unauthorized: Missing attributes")
    if not attributes["ts"].isdigit():
        raise AuthenticationFailed("Unauthorized: Invalid timestamp")
    return attributes


def _parse_ext(ext_text: str) -> dict[str, Any]:
    # Node's Buffer.from(s, 'base64') reads both alphabets and missing padding; the Python
    # client sends the URL-safe one, the JS and Go clients the standard one.
    try:
        standard = ext_text.replace("-", "+").replace("_", "/")
        decoded = base64.b64decode(standard + "=" * (-len(standard) % 4))
        ext = json.loads(decoded.decode("utf-8"))
    except ValueError as error:
        raise AuthenticationFailed("Failed to parse ext") from error
    if not isinstance(ext, dict):
        # JSON.parse accepts any value; only an object can carry certificate/authorizedScopes.
        return {}
    return ext


def _decode_bewit(encoded: str) -> list[str]:
    if not _BEWIT_CHARS.match(encoded):
        raise AuthenticationFailed("Bad Request: Invalid bewit encoding")
    try:
        text = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("latin-1")
    except ValueError as error:
        raise AuthenticationFailed("Bad Request: Invalid bewit encoding") from error
    return text.split("\\")


def _signed_url(request: HawkRequest, resource: str) -> str:
    # mohawk takes a URL and reads host, port and path+query back out of it.
    return f"http://{request.host}:{request.port}{resource}"


def _with_anonymous(scopes: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted(set(scopes) | {ANONYMOUS_SCOPE}))


def _js_truthy(value: object) -> bool:
    # `if (ext.certificate)`: null, false, 0 and "" skip the block; [] and {} do not.
    return value not in (None, False, 0, "") or isinstance(value, list | dict)
