"""The take-over's part of registration: what an imported worker (wm/take_over/marks.py) is
allowed that no worker wm launched is. Its identity proof is checked against the cloud id
worker-manager named it by while no scan has adopted its VM (`unadopted_cloud_id`, pure, called
by wm.workers.registration_policy.decide), and its first reregisterWorker is accepted on its own
credentials, since wm never saw the secret worker-manager gave it
(`reregisters_on_its_credentials`, which wm/take_over/imported_reregistration.py applies for
the reregisterWorker route once the secret did not match). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from wm.model import WorkerRecord
from wm.take_over.marks import imported_from
from wm.tc.credentials import worker_client_id
from wm.workers.transitions import ADOPTED_REREGISTER

REREGISTERS_FROM = ADOPTED_REREGISTER.from_states


@dataclass(frozen=True)
class Signer:
    """Who signed a reregisterWorker request, as wm's authenticator established it."""

    client_id: str | None  # the credentials' name (None: unsigned)
    issuer: str | None  # the issuer whose certificate wm checked itself (None: none, or not here)


def unadopted_cloud_id(worker: WorkerRecord) -> str | None:
    """The cloud id an imported worker's proof is checked against while its row has none: it
    booted but had not registered before the move, and no scan has adopted its VM yet;
    worker-manager named it by its cloud's id (EC2 instance id, GCE numeric instance id). None
    for any other worker."""
    if imported_from(worker.provider_data) is None:
        return None
    return worker.tc_worker_id


def reregisters_on_its_credentials(
    worker: WorkerRecord | None, signer: Signer | None, issuer_client_id: str
) -> bool:
    """Whether a reregisterWorker whose secret wm cannot check is accepted: the worker was
    imported from a legacy worker-manager (which gave it a secret wm never saw), it is live
    (running, or requested if it registered with worker-manager after the import), and
    the request is signed with that very worker's temporary credentials, issued by the
    deployment's worker-manager client, whose certificate wm verified itself. Anyone else (an
    operator, another worker, a client of the auth service, even one named like the worker)
    and any worker wm launched is refused as today. The route asks only once the secret failed,
    and the writer requires the row to hold no secret yet: once renewed here, the worker
    reregisters with wm's secret like any other."""
    if worker is None or signer is None or imported_from(worker.provider_data) is None:
        return False
    # Requested too: it registered with worker-manager after the import read it as requested,
    # and wm's row has not heard of it since (its credentials say it did).
    if worker.state not in REREGISTERS_FROM or worker.tc_worker_id is None:
        return False
    if signer.issuer is None or signer.issuer != issuer_client_id:
        return False
    own = worker_client_id(
        provider_id=worker.provider_id,
        worker_pool_id=worker.pool_id,
        worker_group=worker.worker_group,
        worker_id=worker.tc_worker_id,
    )
    return signer.client_id == own
