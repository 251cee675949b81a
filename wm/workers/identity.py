"""Worker identity proofs: what a registering VM must prove, checked by a verifier per cloud.

Each cloud's verifier lives beside its provider (wm/providers/<cloud>_identity.py) and is built
by `wm.providers.build_verifier`. A verifier checks the proof's cryptography against trust
anchors from config (never a key the proof itself names), then that every claim in it matches
what wm recorded when it launched this worker. It makes no network request to a host that is
not on its own allow-list, and does no expensive work before cheap shape checks pass.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from wm.errors import WmError

# Real proofs are 1-8 KiB; anything past this is junk, refused before any parsing or crypto.
MAX_PROOF_CHARS = 64 * 1024
CLOCK_SKEW_S = 60.0  # tolerated difference between wm's clock and a cloud's
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")

# What time a verifier checks a proof at. Each verifier takes one (default: the real clock) and
# reads no other, so a captured proof can be checked at its own time.
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ExpectedIdentity:
    """What wm knows of the worker that claims to be registering."""

    deployment_id: str
    provider_id: str
    pool_id: str
    worker_id: str
    region: str  # region (EC2, Azure) or zone (GCE) the worker was launched in: its workerGroup
    cloud_id: str | None  # EC2 instance id, GCE instance id or name, Azure VM resource id
    audience: str  # the deployment's root_url: GCE tokens must be minted for it
    provider_data: Mapping[str, Any] = field(default_factory=dict)  # recorded at launch
    # When wm wrote the worker's row. The VM was launched after it, so a proof that says it was
    # made (or its instance started) before it belongs to an older instance. None: not checked.
    requested_at: datetime | None = None
    # The worker's Taskcluster workerId (EC2 instance id, GCE numeric instance id, Azure VM
    # name), what it registered as. EC2 documents and GCE tokens must name exactly it.
    tc_worker_id: str | None = None


class IdentityRejected(WmError):
    """The identity proof was not accepted."""

    def __init__(self, reason: str, *, answer: str | None = None) -> None:
        # The reason is for logs and tests; the API answers every rejection of a kind the same
        # way, unless its contract gives this rejection words of its own (`answer`): static's
        # missing secret, which tells the sender nothing it did not send.
        self.reason = reason
        self.answer = answer
        super().__init__(reason)


class IdentityVerifier(Protocol):
    def verify(self, proof: Mapping[str, Any], expected: ExpectedIdentity) -> None:
        """Return if the proof shows the caller is exactly the expected worker; else raise
        IdentityRejected."""
        ...


def proof_strings(proof: Any, limits: Mapping[str, int]) -> dict[str, str]:
    """The proof's fields, exactly those named, each a string within its limit.

    Runs before any decoding or crypto, so junk costs a few comparisons. Reasons never quote
    the proof: it is attacker-controlled, and it must stay out of logs.
    """
    if not isinstance(proof, Mapping):
        raise IdentityRejected("proof is not an object")
    if len(proof) != len(limits) or any(name not in proof for name in limits):
        raise IdentityRejected(f"proof must have exactly the fields {sorted(limits)}")
    total = 0
    for name, limit in limits.items():
        value = proof[name]
        if not isinstance(value, str):
            raise IdentityRejected(f"proof field {name} is not a string")
        if len(value) > limit:
            raise IdentityRejected(f"proof field {name} is longer than {limit} characters")
        total += len(value)
    if total > MAX_PROOF_CHARS:
        raise IdentityRejected("proof is too large")
    return {name: proof[name] for name in limits}


def decode_base64(text: str, what: str, *, max_bytes: int, urlsafe: bool = False) -> bytes:
    """Strict base64 (standard, or unpadded base64url); whitespace is dropped because the
    clouds' metadata services wrap long values in lines."""
    compact = "".join(text.split())
    pattern = _BASE64URL if urlsafe else _BASE64
    if not compact or len(compact) > (max_bytes * 4) // 3 + 4 or not pattern.fullmatch(compact):
        raise IdentityRejected(f"{what} is not base64 of an acceptable size")
    try:
        if urlsafe:
            return base64.urlsafe_b64decode(compact + "=" * (-len(compact) % 4))
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise IdentityRejected(f"{what} is not valid base64") from None


def require_equal(claimed: Any, recorded: Any, what: str) -> None:
    """A claim of the proof must equal what wm recorded; nothing recorded is a rejection too
    (fail closed: a check that cannot run is not a pass)."""
    if recorded is None or recorded == "":
        raise IdentityRejected(f"no {what} recorded for this worker")
    if not isinstance(claimed, str) or claimed != str(recorded):
        raise IdentityRejected(f"{what} does not match the worker")


def require_not_before_request(moment: datetime, expected: ExpectedIdentity, what: str) -> None:
    if expected.requested_at is None:
        return
    if (expected.requested_at - moment).total_seconds() > CLOCK_SKEW_S:
        raise IdentityRejected(f"{what} is older than the worker")
