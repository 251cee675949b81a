"""The static kind's registration proof: `{staticSecret}`, the secret createWorker (or
updateWorker) gave the worker, compared in constant time with the hash stored then. The
secret itself is never stored (wm.workers.static_workers)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from wm.workers.identity import ExpectedIdentity, IdentityRejected, proof_strings
from wm.workers.static_workers import SECRET_HASH_KEY, secret_hash

SECRET_CHARS = 44  # create-worker-request.yml: ^[a-zA-Z0-9_-]{44}$
# worker-manager's static registerWorker has its own words for a proof without a secret (say, a
# GCE token sent to a static pool); every other refusal is the kind's one answer.
MISSING_SECRET = "missing staticSecret in workerIdentityProof"


class StaticSecretVerifier:
    def verify(self, proof: Mapping[str, Any], expected: ExpectedIdentity) -> None:
        if isinstance(proof, Mapping) and not proof.get("staticSecret"):
            raise IdentityRejected("no staticSecret in the proof", answer=MISSING_SECRET)
        shown = proof_strings(proof, {"staticSecret": SECRET_CHARS})["staticSecret"]
        stored = expected.provider_data.get(SECRET_HASH_KEY)
        if not isinstance(stored, str) or not stored:
            raise IdentityRejected("no staticSecret recorded for this worker")
        if not hmac.compare_digest(secret_hash(shown), stored):
            raise IdentityRejected("staticSecret does not match the worker's")


def make_verifier(
    config: Any, deployment_id: str, audience: str, *, budget: Any = None, **_: Any
) -> StaticSecretVerifier:
    """The verifier of a static provider's workers: no trust anchors, no cloud calls."""
    return StaticSecretVerifier()
