"""Workers no cloud launches (a static provider's): what createWorker and updateWorker ask
for, judged purely. The route reads the pool, calls `decide_create`/`decide_update`, and the
one writer of worker rows (wm/db/worker_writes.py) makes the change.

The refusals and their words are worker-manager's (TC services/worker-manager/src/api.js
createWorker / updateWorker, src/providers/static.js and provider.js)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

# Where a hand-made worker's secret is kept, as its sha256 only, in its row's provider data.
SECRET_HASH_KEY = "staticSecretSha256"
DEFAULT_CAPACITY = 1  # api.js: `{capacity: 1, ...req.body}`


def secret_hash(secret: str) -> str:
    # Secrets are 264 random bits (slugid + slugid): a plain hash is enough, no slow KDF.
    return hashlib.sha256(secret.encode()).hexdigest()


def hand_made_worker_id(pool_id: str, worker_group: str, worker_id: str) -> str:
    """wm's key for a worker createWorker makes: Taskcluster's three names, which no two
    workers share (a second createWorker of them is a conflict, as in worker-manager)."""
    return f"{pool_id}/{worker_group}/{worker_id}"


@dataclass(frozen=True)
class Refusal:
    code: str  # Taskcluster's error code
    message: str  # worker-manager's words


NOT_SUPPORTED = Refusal("InputError", "not supported for this provider")
NO_SECRET = Refusal("InputError", "no worker staticSecret provided")
EXPIRES_PAST = Refusal("InputError", "worker.expires must be in the future")
ALREADY_EXISTS = Refusal("RequestConflict", "Worker already exists")


@dataclass(frozen=True)
class HandMade:
    """What a createWorker or updateWorker body asks for."""

    expires: datetime
    capacity: int
    secret: str | None  # providerInfo.staticSecret


def decide_create(pool_hand_made: bool | None, body: HandMade, now: datetime) -> Refusal | None:
    """createWorker's refusal, or None to create. `pool_hand_made`: whether the pool's provider
    kind's workers are made by createWorker (None: the pool has no provider, it is being
    deleted)."""
    if body.expires < now:
        return EXPIRES_PAST
    if not pool_hand_made:
        return NOT_SUPPORTED
    if not body.secret:
        return NO_SECRET
    return None


def decide_update(pool_hand_made: bool | None) -> Refusal | None:
    """updateWorker's refusal, or None to update (an expiry in the past is allowed: it stops
    the worker at once, as worker-manager allows for "immediately expiring" a worker)."""
    if not pool_hand_made:
        return NOT_SUPPORTED
    return None
