"""registerWorker's policy: whether the worker a registration names may register, and if so
what its cloud's identity proof must show. Pure: the route reads the target, verifies the proof
with the provider's verifier and writes the registration around `decide`.

The refusals, their order and their words are worker-manager's (TC `services/worker-manager/
src/api.js` registerWorker, taskcluster/taskcluster @ 9d59eb59). The worker's state is judged
before its proof, so a replayed proof costs no signature check.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from wm.kinds import KINDS
from wm.kinds.base import ONCE, WHILE_RUNNING, Registration
from wm.model import WorkerRecord
from wm.take_over.registration import unadopted_cloud_id
from wm.workers.identity import ExpectedIdentity


@dataclass(frozen=True)
class Refusal:
    """A registration refused, as Taskcluster answers it."""

    code: str  # Taskcluster's error code: ResourceNotFound (404) or InputError (400)
    message: str  # worker-manager's words, shown to the worker as they are


POOL_MISSING = Refusal("ResourceNotFound", "Worker pool does not exist")
PROVIDER_MISSING = Refusal("ResourceNotFound", "Provider does not exist")
WORKER_MISSING = Refusal("ResourceNotFound", "Worker not found")
PROVIDER_NOT_USED = Refusal("InputError", "Worker pool does not use this provider")
EXPIRED = Refusal("InputError", "Worker has expired")
OTHER_PROVIDER = Refusal("InputError", "Worker does not belong to this provider")
# Also the answers when the registration's write finds the worker no longer in its kind's
# registration state (wm/kinds/base.py): a concurrent registration won, its deadline passed,
# or a hand-made worker was stopped meanwhile.
NOT_REQUESTED = Refusal("InputError", ONCE.refusal)
NOT_RUNNING = Refusal("InputError", WHILE_RUNNING.refusal)

# registerWorker's answer to a refused proof of no known kind; each kind's own words are its
# description's proof_rejected.
PROOF_REJECTED_OTHERWISE = "Invalid proof"


@dataclass(frozen=True)
class RegistrationRequest:
    """What a registration claims: Taskcluster's names of the worker and its provider."""

    pool_id: str  # workerPoolId
    provider_id: str  # providerId
    worker_group: str  # workerGroup
    worker_id: str  # workerId: the cloud's name of the worker


@dataclass(frozen=True)
class RegistrationTarget:
    """The pool and worker a registration names, as the database holds them (one read)."""

    pool_exists: bool
    worker: WorkerRecord | None  # None: no such worker in the pool (or no launch config)
    pool_provider_id: str | None = None  # None: the pool was deleted
    previous_provider_ids: tuple[str, ...] = ()  # providers the pool moved away from
    reregistration_timeout_s: float = 0.0
    worker_config: Mapping[str, Any] = field(default_factory=dict)  # its launch config's
    expired: bool = False  # past its registration deadline, by the database's clock


@dataclass(frozen=True)
class Deployment:
    """What the deployment adds to every registration."""

    deployment_id: str
    audience: str  # the root URL: GCE tokens are minted for it
    verifiable_providers: Collection[str]  # providers with an identity proof verifier
    provider_kinds: Mapping[str, str] = field(default_factory=dict)  # provider id -> its kind


def decide(
    target: RegistrationTarget, request: RegistrationRequest, deployment: Deployment
) -> Refusal | ExpectedIdentity:
    """The refusal to answer, or the identity the worker's proof must show."""
    if not target.pool_exists:
        return POOL_MISSING
    if request.provider_id not in deployment.verifiable_providers:
        return PROVIDER_MISSING
    worker = target.worker
    if worker is None:
        return WORKER_MISSING
    allowed = {target.pool_provider_id, *target.previous_provider_ids} - {None}
    if request.provider_id not in allowed:
        return PROVIDER_NOT_USED
    if target.expired:
        return EXPIRED
    if worker.provider_id != request.provider_id:
        return OTHER_PROVIDER
    registration = registration_of(deployment.provider_kinds, request.provider_id)
    if worker.state != registration.state:
        return Refusal("InputError", registration.refusal)
    cloud_id = worker.cloud_id or unadopted_cloud_id(worker)  # the take-over's hook
    return ExpectedIdentity(
        deployment_id=deployment.deployment_id,
        provider_id=request.provider_id,
        pool_id=request.pool_id,
        worker_id=worker.worker_id,
        region=worker.worker_group,
        cloud_id=cloud_id,
        tc_worker_id=worker.tc_worker_id,
        audience=deployment.audience,
        provider_data=worker.provider_data,
        requested_at=worker.created,
    )


def registration_of(provider_kinds: Mapping[str, str], provider_id: str) -> Registration:
    """How the provider's workers register (its kind's description); a provider the config
    no longer names is taken for a cloud's: its VMs register once."""
    description = KINDS.get(provider_kinds.get(provider_id) or "")
    return ONCE if description is None else description.registration


def launched(provider_kinds: Mapping[str, str], provider_id: str) -> bool:
    """Whether the provider's workers are launched by a cloud rather than made by createWorker
    (its kind's `hand_made`: static). A provider the config no longer names is taken for a
    cloud's: its scanner would finish a removal."""
    description = KINDS.get(provider_kinds.get(provider_id) or "")
    return description is None or not description.hand_made


def proof_rejected(kind: str | None) -> Refusal:
    """The one answer to every refused proof of a provider kind: the same whatever was wrong,
    so a forger learns nothing from it."""
    description = KINDS.get(kind or "")
    message = description.proof_rejected if description else PROOF_REJECTED_OTHERWISE
    return Refusal("InputError", message)
