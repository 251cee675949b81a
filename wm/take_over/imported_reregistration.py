"""An imported worker's first reregisterWorker, on its own credentials (README: "Moving a
deployment onto wm"): the reregisterWorker route's one take-over hook, asked only once the
secret did not match. Reads the worker, applies the take-over's policy
(wm/take_over/registration.py) and renews its row (wm/db/imported_workers.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from wm.db import api_reads
from wm.db.imported_workers import renew_imported
from wm.db.worker_writes import Reregistered
from wm.take_over.registration import Signer, reregisters_on_its_credentials

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from wm.tc.hawk import Authenticated


def reregister_imported(
    engine: Engine,
    names: tuple[str, str, str],
    new_hash: str,
    who: Authenticated | None,
    issuer_client_id: str,
    *,
    hand_made_providers: Sequence[str],
    hand_made_timeout_s: float,
) -> Reregistered | None:
    """A worker imported from a legacy worker-manager, whose secret for it wm never saw: its
    own credentials, issued by the deployment's worker-manager client, prove who it is, once
    (the writer requires that the row holds no secret yet). Read only when the secret did not
    match, so a genuine worker's reregistration never pays for it. `who`: who signed the
    request, as wm's authenticator established it. `names`: its pool, worker
    group and workerId. Its renewed credentials last its pool's reregistration timeout, or
    `hand_made_timeout_s` for a worker of `hand_made_providers` (as `reregister`'s)."""
    target = api_reads.registration_target(engine, *names)
    worker = target.worker
    signer = Signer(who.client_id, who.issuer) if who is not None else None
    if worker is None or not reregisters_on_its_credentials(worker, signer, issuer_client_id):
        return None
    made_by_hand = worker.provider_id in hand_made_providers
    timeout = hand_made_timeout_s if made_by_hand else target.reregistration_timeout_s
    expires = renew_imported(engine, worker.worker_id, new_hash, timeout)
    return None if expires is None else Reregistered(expires, worker.provider_id)
