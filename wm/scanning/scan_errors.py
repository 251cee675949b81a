"""The pool errors a scan files (pure): workers that missed their registration deadline, and
launches the cloud failed after accepting them (the take-over files its own: VMs of the legacy
worker-manager that no import took, wm/take_over/adoption_report.py). Each names what went
wrong and what to look at, for `wm pools errors` and workerPoolErrorStats, and weighs on its
launch config like a refused create."""

from __future__ import annotations

from collections.abc import Sequence

from wm.db.pool_errors import NewPoolError
from wm.errors import CloudError, ErrorCategory
from wm.model import WorkerRecord
from wm.workers import lifecycle

ERROR_EXAMPLES = 5  # worker ids named in one pool error
# Refusals filed under their category, as the provisioner files a refused create's.
FILED_AS_KIND = frozenset({ErrorCategory.CAPACITY, ErrorCategory.QUOTA})


def registration_errors(workers: Sequence[WorkerRecord]) -> list[NewPoolError]:
    """One pool error per launch config whose workers missed their registration deadline:
    an image that boots but never registers shows in `wm pools errors`, and the provisioner
    weighs its launch config less, as it does after launch failures."""
    by_config: dict[tuple[str, str], list[WorkerRecord]] = {}
    for worker in workers:
        by_config.setdefault((worker.pool_id, worker.launch_config_id), []).append(worker)
    return [
        NewPoolError(
            pool_id=pool_id,
            kind=lifecycle.REGISTRATION_TIMEOUT,
            title="workers did not register in time",
            description=(
                f"{len(late)} worker(s) were not registered (or, where the pool needs no "
                "registration, not running) by their registration deadline and were "
                "terminated: does the image boot, start the worker and reach wm's API?"
            ),
            provider_id=late[0].provider_id,
            launch_config_id=launch_config_id,
            extra=_error_extra(late),
        )
        for (pool_id, launch_config_id), late in sorted(by_config.items())
    ]


def _error_extra(workers: Sequence[WorkerRecord]) -> dict[str, object]:
    """What a pool error about these workers (one launch config's, one region's) carries."""
    return {
        "workers": len(workers),
        "examples": [w.worker_id for w in workers[:ERROR_EXAMPLES]],
        "region": workers[0].worker_group,
    }


def launch_errors(failed: Sequence[tuple[WorkerRecord, CloudError]]) -> list[NewPoolError]:
    """One pool error per launch config and reason whose workers the cloud failed to launch
    after accepting them (each with the refusal its provider read from the stop reason);
    weighed, like every launch error, against the launch config. A capacity or quota refusal
    is filed as its own kind, as a refused create is."""
    by_config: dict[tuple[str, str, str], list[tuple[WorkerRecord, CloudError]]] = {}
    for worker, refusal in failed:
        key = (worker.pool_id, worker.launch_config_id, worker.stop_reason or "")
        by_config.setdefault(key, []).append((worker, refusal))
    errors = []
    for (pool_id, launch_config_id, reason), group in sorted(
        by_config.items(), key=lambda item: item[0]
    ):
        refusal = group[0][1]
        kind = refusal.category if refusal.category in FILED_AS_KIND else "launch-failed"
        workers = [w for w, _ in group]
        errors.append(
            NewPoolError(
                pool_id=pool_id,
                kind=str(kind),
                title=f"launch failed: {refusal.code}",
                description=reason,
                provider_id=workers[0].provider_id,
                launch_config_id=launch_config_id,
                extra=_error_extra(workers),
            )
        )
    return errors
