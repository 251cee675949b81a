"""Every change a worker row goes through, as one table of typed transitions (pure).

The writers of worker rows (wm/db/worker_writes.py, scan_writes.py, imported_workers.py) take
a change only as one of these, refuse it from a state the table does not allow, and guard the
same states in their SQL, so no process, however it races another, can move a row where this
table does not lead. A scan's decision (wm/scanning/scan_diff.py) reads `SCAN_SIGHTINGS` below:
which transition a row makes when the cloud shows its VM in some state.

A transition either moves the row to a state, keeps the state it is in (a stamp, an id learnt,
a deadline extended), writes the row (`CREATE`, from no row) or deletes it (`WITHDRAW`,
`EXPIRE`).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from enum import Enum

from wm.model import WorkerState

R, U, S, X = WorkerState.REQUESTED, WorkerState.RUNNING, WorkerState.STOPPING, WorkerState.STOPPED
LIVE = frozenset({R, U})
UNSTOPPED = frozenset({R, U, S})
ANY = frozenset(WorkerState)


class Outcome(Enum):
    """What a transition does to the row besides its state."""

    MOVE = "move"  # to `to_state` (which may equal the from-state)
    KEEP = "keep"  # the row keeps whatever state it is in
    INSERT = "insert"  # a new row, in `to_state`
    DELETE = "delete"  # the row goes


@dataclass(frozen=True)
class Transition:
    name: str
    from_states: frozenset[WorkerState]  # empty for INSERT: there is no row yet
    outcome: Outcome
    to_state: WorkerState | None = None  # for MOVE and INSERT
    why: str = ""

    def allows(self, state: WorkerState | None) -> bool:
        """Whether a row in `state` (None: no row) may make this transition."""
        if self.outcome is Outcome.INSERT:
            return state is None
        return state in self.from_states

    def target(self, state: WorkerState) -> WorkerState | None:
        """The row's state after this transition from `state`; None when the row is deleted.
        Raises `TransitionRefused` from a state the table does not allow."""
        if not self.allows(state):
            raise TransitionRefused(self, state)
        if self.outcome is Outcome.DELETE:
            return None
        if self.outcome is Outcome.KEEP:
            return state
        assert self.to_state is not None
        return self.to_state

    @property
    def from_values(self) -> list[str]:
        """The from-states as the database stores them (for the writer's WHERE clauses)."""
        return sorted(s.value for s in self.from_states)

    def __str__(self) -> str:
        return self.name


class TransitionRefused(ValueError):
    """A transition the table does not allow from the row's state: nothing was written."""

    def __init__(self, transition: Transition, state: WorkerState | None) -> None:
        self.transition = transition
        self.state = state
        where = "no row" if state is None else f"a {state.value} row"
        super().__init__(f"worker transition {transition.name} is not allowed from {where}")


@dataclass(frozen=True, slots=True)  # a first scan of a fleet makes one a row
class RowChange:
    """One row's transition, if the row is still as it was read (its version and state): what a
    scan decides (wm/scanning/scan_diff.py) and what the writer applies (wm/db/worker_writes.py)."""

    worker_id: str
    version: int
    from_state: WorkerState  # the state it was read in
    transition: Transition  # a scan's: SEEN, STARTED, LOST, DEADLINE, GONE or DELETED
    cloud_id: str | None = None
    reason: str | None = None
    preempted: bool = False  # stamp preempted_at: the cloud took the VM back
    tc_worker_id: str | None = None  # Taskcluster's workerId, when the row learns its VM's
    # The class of the cloud's refusal, when the change stops a launch the cloud failed late.
    refused: str | None = None

    @property
    def to_state(self) -> WorkerState:
        """Where the table leads it (TransitionRefused if nowhere: no scan deletes rows)."""
        target = self.transition.target(self.from_state)
        if target is None:
            raise TransitionRefused(self.transition, self.from_state)
        return target


def _t(
    name: str,
    from_states: AbstractSet[WorkerState],
    outcome: Outcome,
    to_state: WorkerState | None = None,
    why: str = "",
) -> Transition:
    return Transition(name, frozenset(from_states), outcome, to_state, why)


M, K = Outcome.MOVE, Outcome.KEEP

# The provisioner: the intent row, committed before the create, then what the cloud answered.
CREATE = _t("create", frozenset(), Outcome.INSERT, R, "intent row, before any cloud call")
ACCEPT = _t("accept", {R}, M, R, "the cloud took the create: its cloud id is learnt")
UNANSWERED = _t("unanswered", {R}, M, R, "the create's answer never came: the VM may exist")
REFUSE = _t("refuse", {R}, M, X, "the cloud surely made nothing: a failed create")
WITHDRAW = _t("withdraw", {R}, Outcome.DELETE, None, "its create was never sent: no VM to find")
# The worker API.
REGISTER = _t("register", {R}, M, U, "registerWorker, once, before the registration deadline")
REREGISTER = _t("reregister", {U}, M, U, "reregisterWorker: a new secret, a later deadline")
REMOVE = _t("remove", LIVE, M, S, "removeWorker: the scanner deletes its VM")
# Its tasks (the builtin queue): claiming one restarts the queue inactivity clock. Any state:
# a worker keeps claiming until it learns it should stop.
TASK_CLAIMED = _t("task-claimed", ANY, K, None, "claimed a task: active now")
# The provisioner's scale-down advice, served by shouldWorkerTerminate.
ADVISE_STOP = _t("advise-stop", {U}, M, U, "more running capacity than the pool needs")
WITHDRAW_ADVICE = _t("withdraw-advice", {U}, M, U, "the pool needs it again")
# The scanner: what the cloud's list (or a look-up) showed, deadlines, deletions.
SEEN = _t("seen", UNSTOPPED, K, None, "listed: learns its cloud id or workerId")
STARTED = _t("started", {R}, M, U, "the cloud runs it and its pool needs no registration")
LOST = _t("lost", LIVE, M, S, "the cloud stopped it (pre-empted, evicted, died): delete the rest")
DEADLINE = _t("deadline", LIVE, M, S, "a lifecycle deadline passed: terminate")
GONE = _t("gone", UNSTOPPED, M, X, "not listed, and a look-up found nothing")
DELETED = _t("deleted", {S}, M, X, "the delete finished: nothing is left in the cloud")
RECORD = _t("record", UNSTOPPED, K, None, "provider data the cloud will not tell again")
CLOUD_RUNNING = _t("cloud-running", ANY, K, None, "first seen running by the cloud (stamp)")
DELETE_CALLED = _t("delete-called", ANY, K, None, "the first delete was sent (stamp)")
CHECKED = _t("checked", ANY, K, None, "a scan saw it (stamp)")
EXPIRE = _t("expire", {X}, Outcome.DELETE, None, "stopped past the retention: forgotten")
# Workers no cloud launches (a static provider's, wm/workers/static_workers.py): made and stopped by
# the API and by their expiry, with nothing in a cloud to create, find or delete.
MAKE = _t("make", frozenset(), Outcome.INSERT, U, "createWorker: running from the start")
AMEND = _t("amend", ANY, K, None, "updateWorker: its expiry, capacity or secret")
CHECK_IN = _t("check-in", {U}, M, U, "registerWorker while running, as often as it restarts")
STOP = _t("stop", LIVE, M, X, "removeWorker: nothing in a cloud to delete")
LAPSE = _t("lapse", LIVE, M, X, "its expires passed: nothing in a cloud to delete")

# Workers a legacy worker-manager launched, imported as they were (`wm import`,
# wm/take_over/marks.py; written by wm/db/imported_workers.py): a new row in the state
# worker-manager gave it; from then on the scans and the API move it as any other.
ADOPT_REQUESTED = _t("adopt-requested", frozenset(), Outcome.INSERT, R, "imported, not registered")
ADOPT_RUNNING = _t("adopt-running", frozenset(), Outcome.INSERT, U, "imported, registered")
ADOPT_STOPPING = _t("adopt-stopping", frozenset(), Outcome.INSERT, S, "imported, being removed")
# Its first reregisterWorker at wm, on the credentials worker-manager gave it when it registered
# there: a running worker's, or a requested one's that registered with worker-manager after the
# import read it (those credentials are worker-manager's proof that it did).
ADOPTED_REREGISTER = _t(
    "adopted-reregister",
    {R, U},
    M,
    U,
    "an imported worker's first reregistration, on its credentials",
)
ADOPTIONS: Mapping[WorkerState, Transition] = {
    R: ADOPT_REQUESTED,
    U: ADOPT_RUNNING,
    S: ADOPT_STOPPING,
}

TRANSITIONS: tuple[Transition, ...] = (
    CREATE,
    ACCEPT,
    UNANSWERED,
    REFUSE,
    WITHDRAW,
    REGISTER,
    REREGISTER,
    REMOVE,
    TASK_CLAIMED,
    ADVISE_STOP,
    WITHDRAW_ADVICE,
    SEEN,
    STARTED,
    LOST,
    DEADLINE,
    GONE,
    DELETED,
    RECORD,
    CLOUD_RUNNING,
    DELETE_CALLED,
    CHECKED,
    EXPIRE,
    MAKE,
    AMEND,
    CHECK_IN,
    STOP,
    LAPSE,
    ADOPT_REQUESTED,
    ADOPT_RUNNING,
    ADOPT_STOPPING,
    ADOPTED_REREGISTER,
)

# (row state, cloud state) -> the transition a scan makes when the cloud lists the row's VM.
# Registration, not the cloud, moves a worker of a pool that requires it to running
# (`scan_sighting`); a stopped cloud state means the VM may still have resources to delete,
# so the row goes to stopping and the scanner deletes it.
SCAN_SIGHTINGS: Mapping[tuple[WorkerState, WorkerState], Transition] = {
    (R, R): SEEN,
    (R, U): SEEN,  # STARTED when the pool does not require registration
    (R, S): LOST,
    (R, X): LOST,
    (U, R): SEEN,
    (U, U): SEEN,
    (U, S): LOST,
    (U, X): LOST,
    (S, R): SEEN,
    (S, U): SEEN,
    (S, S): SEEN,
    (S, X): SEEN,
}


def scan_sighting(
    row_state: WorkerState, cloud_state: WorkerState, requires_registration: bool
) -> Transition:
    """The transition a scan makes for a live row whose VM the cloud lists in `cloud_state`
    (a stopped row's VM is an orphan, not a worker: KeyError)."""
    if row_state == R and cloud_state == U and not requires_registration:
        return STARTED
    return SCAN_SIGHTINGS[(row_state, cloud_state)]
