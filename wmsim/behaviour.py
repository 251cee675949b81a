"""Behaviour knobs shared by the simulated clouds: latency, faults, boot and delete times.

Each simulated cloud holds one `Faults` object. Every cloud API request (not the `/_sim`
control requests) is counted per operation and passed through `Faults.before`, which sleeps
the simulated latency and decides the request's fate. Tests and benchmarks change behaviour
at run time through `Behaviour.update` or the `/_sim/behaviour` control endpoint.

Every request is also written to a journal (`Faults.journal`): when it arrived, its fate, and
for creates the idempotency key and a digest of the parameters, so fault tests can check what
reached the cloud (no calls while a client is paused, retries that repeat the same request).
A hang is cut short when the sim is reset or stopped: the hung request is then answered with
a 5xx and never carried out, so it cannot act on a later test's state.

A lost answer is the other way round: the request is carried out at once, then its answer is
held for hang_s and replaced by the cloud's 5xx, as when a call outlives the client's timeout
or a gateway drops the reply after the backend acted. The client cannot tell that the cloud
acted; only the journal (`SimRequest.lost`) and the cloud's state do. Cutting the hold short
(reset, stop) only answers sooner: what was carried out stays carried out.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

from wmsim.cloud import SimCloudConfig

# Behaviour keys that hold a list (sent as JSON arrays to /_sim/behaviour).
TUPLE_KEYS = frozenset({"fault_operations", "no_capacity"})


@dataclass
class Behaviour:
    latency_ms: float = 0.0  # mean per-call latency
    latency_jitter_ms: float = 0.0  # latency is uniform in mean +- jitter
    boot_s: float = 0.0  # created to running
    delete_s: float = 0.0  # delete issued to gone
    failure_rate: float = 0.0  # share of calls answered with the cloud's 5xx
    throttle_rate: float = 0.0  # share of calls answered with the cloud's throttling error
    retry_after_s: float | None = (
        None  # Retry-After sent with throttling answers, where the cloud does
    )
    quota_instances: int | None = None  # creates beyond this many live instances fail with quota
    page_size_max: int | None = None  # lists never return more than this per page
    hang_rate: float = 0.0  # share of calls that do not answer for hang_s
    hang_s: float = 0.0
    # Share of calls carried out whose answer is then lost: held for hang_s, then a 5xx.
    lose_rate: float = 0.0
    # Operations faults apply to; empty means all. Latency applies to every operation.
    fault_operations: tuple[str, ...] = ()
    # "random": each call draws its fate; "even": the draws follow a low-discrepancy sequence,
    # so the rates hold exactly over any run of calls and a scenario repeats call for call.
    fault_spread: str = "random"
    # Offerings with no spare capacity: EC2 refuses a RunInstances of the type there with
    # InsufficientInstanceCapacity, naming the region's other zones ("m5.large@us-east-1a" one
    # zone; "m5.large@us-east-1" the region, wherever EC2 would place it).
    no_capacity: tuple[str, ...] = ()
    preempt_share: float = 0.0  # share of spot VMs the cloud pre-empts (EC2/GCE) or evicts
    preempt_within_s: float = 60.0  # ... at a uniform moment this long after they boot
    # The cloud's create-rate bucket, counted in VMs (EC2's RunInstances resource bucket holds
    # 1,000 and refills 2/s per region; the sim keeps one bucket for all its regions): a create
    # asking for more VMs than the bucket holds right now is throttled and takes nothing.
    # None: creates are not rate-limited.
    create_burst: int | None = None
    create_per_s: float = 0.0

    @classmethod
    def from_config(cls, config: SimCloudConfig) -> Behaviour:
        data = config.model_dump(exclude={"port"})
        return cls(**data)

    def update(self, **changes: Any) -> None:
        known = {f.name for f in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise ValueError(f"unknown behaviour keys: {sorted(unknown)}")
        if changes.get("fault_spread", "random") not in FAULT_SPREADS:
            raise ValueError(f"fault_spread must be one of {list(FAULT_SPREADS)}")
        for key, value in changes.items():
            setattr(self, key, tuple(value) if key in TUPLE_KEYS else value)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SimVm:
    """One VM a simulated cloud holds, as tests and leak checks see it."""

    cloud_id: str  # the cloud's own id (EC2 instance id, GCE numeric id, ARM resource id)
    name: str
    region: str  # region, or zone on GCE
    state: str  # pending | running | stopping | stopped | gone
    tags: Mapping[str, str]  # tags / labels as the cloud stores them
    spot: bool
    # Its place in the launch that made it (EC2's AmiLaunchIndex), which names the worker of
    # an EC2 batch whose VMs carry only the batch's tag; None on the other clouds.
    launch_index: int | None = None


FAULT_SPREADS = ("random", "even")
WEYL_FATE = (5**0.5 - 1) / 2  # the golden ratio's fraction
WEYL_HANG = 2**0.5 - 1
WEYL_LOSE = 3**0.5 - 1
JOURNAL_MAX = 200_000  # requests remembered per sim (a long storm stays bounded in memory)


class Preemptions:
    """The spot VMs a simulated cloud will pre-empt, and when: each sim schedules its new spot
    VMs here and, before answering any request, pre-empts those whose time has come, so what
    a client sees never depends on a background thread's timing."""

    def __init__(self, faults: Faults) -> None:
        self._faults = faults
        self._due: dict[str, float] = {}  # VM key -> monotonic time
        self._lock = threading.Lock()

    def schedule(self, key: str, booted_at: float) -> None:
        at = self._faults.preempt_at(booted_at)
        if at is not None:
            with self._lock:
                self._due[key] = at

    def schedule_at(self, key: str, at: float) -> None:
        """Pre-empt the VM at `at` (monotonic), or at its earlier time already scheduled: a
        market's reclaim (wmsim/market_sim.py) beside `preempt_share`'s draws."""
        with self._lock:
            self._due[key] = min(at, self._due.get(key, at))

    def due(self, now: float | None = None) -> list[str]:
        """Keys whose pre-emption is due, each returned once."""
        now = time.monotonic() if now is None else now
        with self._lock:
            ready = [key for key, at in self._due.items() if at <= now]
            for key in ready:
                del self._due[key]
        return ready

    def due_at(self, key: str) -> float | None:
        """When the VM will be pre-empted (monotonic), or None: what its metadata service
        announces as a termination notice shortly before."""
        with self._lock:
            return self._due.get(key)

    def clear(self) -> None:
        with self._lock:
            self._due.clear()


class Outcome(StrEnum):
    OK = "ok"
    THROTTLE = "throttle"
    FAIL = "fail"  # a 5xx
    # Carry the request out, then call `Faults.hold_lost_answer` and answer the cloud's 5xx.
    # Only `before` returns it: the journal says ok (it was carried out) with `lost` set.
    LOST = "lost"


HANG = "hang"  # a forced fate besides the outcomes: hang for hang_s, then answer normally
LOSE = "lose"  # a forced fate: carried out, its answer held for hang_s and then a 5xx


@dataclass(frozen=True)
class SimRequest:
    """One cloud API request as it reached a simulated cloud."""

    at: float  # wall-clock arrival time (time.time()), before any simulated latency
    operation: str
    outcome: Outcome  # what the sim answered: ok (then carried out), throttle or fail
    hung: bool = False  # it hung for hang_s before being answered
    key: str | None = None  # a create's idempotency key: ClientToken, requestId, VM name
    digest: str | None = None  # sha256 of a create's parameters (secrets never kept)
    vms: int = 0  # VMs a create asked for
    # Carried out (outcome ok), but the answer was held for hang_s and replaced by a 5xx.
    lost: bool = False


def digest(params: object) -> str:
    """A stable digest of request parameters, to compare a retry with its first attempt."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()


class Faults:
    """Counts requests per operation, sleeps their latency and decides their outcome."""

    def __init__(
        self,
        behaviour: Behaviour | None = None,
        seed: int | None = None,
        clock: Callable[[], float] = time.monotonic,  # refills the create-rate bucket
    ) -> None:
        self.behaviour = behaviour or Behaviour()
        self._clock = clock
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._calls = 0  # position in the "even" sequence
        # Fates forced on the next requests: of one operation, or (key None) of any.
        self._forced: dict[str | None, deque[str]] = {}
        self._journal: deque[SimRequest] = deque(maxlen=JOURNAL_MAX)
        self._hangs = threading.Condition(self._lock)
        self._hang_generation = 0  # bumped by cut_hangs: hangs of an older one end at once
        self._hanging = 0
        self._create_tokens: float | None = None  # None: the bucket is full
        self._create_refilled_at = 0.0

    def before(
        self, operation: str, *, key: str | None = None, params: object = None, vms: int = 0
    ) -> Outcome:
        """Count, journal, delay and decide one request. `key`, `params` and `vms` describe a
        create: its idempotency key, the parameters it was sent with (digested, never stored)
        and how many VMs it asks for (drawn from the create-rate bucket).

        Outcome.LOST tells the sim to carry the request out, then to call `hold_lost_answer`
        and answer with its 5xx."""
        arrived = time.time()
        b = self.behaviour
        with self._lock:
            self._counts[operation] += 1
            if b.fault_spread == "even":
                # Weyl sequences: evenly spread in [0, 1), starting at 0 (a fault first).
                draw = (self._calls * WEYL_FATE) % 1.0
                hang = (self._calls * WEYL_HANG) % 1.0 < b.hang_rate
                lose = (self._calls * WEYL_LOSE) % 1.0 < b.lose_rate
                self._calls += 1
            else:
                draw = self._rng.random()
                hang = self._rng.random() < b.hang_rate
                lose = self._rng.random() < b.lose_rate
            latency_s = max(0.0, b.latency_ms + (self._rng.random() * 2 - 1) * b.latency_jitter_ms)
            forced = self._pop_forced(operation)
        cut = not self._delay(latency_s / 1000)
        faulted = not b.fault_operations or operation in b.fault_operations
        hung = (faulted and hang and b.hang_s > 0) or forced == HANG
        # One hold per request: a hung request is answered normally, not lost as well.
        lost = not hung and ((faulted and lose) or forced == LOSE)
        if forced in (HANG, LOSE):
            forced = None
        if cut or (hung and not self._hang(b.hang_s)):
            outcome = Outcome.FAIL  # cut short by a reset or stop: answered, never carried out
        elif forced is not None:
            outcome = Outcome(forced)
        elif not faulted or lost:
            outcome = Outcome.OK
        elif draw < b.throttle_rate:
            outcome = Outcome.THROTTLE
        elif draw < b.throttle_rate + b.failure_rate:
            outcome = Outcome.FAIL
        else:
            outcome = Outcome.OK
        if outcome is Outcome.OK and vms > 0 and not self._take_create_tokens(vms):
            outcome = Outcome.THROTTLE
        lost = lost and outcome is Outcome.OK  # a refused request has no answer to lose
        entry = SimRequest(
            arrived,
            operation,
            outcome,
            hung,
            key,
            None if params is None else digest(params),
            vms,
            lost,
        )
        with self._lock:
            self._journal.append(entry)
        return Outcome.LOST if lost else outcome

    def hold_lost_answer(self) -> None:
        """Hold the answer of a request carried out under Outcome.LOST for hang_s (less if
        `cut_hangs` comes first); the sim then answers with its 5xx."""
        self._hang(self.behaviour.hang_s)

    def _take_create_tokens(self, vms: int) -> bool:
        burst = self.behaviour.create_burst
        if burst is None:
            return True
        now = self._clock()
        with self._lock:
            held = burst if self._create_tokens is None else self._create_tokens
            held = min(burst, held + (now - self._create_refilled_at) * self.behaviour.create_per_s)
            self._create_refilled_at = now
            if held < vms:
                self._create_tokens = held
                return False
            self._create_tokens = held - vms
            return True

    def _delay(self, seconds: float) -> bool:
        """Sleep a request's latency; False when a reset or stop cut it short (`cut_hangs`), so
        a slow request of one test is never carried out in the next one's sim."""
        if seconds <= 0:
            return True
        with self._hangs:
            return self._held(time.monotonic() + seconds)

    def _hang(self, seconds: float) -> bool:
        """Hold the request; False when the hang was cut short by `cut_hangs`."""
        with self._hangs:
            self._hanging += 1
            try:
                return self._held(time.monotonic() + seconds)
            finally:
                self._hanging -= 1
                self._hangs.notify_all()

    def _held(self, deadline: float) -> bool:
        """Wait (holding `_hangs`) until the deadline; False if `cut_hangs` came first."""
        generation = self._hang_generation
        while self._hang_generation == generation:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            self._hangs.wait(remaining)
        return False

    def cut_hangs(self, timeout_s: float = 5.0) -> None:
        """End every hang now (those requests fail without being carried out) and every hold
        of a lost answer (answered at once), and wait until none is left, so a held request
        never acts on what the sim holds next."""
        deadline = time.monotonic() + timeout_s
        with self._hangs:
            self._hang_generation += 1
            self._hangs.notify_all()
            while self._hanging and time.monotonic() < deadline:
                self._hangs.wait(deadline - time.monotonic())

    @property
    def hanging(self) -> int:
        """Requests being held right now: by a hang, or with their answer lost."""
        with self._lock:
            return self._hanging

    def force(self, *fates: Outcome | str, operation: str | None = None) -> None:
        """Force the fate of the next requests (of `operation` only, if given), one each,
        whatever the behaviour says: an outcome, "hang" (hang_s, then answered normally) or
        "lose" (carried out, then its answer held for hang_s and replaced by a 5xx)."""
        for fate in fates:
            if fate == Outcome.LOST:
                raise ValueError('force "lose", not "lost": lost is what before() returns')
            if fate not in (HANG, LOSE):
                Outcome(fate)  # ValueError for an unknown one
        with self._lock:
            self._forced.setdefault(operation, deque()).extend(str(fate) for fate in fates)

    def _pop_forced(self, operation: str) -> str | None:
        for key in (operation, None):
            queue = self._forced.get(key)
            if queue:
                return queue.popleft()
        return None

    def preempt_at(self, booted_at: float) -> float | None:
        """When a new spot VM that boots at `booted_at` (monotonic) will be pre-empted; None
        for the VMs the cloud leaves alone. Draws from the faults' generator, so a seeded
        sim pre-empts the same VMs every run."""
        b = self.behaviour
        if b.preempt_share <= 0:
            return None
        with self._lock:
            chosen = self._rng.random() < b.preempt_share
            after_s = self._rng.random() * b.preempt_within_s
        return booted_at + after_s if chosen else None

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def journal(self, *operations: str) -> list[SimRequest]:
        """The requests that arrived, oldest first; only these operations if any are named."""
        with self._lock:
            entries = list(self._journal)
        return [e for e in entries if not operations or e.operation in operations]

    def reset_counts(self) -> None:
        """Zero the request counts, empty the journal, drop forced outcomes, restart the
        "even" fault sequence and fill the create-rate bucket."""
        with self._lock:
            self._create_tokens = None
            self._counts.clear()
            self._journal.clear()
            self._forced.clear()
            self._calls = 0


def lifecycle_state(
    now: float, created_at: float, boot_s: float, deleted_at: float | None, delete_s: float
) -> str:
    """The simulated state of an instance: pending, running, stopping or gone."""
    if deleted_at is not None:
        return "gone" if now >= deleted_at + delete_s else "stopping"
    return "running" if now >= created_at + boot_s else "pending"
