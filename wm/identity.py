"""Worker identity proofs: what a registering VM must prove, checked by a verifier per cloud.

Each cloud's verifier lives beside its provider (wm/providers/<cloud>_identity.py) and is built
by `wm.providers.build_verifier`. A verifier checks the proof's cryptography against trust
anchors from config (never a key the proof itself names), then that every claim in it matches
what wm recorded when it launched this worker. It makes no network request to a host that is
not on its own allow-list, and does no expensive work before cheap shape checks pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from wm.errors import WmError


@dataclass(frozen=True)
class ExpectedIdentity:
    """What wm knows of the worker that claims to be registering."""

    deployment_id: str
    provider_id: str
    pool_id: str
    worker_id: str
    region: str  # region (EC2, Azure) or zone (GCE) the worker was launched in
    cloud_id: str | None  # EC2 instance id, GCE instance id or name, Azure VM resource id
    audience: str  # this deployment's public URL: GCE tokens must be minted for it
    provider_data: Mapping[str, Any] = field(default_factory=dict)  # recorded at launch


class IdentityRejected(WmError):
    """The identity proof was not accepted."""

    def __init__(self, reason: str) -> None:
        # The reason is for logs and tests; the API answers every rejection the same way.
        self.reason = reason
        super().__init__(reason)


class IdentityVerifier(Protocol):
    def verify(self, proof: Mapping[str, Any], expected: ExpectedIdentity) -> None:
        """Return if the proof shows the caller is exactly the expected worker; else raise
        IdentityRejected."""
        ...
