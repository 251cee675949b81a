"""Who may call the stand-in worker-manager, and with which scopes.

The permanent clients it is given (an operator, an admin: clientId -> access token and
scopes), and the workers it registered, with the temporary credentials it issued them through
the real `taskcluster.createTemporaryCredentials`, signed by the deployment's worker-manager
(issuer) client, with worker-manager's clientId and scopes (util.js createCredentials). It knows
every token it handed out, so it checks a worker's request against them instead of verifying
the certificate as the auth service would; other callers go to the deployment's auth service
when it has one. Hawk is checked with mohawk; missing scopes are worded as libraries/api does.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import mohawk
import mohawk.exc
import mohawk.util
import taskcluster

from wmsim.legacy.routes import ApiError
from wmsim.legacy.store import Worker

CREDENTIALS_BACKDATE = timedelta(minutes=15)  # createCredentials: start fromNow('-15 minutes')
SECRET_LENGTH = 44  # two slug.nice() (22 characters each)


@dataclass(frozen=True)
class PermanentClient:
    access_token: str
    scopes: tuple[str, ...]


@dataclass(frozen=True)
class Issued:
    """Temporary credentials this deployment's worker-manager issued."""

    access_token: str
    scopes: tuple[str, ...]
    expires: datetime


def worker_client_id(provider_id: str, pool_id: str, group: str, worker_id: str) -> str:
    return f"worker/{provider_id}/{pool_id}/{group}/{worker_id}"


def worker_scopes(pool_id: str, group: str, worker_id: str) -> tuple[str, ...]:
    """createCredentials' scopes (services/worker-manager/src/util.js), in its order."""
    worker = f"{pool_id}/{group}/{worker_id}"
    return (
        f"assume:worker-type:{pool_id}",
        f"assume:worker-pool:{pool_id}",
        f"assume:worker-id:{group}/{worker_id}",
        f"queue:worker-id:{group}/{worker_id}",
        f"secrets:get:worker-type:{pool_id}",
        f"secrets:get:worker-pool:{pool_id}",
        f"queue:claim-work:{pool_id}",
        f"worker-manager:remove-worker:{worker}",
        f"worker-manager:reregister-worker:{worker}",
        f"worker-manager:should-worker-terminate:{worker}",
    )


def satisfies(held: Iterable[str], required: str) -> bool:
    """Taskcluster's scope satisfaction for one required scope: equal, or a held scope ending
    in `*` that prefixes it."""
    return any(h == required or (h.endswith("*") and required.startswith(h[:-1])) for h in held)


def slug() -> str:
    """A v4 'nice' slugid, as slugid.nice() makes them."""
    made = taskcluster.slugId()
    return made.decode() if isinstance(made, bytes) else str(made)


def new_secret() -> str:
    """`${slug.nice()}${slug.nice()}`: 44 characters."""
    return slug() + slug()


class DeploymentAuth:
    """The Deployment's authentication and credentials (its state lives on Deployment,
    wmsim/legacy/service.py)."""

    # -- who is calling --------------------------------------------------------------------------

    def authenticate(
        self, method: str, url: str, authorization: str | None, body: bytes, content_type: str
    ) -> tuple[str | None, tuple[str, ...]]:
        """(clientId, scopes) of a request; (None, anonymous scopes) without credentials."""
        if not authorization:
            return None, self._ask_auth(method, url, None) if self.auth_url else ()
        try:
            client_id = mohawk.util.parse_authorization_header(authorization)["id"]
        except (mohawk.exc.HawkFail, KeyError) as error:
            message = f"Bad Request: Invalid header syntax: {error}"
            raise ApiError("AuthenticationFailed", message) from None
        if self.auth_url and client_id not in self.issued:
            return client_id, self._ask_auth(method, url, authorization)
        candidates: list[tuple[str, tuple[str, ...]]] = []
        permanent = self.clients.get(client_id)
        if permanent is not None:
            candidates.append((permanent.access_token, permanent.scopes))
        now = datetime.now(UTC)
        with self.store.lock:
            for issued in self.issued.get(client_id, []):
                if issued.expires > now:
                    candidates.append((issued.access_token, issued.scopes))
        if not candidates:
            raise ApiError(
                "AuthenticationFailed", f"Client with clientId '{client_id}' not found (or expired)"
            )
        for token, scopes in candidates:
            try:
                mohawk.Receiver(
                    lambda _id, token=token: {"id": client_id, "key": token, "algorithm": "sha256"},
                    authorization,
                    url,
                    method,
                    content=body.decode(),
                    content_type=content_type,
                )
            except mohawk.exc.HawkFail:
                continue
            return client_id, scopes
        raise ApiError("AuthenticationFailed", "Unauthorized: Bad mac")

    def _ask_auth(self, method: str, url: str, authorization: str | None) -> tuple[str, ...]:
        """The scopes the auth service answers for a request (libraries/api
        remoteAuthentication: the method, the resource and the host and port signed)."""
        parts = urllib.parse.urlsplit(url)
        request: dict[str, Any] = {
            "method": method.lower(),
            "resource": parts.path + (f"?{parts.query}" if parts.query else ""),
            "host": parts.hostname or "",
            "port": parts.port or 80,
        }
        if authorization:
            request["authorization"] = authorization
        auth = taskcluster.Auth({"rootUrl": self.auth_url, "maxRetries": 0})
        answer = auth.authenticateHawk(request)
        if answer.get("status") == "auth-failed":
            raise ApiError("AuthenticationFailed", str(answer.get("message", "")))
        return tuple(answer.get("scopes", ()))

    @staticmethod
    def authorize(client_id: str | None, scopes: Sequence[str], required: Sequence[str]) -> None:
        """All of `required` (api.js's AllOf) or InsufficientScopes, worded as libraries/api."""
        missing = [r for r in required if not satisfies(scopes, r)]
        if not missing:
            return
        expression = required[0] if len(required) == 1 else {"AllOf": list(required)}
        who = (
            f"Client ID {client_id} does not have sufficient scopes and is missing the "
            f"following scopes:\n\n```\n{json.dumps(missing)}\n```\n\n"
            if client_id
            else ""
        )
        raise ApiError(
            "InsufficientScopes",
            f"{who}This request requires Taskcluster credentials that satisfy the following "
            f"scope expression:\n\n```\n{json.dumps(expression)}\n```",
            {"required": expression},
        )

    # -- credentials -----------------------------------------------------------------------------

    def credentials_for(self, worker: Worker, expires: datetime) -> dict[str, str]:
        """createCredentials: temporary credentials signed by the issuer client."""
        client_id = worker_client_id(
            worker.provider_id, worker.worker_pool_id, worker.worker_group, worker.worker_id
        )
        scopes = worker_scopes(worker.worker_pool_id, worker.worker_group, worker.worker_id)
        credentials = taskcluster.createTemporaryCredentials(
            self.issuer_client_id,
            self.issuer_access_token,
            datetime.now(UTC) - CREDENTIALS_BACKDATE,
            expires,
            list(scopes),
            name=client_id,
        )
        with self.store.lock:
            self.issued.setdefault(client_id, []).append(
                Issued(credentials["accessToken"], scopes, expires)
            )
        return {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in credentials.items()}
