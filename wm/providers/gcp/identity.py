"""GCE identity proofs: the instance identity token, a Google-signed JWT (RS256).

What a worker posts:

    {"token": <GET metadata/v1/instance/service-accounts/default/identity
               ?audience=<root_url>&format=full, the JWT text>}

`format=full` is required: only then does the token carry `google.compute_engine` (project,
zone, instance id and name). As worker-manager checks: the audience is the root_url, `sub` is
the provider's `worker_service_account_id` (no other account in the project may register a
worker), and the instance id is the worker's workerId. Keys come from `identity_jwks` (a JWKS
file) or else Google's JWKS at GOOGLE_JWKS_URL, the one URL this verifier ever fetches (never
one a token names).

Order of work, cheapest first: shape and size, the JOSE header (RS256 and nothing that names
a key), every claim against what wm recorded, and only then a key look-up (which may fetch
Google's keys, at most once per JWKS_REFRESH_MIN_S) and the RSA check.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from wm.errors import ConfigError
from wm.kinds.gcp import GcpProviderConfig
from wm.ops.telemetry import IDENTITY_SIGNATURE_CHECKS
from wm.providers import identity_fetch
from wm.take_over.marks import imported_from
from wm.workers.identity import (
    Clock,
    ExpectedIdentity,
    IdentityRejected,
    decode_base64,
    proof_strings,
    require_equal,
    require_not_before_request,
    utc_now,
)

GOOGLE_ISSUER = "https://accounts.google.com"
GOOGLE_JWKS_URL = "https://www.googleapis.com/oauth2/v3/certs"
GOOGLE_JWKS_HOSTS = frozenset({"www.googleapis.com"})
TOKEN_MAX_CHARS = 8 * 1024  # real tokens are about 1.2 KiB
HEADER_MAX_BYTES = 512
PAYLOAD_MAX_BYTES = 4 * 1024
SIGNATURE_MAX_BYTES = 512
JWKS_MAX_BYTES = 64 * 1024
LEEWAY_S = 30  # on exp and iat
TOKEN_MAX_LIFETIME_S = 3600 + LEEWAY_S  # Google's identity tokens live one hour
JWKS_REFRESH_MIN_S = 60.0  # an unknown kid re-reads the keys at most this often
JWKS_DEFAULT_MAX_AGE_S = 3600.0  # when Google's answer carries no max-age
MIN_KEY_BITS = 2048
HEADER_KEYS = frozenset({"alg", "kid", "typ"})  # jku, x5u, jwk, x5c...: keys the token names
_MAX_AGE = re.compile(r"max-age=(\d+)")


@dataclass
class JwksKeys:
    """Signing keys by kid, re-read when the cache expires or a token names an unknown kid
    (at most once per JWKS_REFRESH_MIN_S, so junk cannot turn into a fetch storm)."""

    load: Callable[[], tuple[bytes, float]]  # -> (JWKS JSON, seconds it may be cached)
    clock: Callable[[], float] = time.monotonic
    _keys: dict[str, rsa.RSAPublicKey] = field(default_factory=dict)
    _expires: float = float("-inf")
    _last_load: float = float("-inf")
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def key(self, kid: str) -> rsa.RSAPublicKey | None:
        with self._lock:  # one load at a time; the others wait for its keys
            now = self.clock()
            wanted = now >= self._expires or kid not in self._keys
            # Also after a failed load: an outage of the key source is not retried per token.
            if wanted and now - self._last_load >= JWKS_REFRESH_MIN_S:
                self._last_load = now
                body, max_age_s = self.load()
                self._keys = parse_jwks(body)
                self._expires = now + max_age_s
            return self._keys.get(kid)


@dataclass(frozen=True)
class GcpIdentityVerifier:
    provider_id: str
    project: str
    audience: str  # the deployment's root_url; tokens are minted for it
    keys: JwksKeys
    service_account_id: str | None  # `worker_service_account_id`; None: every token refused
    now: Clock = utc_now  # the time tokens are checked at (exp, iat, nbf: here, not in PyJWT)

    def verify(self, proof: Mapping[str, Any], expected: ExpectedIdentity) -> None:
        token = proof_strings(proof, {"token": TOKEN_MAX_CHARS})["token"]
        segments = token.split(".")
        if len(segments) != 3 or not all(segments):
            raise IdentityRejected("token is not a signed JWT")
        header = _json_segment(segments[0], "token header", HEADER_MAX_BYTES)
        kid = check_header(header)
        claims = _json_segment(segments[1], "token claims", PAYLOAD_MAX_BYTES)
        decode_base64(segments[2], "token signature", max_bytes=SIGNATURE_MAX_BYTES, urlsafe=True)
        check_claims(
            claims,
            expected,
            project=self.project,
            audience=self.audience,
            service_account_id=self.service_account_id,
            now=self.now().timestamp(),
        )
        IDENTITY_SIGNATURE_CHECKS.labels(self.provider_id).inc()
        key = self._key(kid)
        try:
            # PyJWT re-checks the signature, audience and issuer on the same bytes. Its times
            # would be read from its own clock: check_claims checked them at this verifier's.
            jwt.decode(
                token,
                key,
                algorithms=["RS256"],
                audience=self.audience,
                issuer=GOOGLE_ISSUER,
                options={
                    "require": ["exp", "iat", "aud", "iss"],
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                },
            )
        except jwt.InvalidSignatureError:
            raise IdentityRejected("token signature does not verify") from None
        except jwt.PyJWTError as exc:
            raise IdentityRejected(f"token refused: {type(exc).__name__}") from None

    def _key(self, kid: str) -> rsa.RSAPublicKey:
        try:
            key = self.keys.key(kid)
        except identity_fetch.FetchRefused as refused:
            raise IdentityRejected(f"signing keys unavailable: {refused.reason}") from None
        except ValueError:
            raise IdentityRejected("signing keys are not a valid JWKS") from None
        if key is None:
            raise IdentityRejected("token names an unknown signing key")
        return key


def check_header(header: Mapping[str, Any]) -> str:
    """The header's kid, if the header is exactly what Google sends; before any key work."""
    if header.get("alg") != "RS256":
        raise IdentityRejected("token algorithm is not RS256")
    if not set(header) <= HEADER_KEYS:
        raise IdentityRejected("token header names keys or fields wm does not accept")
    if header.get("typ", "JWT") != "JWT":
        raise IdentityRejected("token type is not JWT")
    kid = header.get("kid")
    if not isinstance(kid, str) or not 0 < len(kid) <= 128:
        raise IdentityRejected("token has no key id")
    return kid


def check_claims(
    claims: Mapping[str, Any],
    expected: ExpectedIdentity,
    *,
    project: str,
    audience: str,
    service_account_id: str | None,
    now: float,
) -> None:
    """The token was minted by Google, for this deployment, for exactly this worker's VM, which
    runs as the workers' service account, and is current at `now` (seconds since the epoch)."""
    if claims.get("iss") != GOOGLE_ISSUER:
        raise IdentityRejected("token issuer is not Google")
    aud = claims.get("aud")
    if not isinstance(aud, str) or aud != expected.audience or aud != audience:
        raise IdentityRejected("token audience is not this deployment")
    require_equal(claims.get("sub"), service_account_id, "worker service account")
    issued, expires = _seconds(claims.get("iat"), "iat"), _seconds(claims.get("exp"), "exp")
    if expires < now - LEEWAY_S:
        raise IdentityRejected("token expired")
    if issued > now + LEEWAY_S:
        raise IdentityRejected("token issued in the future")
    if "nbf" in claims and _seconds(claims["nbf"], "nbf") > now + LEEWAY_S:
        raise IdentityRejected("token is not valid yet")
    if expires - issued > TOKEN_MAX_LIFETIME_S:
        raise IdentityRejected("token lifetime is longer than Google's")
    require_not_before_request(_moment(issued), expected, "token")
    google = claims.get("google")
    engine = google.get("compute_engine") if isinstance(google, Mapping) else None
    if not isinstance(engine, Mapping):
        raise IdentityRejected("token has no compute_engine claims (format=full)")
    require_equal(engine.get("project_id"), project, "project")
    recorded = expected.provider_data
    require_equal(engine.get("instance_id"), expected.tc_worker_id, "instance id")
    require_equal(engine.get("instance_id"), expected.cloud_id, "instance id")
    if imported_from(recorded) is None:
        # An imported worker's VM was named by the legacy worker-manager, not after wm's key
        # for it (wm.take_over.marks): its signed instance id, project and zone identify it.
        require_equal(engine.get("instance_name"), expected.worker_id, "instance name")
    require_equal(engine.get("zone"), expected.region, "zone")
    # Recorded at create by provider.py; rows from before that carry only the cloud id.
    for claim, key in (("instance_id", "instance_id"), ("zone", "zone")):
        if key in recorded:
            require_equal(engine.get(claim), recorded[key], claim)
    created = engine.get("instance_creation_timestamp")
    if created is not None:
        require_not_before_request(_moment(_seconds(created, "creation")), expected, "instance")


def make_verifier(
    config: GcpProviderConfig,
    deployment_id: str,
    audience: str,
    *,
    budget: object = None,
    fetch: identity_fetch.Fetch = identity_fetch.fetch,
    now: Clock = utc_now,
) -> GcpIdentityVerifier:
    del deployment_id  # the token names the instance; the row ties it to the deployment
    del budget  # verifying a token calls no GCE API (Google's keys are not an API call)
    if config.identity_jwks:
        load = _file_loader(config.identity_jwks, f"providers.{config.id}.identity_jwks")
        load()  # a bad file is a start-up error, not a 403 at the first registration
    else:
        load = _google_loader(fetch)
    return GcpIdentityVerifier(
        config.id, config.project, audience, JwksKeys(load), config.worker_service_account_id, now
    )


def parse_jwks(body: bytes) -> dict[str, rsa.RSAPublicKey]:
    """RSA signing keys by kid; other key types and uses are left out."""
    data = json.loads(body)
    if not isinstance(data, Mapping) or not isinstance(data.get("keys"), list):
        raise ValueError("not a JWKS")
    keys: dict[str, rsa.RSAPublicKey] = {}
    for jwk in data["keys"]:
        if not isinstance(jwk, Mapping) or jwk.get("kty") != "RSA":
            continue
        if jwk.get("use", "sig") != "sig" or jwk.get("alg", "RS256") != "RS256":
            continue
        kid = jwk.get("kid")
        try:
            key = jwt.algorithms.RSAAlgorithm.from_jwk(dict(jwk))
        except jwt.PyJWTError:
            continue  # one malformed key does not discard the others
        strong = isinstance(key, rsa.RSAPublicKey) and key.key_size >= MIN_KEY_BITS
        if isinstance(kid, str) and strong:
            keys[kid] = key
    return keys


def _file_loader(path: str, key_path: str) -> Callable[[], tuple[bytes, float]]:
    def load() -> tuple[bytes, float]:
        try:
            body = Path(path).read_bytes()
            parse_jwks(body)
        except OSError as exc:
            raise ConfigError([f"{key_path}: cannot read {path}: {exc.strerror}"]) from None
        except ValueError as exc:
            raise ConfigError([f"{key_path}: {path} is not a JWKS: {exc}"]) from None
        # Kept until a token names a kid it lacks: a simulated cloud restarted with new keys.
        return body, float("inf")

    return load


def _google_loader(fetch: identity_fetch.Fetch) -> Callable[[], tuple[bytes, float]]:
    def load() -> tuple[bytes, float]:
        identity_fetch.check_url(GOOGLE_JWKS_URL, GOOGLE_JWKS_HOSTS, ("https",))
        answer = fetch(GOOGLE_JWKS_URL, JWKS_MAX_BYTES)
        match = _MAX_AGE.search(answer.headers.get("cache-control", ""))
        return answer.body, float(match.group(1)) if match else JWKS_DEFAULT_MAX_AGE_S

    return load


def _json_segment(segment: str, what: str, max_bytes: int) -> Mapping[str, Any]:
    raw = decode_base64(segment, what, max_bytes=max_bytes, urlsafe=True)
    try:
        value = json.loads(raw)
    except ValueError:
        raise IdentityRejected(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise IdentityRejected(f"{what} is not a JSON object")
    return value


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise IdentityRejected(f"token {what} is missing or not a number")
    return float(value)


def _moment(seconds: float) -> datetime:
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise IdentityRejected("token time is out of range") from None
