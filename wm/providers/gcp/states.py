"""GCE instance statuses -> wm's worker states, and the stop reason a stopped instance is reported
with (a TERMINATED Spot instance was pre-empted: see provider.py). Pure."""

from __future__ import annotations

from collections.abc import Mapping

from wm.errors import UnknownCloudState
from wm.model import WorkerState

REASON_PREEMPTED = "preempted"
STATES: Mapping[str, WorkerState] = {
    "PENDING": WorkerState.REQUESTED,  # flex-start: waiting for capacity
    "PROVISIONING": WorkerState.REQUESTED,
    "STAGING": WorkerState.REQUESTED,
    "RUNNING": WorkerState.RUNNING,
    # Under repair after a host failure: unusable for a while, then back to RUNNING or
    # TERMINATED. It still exists and still costs, so it is not stopping; the lifecycle
    # deadlines retire a worker that does not come back.
    "REPAIRING": WorkerState.RUNNING,
    "PENDING_STOP": WorkerState.STOPPING,
    "STOPPING": WorkerState.STOPPING,
    "SUSPENDING": WorkerState.STOPPING,
    "DEPROVISIONING": WorkerState.STOPPING,
    "STOPPED": WorkerState.STOPPED,
    "SUSPENDED": WorkerState.STOPPED,
    "TERMINATED": WorkerState.STOPPED,
}
STOPPED_STATUSES = frozenset(s for s, state in STATES.items() if state is WorkerState.STOPPED)
# A delete is already under way (or GCE is shutting it down): another delete adds nothing.
SHUTTING_DOWN_STATUSES = frozenset({"STOPPING", "PENDING_STOP", "DEPROVISIONING"})


def worker_state(provider_id: str, status: str) -> WorkerState:
    """wm's state for a GCE instance status; a status wm does not know is an error."""
    state = STATES.get(status)
    if state is None:
        raise UnknownCloudState(provider_id, status)
    return state


def stop_reason(status: str, spot: bool) -> str | None:
    if status not in STOPPED_STATUSES:
        return None
    if spot and status == "TERMINATED":
        return REASON_PREEMPTED
    return status.lower()
