"""Who signed a request: the credentials wm minted checked here, any other by the auth service.

As worker-manager does (TC `libraries/api/src/middleware/auth.js`), a request is authenticated
only when its endpoint has scopes, with the auth service's rules (wm/tc/hawk.py).

Behind a Taskcluster deployment (an auth service at TASKCLUSTER_ROOT_URL), wm checks locally only
the temporary credentials it mints for workers: named credentials whose certificate's issuer is
wm's issuer client, whose access token wm holds. Everything else goes to the deployment's
`authenticateHawk` (through the real `taskcluster` client), which says who signed and what they
hold: any client, wm's issuer client signing with its own permanent credentials too (its scopes
are the deployment's to say, not a fixed list of wm's), and requests without credentials, which
hold what the deployment's `anonymous` role grants. There is no operator client of wm's own then.

Standalone (no auth service) wm is the only authority: it knows its issuer and, when
WM_OPERATOR_TOKEN is set, the operator client; other credentials are refused (401) and a request
without credentials holds only `assume:anonymous`, which grants nothing here.

The issuer: the Taskcluster client wm is given (TASKCLUSTER_CLIENT_ID / _ACCESS_TOKEN), or,
standalone, `static/wm` with a deployment key kept in Postgres, so that every web replica signs
and verifies with the same key.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import mohawk.util
import taskcluster
import taskcluster.exceptions
from sqlalchemy import Engine

from wm.db.deployment_keys import get_or_create_key
from wm.tc.credentials import ISSUER_SCOPES, IssuerCredentials
from wm.tc.errors import TaskclusterError
from wm.tc.hawk import (
    ANONYMOUS_LIFETIME,
    Authenticated,
    AuthenticationFailed,
    Client,
    HawkRequest,
    authenticate,
    certificate_issuer,
)

STANDALONE_ISSUER = "static/wm"
STANDALONE_ISSUER_KEY = f"issuer:{STANDALONE_ISSUER}"
OPERATOR_CLIENT = "static/wm-operator"
OPERATOR_SCOPES = ("worker-manager:*",)
OPERATOR_BEHIND_TASKCLUSTER = (
    "WM_OPERATOR_TOKEN (environment): standalone only; wm runs behind the Taskcluster "
    "deployment at TASKCLUSTER_ROOT_URL, whose auth service says who every client is: unset it "
    "and give operators clients of that deployment"
)
# Permanent clients known locally never expire by themselves.
_NEVER = datetime(9999, 1, 1, tzinfo=UTC)


class IssuerSource:
    """The issuer's credentials, resolved once (the deployment key needs the database)."""

    def __init__(
        self, engine: Engine, client_id: str | None = None, access_token: str | None = None
    ) -> None:
        self._engine = engine
        self._given = (
            IssuerCredentials(client_id, access_token) if client_id and access_token else None
        )
        self._resolved: IssuerCredentials | None = self._given
        self._lock = threading.Lock()

    @property
    def client_id(self) -> str:
        return self._given.client_id if self._given else STANDALONE_ISSUER

    def get(self) -> IssuerCredentials:
        with self._lock:
            if self._resolved is None:
                key = get_or_create_key(self._engine, STANDALONE_ISSUER_KEY)
                self._resolved = IssuerCredentials(STANDALONE_ISSUER, key)
            return self._resolved


@dataclass(frozen=True)
class AuthService:
    """The deployment's auth service: `authenticateHawk` with wm's own Taskcluster client."""

    root_url: str
    client_id: str
    access_token: str = field(repr=False)

    def authenticate(self, request: HawkRequest, source_ip: str | None) -> Authenticated:
        payload: dict[str, object] = {
            "method": request.method.lower(),
            "resource": request.resource,
            "host": request.host,
            "port": request.port,
        }
        if request.authorization:
            payload["authorization"] = request.authorization
        if source_ip:
            payload["sourceIp"] = source_ip
        auth = taskcluster.Auth(
            {
                "rootUrl": self.root_url,
                "credentials": {"clientId": self.client_id, "accessToken": self.access_token},
                "maxRetries": 2,
            }
        )
        try:
            answer = auth.authenticateHawk(payload)
        except taskcluster.exceptions.TaskclusterFailure as failure:
            # Taskcluster answers 500 when its auth service cannot be reached.
            raise TaskclusterError(
                "InternalServerError", "the auth service could not be reached"
            ) from failure
        return _from_auth_service(answer, request)


def _from_auth_service(answer: dict, request: HawkRequest) -> Authenticated:
    status = answer.get("status")
    expires = _parse_time(answer.get("expires"))
    if status == "auth-failed":
        raise AuthenticationFailed(str(answer.get("message", "authentication failed")))
    if status == "no-auth":
        return Authenticated(None, "none", tuple(answer.get("scopes", ())), expires)
    if status != "auth-success":
        raise AuthenticationFailed("the auth service gave an unknown answer")
    claimed = answer.get("hash")
    if claimed:
        # The auth service saw the signed payload hash only; the body is checked here.
        computed = mohawk.util.calculate_payload_hash(
            request.content, "sha256", request.content_type or ""
        )
        # (mohawk answers the base64 digest as bytes.)
        if not hmac.compare_digest(str(claimed).encode(), computed):
            raise AuthenticationFailed(
                "Invalid payload hash: the request carries a signed hash of the payload that "
                "does not match the hash computed on the server side"
            )
    return Authenticated(answer.get("clientId"), "hawk", tuple(answer.get("scopes", ())), expires)


def _parse_time(value: object) -> datetime:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
    return datetime.now(UTC) + ANONYMOUS_LIFETIME


class Authenticator:
    """Authenticates requests: locally what wm minted (or everything, standalone), else by the
    deployment's auth service."""

    def __init__(
        self,
        issuer: IssuerSource,
        *,
        operator_token: str | None,
        auth_service: AuthService | None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._issuer = issuer
        self._operator_token = operator_token
        self._auth_service = auth_service
        self._clock = clock

    def authenticate(self, request: HawkRequest, source_ip: str | None = None) -> Authenticated:
        if self._auth_service is not None and not self._minted_here(request):
            return self._auth_service.authenticate(request, source_ip)
        return authenticate(request, self._load_client, now=self._clock())

    def _minted_here(self, request: HawkRequest) -> bool:
        """Whether the request is signed with temporary credentials wm mints: named, their
        certificate issued by wm's issuer client. Its permanent credentials are not: signing
        with them directly, that client holds what the deployment gives it, as any other."""
        return certificate_issuer(request) == self._issuer.client_id

    def _load_client(self, client_id: str) -> Client | None:
        # Behind Taskcluster only the issuer of a certificate is ever loaded here.
        if client_id == self._issuer.client_id:
            issuer = self._issuer.get()
            return Client(issuer.client_id, issuer.access_token, ISSUER_SCOPES, _NEVER)
        if client_id == OPERATOR_CLIENT and self._operator_token:
            return Client(OPERATOR_CLIENT, self._operator_token, OPERATOR_SCOPES, _NEVER)
        return None
