"""Bench an offering its cloud has just refused for want of capacity: a pure state machine.

After a capacity refusal in an offering (type x zone x market) nothing launches there for a
TTL that doubles with each refusal in a row, from 3 minutes (10 for Azure's spot allocation
failures and for quotas) up to 30 (Karpenter's unavailable-offerings cache, with its TTL
growing; issue 40 §3). When the TTL has run out the offering gets one probe worker, not a
pass's worth (#6499's "keep probing failing ones", without hammering an offering that is still
dry): the probe's success reopens it, its refusal benches it for the next, doubled, TTL. A
probe whose answer never comes (a transient failure, a lost answer) is tried again after
PROBE_ANSWER_WAIT_S. A refusal that names zones with capacity (EC2's message) reopens those
zones for that type at once.

Times are epoch seconds. The state is per provider and offering; wm.db keeps it. The
durations are the clouds' seconds; `speed` (the clouds' seconds a real second, 1 but in a
simulated market run faster: [launch_choice] clock_speed) shortens them in real time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from wm.errors import SPOT, ErrorCategory, ErrorScope
from wm.model import Offering

FIRST_TTL_S = 180.0  # the first bench after a capacity refusal (3 minutes)
MAX_TTL_S = 1800.0  # no bench longer than 30 minutes: a zone dry for longer is still probed
# Azure's spot allocation failures (AllocationFailed, SkuNotAvailable) last: Azure's own
# guidance is to wait or move, and #6817/#4938 saw them repeat for up to an hour.
AZURE_SPOT_FIRST_TTL_S = 600.0
QUOTA_FIRST_TTL_S = 600.0  # a quota frees only when instances go or the limit is raised
AZURE_SPOT_CODES = frozenset({"allocationfailed", "skunotavailable"})
# Longer than any create takes to answer (an ARM deployment's failure can take minutes): a
# probe unanswered by then is taken as lost, and the next one is due.
PROBE_ANSWER_WAIT_S = 600.0


class Admission(StrEnum):
    """What a pass may launch in an offering."""

    OPEN = "open"  # anything its weight earns
    PROBE = "probe"  # benched, its TTL run out: one worker, the probe of this window
    BENCHED = "benched"  # nothing: within its TTL, or its probe not answered yet


@dataclass(frozen=True)
class BenchState:
    failures: int = 0  # consecutive capacity refusals
    benched_until: float | None = None
    probe_sent_at: float | None = None  # the one probe of the current window


def ttl_s(failures: int, first_ttl_s: float = FIRST_TTL_S, speed: float = 1.0) -> float:
    """min(first · 2^(k-1), 30 min) for the k-th refusal in a row; 0 for none."""
    if failures <= 0:
        return 0.0
    # 2**k overflows a float near k = 1024; the cap is reached long before.
    return min(first_ttl_s * 2.0 ** min(failures - 1, 64), MAX_TTL_S) / speed


def after_refusal(
    state: BenchState, now: float, first_ttl_s: float = FIRST_TTL_S, speed: float = 1.0
) -> BenchState:
    """A capacity refusal in the offering at `now`. One that comes while the offering is
    benched and no probe is out was launched before the bench was known (another launch config
    or pool in the same offering, a batch already in flight): the same dry spell, so it keeps
    the count and the window, lengthening it at most to a TTL from now."""
    until = state.benched_until
    if until is not None and now < until and state.probe_sent_at is None:
        return replace(
            state, benched_until=max(until, now + ttl_s(state.failures, first_ttl_s, speed))
        )
    failures = state.failures + 1
    return BenchState(failures, now + ttl_s(failures, first_ttl_s, speed), None)


def after_success(state: BenchState) -> BenchState:
    """The cloud gave capacity in the offering: it is open, the count starts again."""
    return BenchState()


def admission(state: BenchState, now: float, speed: float = 1.0) -> Admission:
    if state.failures <= 0 or state.benched_until is None:
        return Admission.OPEN
    if now < state.benched_until:
        return Admission.BENCHED
    probe = state.probe_sent_at
    waited = probe is not None and now >= probe + PROBE_ANSWER_WAIT_S / speed
    if probe is not None and probe >= state.benched_until and not waited:
        return Admission.BENCHED  # this window's probe is out, its answer not in yet
    return Admission.PROBE


def after_probe(state: BenchState, now: float) -> BenchState:
    """The pass launched the window's one probe worker at `now`."""
    return replace(state, probe_sent_at=now)


def first_ttl_s(scope: ErrorScope, code: str) -> float:
    """The first TTL of a refusal of this scope and code: 10 min for a quota and for Azure's
    spot AllocationFailed / SkuNotAvailable, 3 min for any other capacity refusal."""
    if scope.category is ErrorCategory.QUOTA:
        return QUOTA_FIRST_TTL_S
    if scope.market == SPOT and code.lower() in AZURE_SPOT_CODES:
        return AZURE_SPOT_FIRST_TTL_S
    return FIRST_TTL_S


def refused_offering(scope: ErrorScope) -> Offering | None:
    """The offering a capacity refusal benches: its region, zone (None: the region's any
    zone, when the launch named none), type and market. None for a quota or a scope too wide
    to name one offering (no region, type or market): a quota holds for a whole family or
    market, which the caller matches against its offerings itself."""
    if scope.category is not ErrorCategory.CAPACITY:
        return None
    if scope.region is None or scope.instance_type is None or scope.market is None:
        return None
    return Offering(scope.region, scope.zone, scope.instance_type, scope.market)


def unbenched_by_hint(scope: ErrorScope) -> list[Offering]:
    """The offerings a capacity refusal says do have capacity: the same type and market in
    each zone its message names (EC2's "... or choosing us-east-1b, us-east-1c"), in the
    refusal's region, sorted. The caller resets their bench states (after_success); the
    refused zone itself is never among them, whatever the message says."""
    refused = refused_offering(scope)
    if refused is None:
        return []
    return sorted(
        {
            Offering(refused.region, zone, refused.instance_type, refused.market)
            for zone in scope.zones_with_capacity
            if zone and zone != refused.zone
        }
    )
