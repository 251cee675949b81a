"""Instance identity tokens, as a VM's metadata server mints them (format=full): RS256 JWTs
whose `sub` is the unique id of the VM's service account, signed with the sim's own key, whose
JWKS a provider config trusts."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wmsim.trust import signing_key

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa


IDENTITY_KEY_NAME = "gce-identity"
IDENTITY_TRUST_FILE = "gce-identity-jwks.json"
IDENTITY_ISSUER = "https://accounts.google.com"
IDENTITY_TOKEN_LIFETIME_S = 3600  # as Google's
SERVICE_ACCOUNT_ID_DIGITS = 21  # Google's numeric service account ids ("uniqueId")


def identity_jwks() -> dict[str, Any]:
    """The public JWKS of the process's GCE identity key, in Google's shape."""
    import jwt

    key = signing_key(IDENTITY_KEY_NAME)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {"keys": [{**jwk, "kid": key_id(key), "alg": "RS256", "use": "sig"}]}


def key_id(key: rsa.RSAPrivateKey) -> str:
    numbers = key.public_key().public_numbers()
    return hashlib.sha256(f"{numbers.n}:{numbers.e}".encode()).hexdigest()[:40]


def service_account_id(email: str) -> str:
    """The numeric unique id of the service account with this email (what identity tokens
    carry as `sub`): a stable function of the email, so a config can name it in advance."""
    digest = int.from_bytes(hashlib.sha256(email.encode()).digest()[:12], "big")
    return "1" + str(digest % 10 ** (SERVICE_ACCOUNT_ID_DIGITS - 1)).zfill(
        SERVICE_ACCOUNT_ID_DIGITS - 1
    )


def project_number(project: str) -> int:
    return int(hashlib.sha256(project.encode()).hexdigest()[:11], 16)


class GceIdentity:
    """SimGce's identity tokens (its state lives on SimGce, wmsim/gcp/gce.py)."""

    _lock: threading.RLock

    @property
    def identity_trust_path(self) -> Path:
        """The JWKS file of the keys identity tokens are signed with."""
        with self._lock:
            if self._identity_path is None:
                path = self._trust.path(IDENTITY_TRUST_FILE)
                path.write_text(json.dumps(identity_jwks()))
                self._identity_path = path
            return self._identity_path

    def identity_token(self, zone: str, name: str, audience: str) -> str:
        """The token the instance's metadata server mints for `audience` (format=full)."""
        return self.mint_identity_token(zone, name, audience)

    def mint_identity_token(
        self,
        zone: str,
        name: str,
        audience: str,
        *,
        claims: Mapping[str, Any] | None = None,
        compute_engine: Mapping[str, Any] | None = None,
        header: Mapping[str, Any] | None = None,
        key: rsa.RSAPrivateKey | None = None,
        issued_at: float | None = None,
        lifetime_s: float = IDENTITY_TOKEN_LIFETIME_S,
    ) -> str:
        """A token for the instance with `claims` (top level) and `compute_engine` fields
        replaced, extra `header` fields, another signing `key` or other times: forgeries."""
        import jwt

        issued = int(time.time() if issued_at is None else issued_at)
        engine, account_id = self._engine_claims(zone, name)
        engine = {**engine, **(compute_engine or {})}
        email = self._service_account(zone, name)
        payload = {
            "aud": audience,
            "azp": account_id,
            "exp": int(issued + lifetime_s),
            "iat": issued,
            "iss": IDENTITY_ISSUER,
            "sub": account_id,  # the instance's service account, by its numeric unique id
            "google": {"compute_engine": engine},
            **({"email": email, "email_verified": True} if email else {}),
            **(claims or {}),
        }
        signer = key or signing_key(IDENTITY_KEY_NAME)
        headers = {"kid": key_id(signing_key(IDENTITY_KEY_NAME)), **(header or {})}
        return jwt.encode(payload, signer, algorithm="RS256", headers=headers)

    def _service_account(self, zone: str, name: str) -> str | None:
        with self._lock:
            for vm in self._state.vms.values():
                if (vm.zone, vm.name) == (zone, name) and vm.service_accounts:
                    return str(vm.service_accounts[0].get("email") or "") or None
        return None

    def _engine_claims(self, zone: str, name: str) -> tuple[dict[str, Any], str]:
        """The token's compute_engine claims and its `sub`: the unique id of the VM's service
        account. A VM without one gets no token, as on GCE."""
        now = time.monotonic()
        with self._lock:
            for vm in self._live_vms(now):
                if (vm.zone, vm.name) == (zone, name) and self._status(vm, now) != "TERMINATED":
                    if not vm.service_accounts:
                        raise KeyError(f"{zone}/{name} has no service account: no identity")
                    engine = {
                        "instance_creation_timestamp": int(vm.created_wall.timestamp()),
                        "instance_id": str(vm.id),
                        "instance_name": vm.name,
                        "project_id": vm.project,
                        "project_number": project_number(vm.project),
                        "zone": vm.zone,
                    }
                    return engine, service_account_id(vm.service_accounts[0]["email"])
        raise KeyError(f"{zone}/{name}")
