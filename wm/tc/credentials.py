"""Taskcluster temporary credentials: issuing them for workers and verifying ones wm issued.

Sources (taskcluster/taskcluster @ 9d59eb59):
- the certificate and its signature: `clients/client/src/client.js` `createTemporaryCredentials`
  (what worker-manager calls) and `clients/client-py/taskcluster/client.py` (the same algorithm;
  `tests/unit/test_tc_credentials.py` proves wm's output identical to the installed package's);
- the checks a certificate must pass: `services/auth/src/signaturevalidator.js`
  `limitClientWithExt` (field types, seed of 44 characters, `start <= now + 5 min`,
  `expiry >= now - 5 min`, at most 31 days, `auth:create-client:<name>` held by the issuer,
  certificate scopes within the issuer's, HMAC signature, derived access token); the error
  messages are Taskcluster's own;
- what a worker gets: WM `src/util.js` `createCredentials` (the client id, the ten scopes, start
  15 minutes back, expiry = the worker's expires) and WM `src/api.js` `registerWorker` /
  `reregisterWorker` (the secret is `slugid.nice() + slugid.nice()`, 44 characters).

wm signs itself rather than through `taskcluster.createTemporaryCredentials` because the Python
client truncates start/expiry to whole seconds while worker-manager (JS) keeps milliseconds, so
the certificate's expiry is exactly the worker's `expires`; the algorithm is the same.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import slugid

from wm.tc.scopes import satisfies, valid_scope

# WM util.js: `start: taskcluster.fromNow('-15 minutes')`, so a worker whose clock runs behind
# can use its credentials at once.
WORKER_CREDENTIALS_BACKDATE = timedelta(minutes=15)
# signaturevalidator.js: a certificate may span at most 31 days, and start/expiry are checked
# with 5 minutes of slack either way.
MAX_CERTIFICATE_SPAN = timedelta(days=31)
CERTIFICATE_CLOCK_SLACK = timedelta(minutes=5)
SEED_LENGTH = 44


class CertificateInvalid(ValueError):
    """A certificate failed one of the auth service's checks; the message is Taskcluster's."""


# What worker-manager's own Taskcluster client holds (TC services/auth/src/static-scopes.json):
# enough to issue the ten worker scopes. An issuer whose certificates wm checks locally holds
# exactly these.
ISSUER_SCOPES = (
    "assume:worker-id:*",
    "assume:worker-pool:*",
    "assume:worker-type:*",
    "auth:create-client:worker/*",
    "queue:claim-work:*",
    "queue:worker-id:*",
    "secrets:get:worker-pool:*",
    "secrets:get:worker-type:*",
    "worker-manager:remove-worker:*",
    "worker-manager:reregister-worker:*",
    "worker-manager:should-worker-terminate:*",
)


@dataclass(frozen=True)
class IssuerCredentials:
    """Permanent credentials that sign temporary ones (wm's Taskcluster client or its own key)."""

    client_id: str
    access_token: str = field(repr=False)


@dataclass(frozen=True)
class TemporaryCredentials:
    """What `registerWorker` / `reregisterWorker` answer in `credentials`."""

    client_id: str  # the name, e.g. worker/<providerId>/<pool>/<group>/<id>
    access_token: str = field(repr=False)  # HMAC(issuer token, seed), base64url, unpadded
    certificate: str  # the certificate as a JSON string, as the clients send it

    def as_json(self) -> dict[str, str]:
        return {
            "clientId": self.client_id,
            "accessToken": self.access_token,
            "certificate": self.certificate,
        }


@dataclass(frozen=True)
class Certificate:
    """A version-1 certificate, fields as on the wire (times in epoch milliseconds)."""

    scopes: tuple[str, ...]
    start: int | float
    expiry: int | float
    seed: str
    signature: str
    issuer: str | None  # present only for named temporary credentials
    has_client_id: bool = False  # a `clientId` key, allowed only alongside `issuer`


@dataclass(frozen=True)
class VerifiedCertificate:
    """What a valid certificate grants: it replaces the issuer's token, scopes and expiry."""

    access_token: str = field(repr=False)
    scopes: tuple[str, ...]
    expires: datetime


def worker_client_id(
    *, provider_id: str, worker_pool_id: str, worker_group: str, worker_id: str
) -> str:
    return f"worker/{provider_id}/{worker_pool_id}/{worker_group}/{worker_id}"


def worker_scopes(*, worker_pool_id: str, worker_group: str, worker_id: str) -> tuple[str, ...]:
    """The ten scopes worker-manager grants a worker, in its order (WM src/util.js)."""
    pool, worker = worker_pool_id, f"{worker_group}/{worker_id}"
    return (
        f"assume:worker-type:{pool}",  # deprecated role, still granted
        f"assume:worker-pool:{pool}",
        f"assume:worker-id:{worker}",
        f"queue:worker-id:{worker}",
        f"secrets:get:worker-type:{pool}",  # deprecated secret name, still granted
        f"secrets:get:worker-pool:{pool}",
        f"queue:claim-work:{pool}",
        f"worker-manager:remove-worker:{pool}/{worker}",
        f"worker-manager:reregister-worker:{pool}/{worker}",
        f"worker-manager:should-worker-terminate:{pool}/{worker}",
    )


def new_worker_secret() -> str:
    """A fresh 44-character worker secret, as worker-manager makes it."""
    return slugid.nice() + slugid.nice()


def epoch_ms(when: datetime) -> int:
    """JavaScript's `Date.getTime()`: whole milliseconds since the epoch."""
    if when.tzinfo is None:
        raise ValueError("a naive datetime is ambiguous here; pass an aware one")
    return (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def certificate_signature(
    access_token: str,
    *,
    name: str | None,
    issuer: str | None,
    seed: str,
    start: int | float,
    expiry: int | float,
    scopes: Sequence[str],
) -> str:
    """Base64 HMAC-SHA256 over the certificate lines, keyed by the issuer's access token.

    The `clientId:`/`issuer:` lines are there only for named credentials (`issuer` not None).
    """
    lines = ["version:1"]
    if issuer is not None:
        lines += [f"clientId:{name}", f"issuer:{issuer}"]
    lines += [f"seed:{seed}", f"start:{_js_number(start)}", f"expiry:{_js_number(expiry)}"]
    lines += ["scopes:", *scopes]
    digest = hmac.new(access_token.encode(), "\n".join(lines).encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def temporary_access_token(issuer_access_token: str, seed: str) -> str:
    digest = hmac.new(issuer_access_token.encode(), seed.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def issue_temporary_credentials(
    issuer: IssuerCredentials,
    *,
    name: str,
    scopes: Sequence[str],
    start: datetime,
    expiry: datetime,
    seed: str | None = None,
) -> TemporaryCredentials:
    """Named temporary credentials `name`, signed by `issuer` (the clients' algorithm)."""
    if name == issuer.client_id:
        raise ValueError("Credential issuer must be different from the name")
    if not all(isinstance(s, str) for s in scopes):
        raise ValueError("scopes must be strings")
    if expiry - start > MAX_CERTIFICATE_SPAN:
        raise ValueError("Credentials cannot span more than 31 days")
    seed = seed if seed is not None else slugid.nice() + slugid.nice()
    cert: dict[str, Any] = {
        "version": 1,
        "scopes": list(scopes),
        "start": epoch_ms(start),
        "expiry": epoch_ms(expiry),
        "seed": seed,
        "issuer": issuer.client_id,
    }
    cert["signature"] = certificate_signature(
        issuer.access_token,
        name=name,
        issuer=issuer.client_id,
        seed=seed,
        start=cert["start"],
        expiry=cert["expiry"],
        scopes=cert["scopes"],
    )
    return TemporaryCredentials(
        client_id=name,
        access_token=temporary_access_token(issuer.access_token, seed),
        certificate=json.dumps(cert, separators=(",", ":")),
    )


def worker_credentials(
    issuer: IssuerCredentials,
    *,
    provider_id: str,
    worker_pool_id: str,
    worker_group: str,
    worker_id: str,
    expires: datetime,
    now: datetime,
) -> TemporaryCredentials:
    """The credentials register/reregister hand a worker (WM src/util.js createCredentials).

    Pass the values of the stored worker row, not the request's: those are what was verified.
    """
    ids = dict(worker_pool_id=worker_pool_id, worker_group=worker_group, worker_id=worker_id)
    return issue_temporary_credentials(
        issuer,
        name=worker_client_id(provider_id=provider_id, **ids),
        scopes=worker_scopes(**ids),
        start=now - WORKER_CREDENTIALS_BACKDATE,
        expiry=expires,
    )


def parse_certificate(raw: object) -> Certificate:
    """A certificate from `ext.certificate` (an object) or a credentials' JSON string."""
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except ValueError as error:
            raise CertificateInvalid("ext.certificate must be a JSON object") from error
    if not isinstance(raw, Mapping):
        raise CertificateInvalid("ext.certificate must be a JSON object")
    if raw.get("version") != 1 or isinstance(raw.get("version"), bool | float):
        raise CertificateInvalid("ext.certificate.version must be 1")
    seed = raw.get("seed")
    if not isinstance(seed, str):
        raise CertificateInvalid("ext.certificate.seed must be a string")
    if len(seed) != SEED_LENGTH:
        raise CertificateInvalid("ext.certificate.seed must be 44 characters")
    for key in ("start", "expiry"):
        if not _is_number(raw.get(key)):
            raise CertificateInvalid(f"ext.certificate.{key} must be a number")
    scopes = raw.get("scopes")
    if not isinstance(scopes, list):
        raise CertificateInvalid("ext.certificate.scopes must be an array")
    if not all(valid_scope(s) for s in scopes):
        raise CertificateInvalid("ext.certificate.scopes must be an array of valid scopes")
    # `if (cert.issuer)`: an empty issuer means unnamed credentials.
    issuer = raw.get("issuer") or None
    if issuer is not None and not isinstance(issuer, str):
        raise CertificateInvalid("ext.certificate.issuer must be a string")
    signature = raw.get("signature")
    return Certificate(
        scopes=tuple(scopes),
        start=raw["start"],
        expiry=raw["expiry"],
        seed=seed,
        signature=signature if isinstance(signature, str) else "",
        issuer=issuer,
        has_client_id="clientId" in raw,
    )


def verify_certificate(
    cert: Certificate,
    *,
    credential_name: str,
    issuer: IssuerCredentials,
    issuer_scopes: Sequence[str],
    now: datetime,
) -> VerifiedCertificate:
    """Taskcluster's checks of a certificate, in its order; raises CertificateInvalid.

    `credential_name` is the id the request was signed with; `issuer` is the client that
    signed the certificate (`cert.issuer` when named, else the same id), with its scopes.
    """
    now_ms = epoch_ms(now)
    slack_ms = CERTIFICATE_CLOCK_SLACK // timedelta(milliseconds=1)
    if cert.start > now_ms + slack_ms:
        raise CertificateInvalid("ext.certificate.start > now")
    if cert.expiry < now_ms - slack_ms:
        raise CertificateInvalid("ext.certificate.expiry < now")
    if cert.expiry - cert.start > MAX_CERTIFICATE_SPAN // timedelta(milliseconds=1):
        raise CertificateInvalid("ext.certificate cannot last longer than 31 days!")
    if issuer.client_id != credential_name:
        create_scope = f"auth:create-client:{credential_name}"
        if not satisfies(issuer_scopes, create_scope):
            raise CertificateInvalid(
                f"ext.certificate issuer `{issuer.client_id}` doesn't have `{create_scope}` "
                "for supplied clientId."
            )
    elif cert.has_client_id:
        raise CertificateInvalid(
            "ext.certificate.clientId must only be used with ext.certificate.issuer"
        )
    if not satisfies(issuer_scopes, {"AllOf": list(cert.scopes)}):
        raise CertificateInvalid(
            f"ext.certificate issuer `{issuer.client_id}` doesn't satisfy all certificate "
            f"scopes {', '.join(cert.scopes)}.  The temporary credentials were not generated "
            "correctly."
        )
    expected = certificate_signature(
        issuer.access_token,
        name=credential_name,
        issuer=cert.issuer,
        seed=cert.seed,
        start=cert.start,
        expiry=cert.expiry,
        scopes=cert.scopes,
    )
    if not hmac.compare_digest(cert.signature.encode(), expected.encode()):
        if cert.issuer is not None:
            raise CertificateInvalid(
                "ext.certificate.signature is not valid, or wrong clientId provided"
            )
        raise CertificateInvalid("ext.certificate.signature is not valid")
    return VerifiedCertificate(
        access_token=temporary_access_token(issuer.access_token, cert.seed),
        scopes=cert.scopes,
        expires=datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=cert.expiry),
    )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _js_number(value: int | float) -> str:
    # `${n}` in JavaScript: integral values print without a fraction.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
