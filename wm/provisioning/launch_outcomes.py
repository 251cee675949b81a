"""What a pass's creates came to, as row updates and pool errors (pure): a worker the cloud
took is recorded with its cloud id; a create that never left the process is withdrawn; only a
definite "nothing was made" stops a row, anything else leaves it requested for the scan or
intent recovery to settle; failures become one pool error per batch and error code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from wm.db.pool_errors import NewPoolError
from wm.db.workers import LaunchOutcome
from wm.errors import CloudError, ErrorCategory
from wm.providers.base import LaunchBatch, LaunchResult


def judge_results(
    provider_id: str, batches: Sequence[LaunchBatch], results: Mapping[str, LaunchResult]
) -> tuple[list[LaunchOutcome], list[NewPoolError]]:
    """Turn create results into row updates and pool errors (one error row per batch and code)."""
    outcomes: list[LaunchOutcome] = []
    new_errors: list[NewPoolError] = []
    for batch in batches:
        failures: dict[tuple[str, str], list[CloudError]] = {}
        for intent in batch.intents:
            result = results.get(intent.worker_id)
            if result is not None and result.cloud_id is not None:
                outcomes += accepted_outcomes([result])
                continue
            error = (result.error if result else None) or CloudError(
                provider_id, ErrorCategory.TRANSIENT, "NoResult", "the provider returned no result"
            )
            if error.never_sent:
                # The process stopped before this create left it: there is no worker to stop
                # (nor to hold to a registration deadline), and nothing for the pool's errors.
                outcomes.append(LaunchOutcome(intent.worker_id, None, {}, withdrawn=True))
                continue
            # Only a definite "nothing was made" stops the row. Otherwise (a lost answer, a
            # 5xx, or a refusal after an attempt that may have acted) the VM may exist: the
            # row stays requested, to be adopted by its tag or stopped once surely VM-less.
            if error.nothing_applied:
                reason = f"launch failed: {error.category} {error.code}"
                outcomes.append(
                    LaunchOutcome(intent.worker_id, None, {}, reason, refused=error.category)
                )
            else:
                outcomes.append(LaunchOutcome(intent.worker_id, None, {}))
            failures.setdefault((str(error.category), error.code), []).append(error)
        for (category, code), errs in failures.items():
            new_errors.append(
                NewPoolError(
                    pool_id=batch.pool_id,
                    kind=category,
                    title=f"launch failed: {code}",
                    description=errs[0].message,
                    provider_id=provider_id,
                    launch_config_id=batch.spec.launch_config_id,
                    extra={"workers": len(errs), "region": batch.spec.region},
                )
            )
    return outcomes, new_errors


def accepted_outcomes(results: Sequence[LaunchResult]) -> list[LaunchOutcome]:
    """The row updates of the creates the cloud took (its cloud id, launch data and
    Taskcluster workerId); the others are judged once their whole pass has answered."""
    return [
        LaunchOutcome(r.worker_id, r.cloud_id, dict(r.provider_data), tc_worker_id=r.tc_worker_id)
        for r in results
        if r.cloud_id is not None
    ]
