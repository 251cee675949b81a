"""The pool errors a scan files (pure): workers that missed their registration deadline, and
launches the cloud failed after accepting them (the take-over files its own: VMs of the legacy
worker-manager that no import took, wm/take_over/adoption_report.py). Each names what went
wrong and what to look at, for `wm pools errors` and workerPoolErrorStats, and weighs on its
launch config like a refused create."""

from __future__ import annotations

from collections.abc import Sequence

from wm.db.pool_errors import NewPoolError
from wm.model import WorkerRecord
from wm.workers import lifecycle

ERROR_EXAMPLES = 5  # worker ids named in one pool error
# Stop reasons of workers whose launch the cloud accepted and then failed.
LAUNCH_FAILURE_REASONS = ("arm-deployment-failed", "arm-deployment-canceled")


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


def failed_launch(reason: str | None) -> bool:
    return (reason or "").startswith(LAUNCH_FAILURE_REASONS)


def launch_errors(workers: Sequence[WorkerRecord]) -> list[NewPoolError]:
    """One pool error per launch config and reason whose workers the cloud failed to launch
    after accepting them; weighed, like every launch error, against the launch config."""
    by_config: dict[tuple[str, str, str], list[WorkerRecord]] = {}
    for worker in workers:
        key = (worker.pool_id, worker.launch_config_id, worker.stop_reason or "")
        by_config.setdefault(key, []).append(worker)
    return [
        NewPoolError(
            pool_id=pool_id,
            kind="launch-failed",
            title=f"launch failed: {reason.split(':', 1)[0]}",
            description=reason,
            provider_id=failed[0].provider_id,
            launch_config_id=launch_config_id,
            extra=_error_extra(failed),
        )
        for (pool_id, launch_config_id, reason), failed in sorted(by_config.items())
    ]
